-- sample.lua: text from one or two trained checkpoints; with two, their
-- continuations of the same prompt side by side under their model names
-- (SA or XSA, from each checkpoint's metadata).
--
--   xsa scripts/sample.lua cache/part3-xsa-300steps-HASH.safetensors --prompt "Once upon a time"
--   xsa scripts/sample.lua SA.safetensors XSA.safetensors --tokens 60 --temperature 0.8 --top-k 40 --samples 3
--
-- Every sample is seeded: sample i (1-based) draws from seed + i - 1, for
-- both checkpoints, so the same flags print the same text.
local xsa = xsa or require "xsa"

local spec = {
  name = "sample.lua CHECKPOINT [CHECKPOINT2]",
  summary = "Continues a prompt with one checkpoint, or with two side by side.",
  writes = "no file: prints the continuations (two checkpoints: side by side) to stdout.",
  options = {
    {"prompt", "string", "Once upon a time", "the text to continue"},
    {"tokens", "int", 100, "new tokens per sample (at most)", min = 1},
    {"temperature", "number", 1.0, "softmax temperature; 0 = greedy", min = 0},
    {"top-k", "int", 0, "sample among the K most probable tokens (0: all)", min = 0},
    {"top-p", "number", 1.0, "sample from the smallest set holding P of the probability (1: all)",
      check = function(v) return v > 0 and v <= 1, "must be in (0, 1]" end},
    {"seed", "int", 0, "seed of the first sample", min = 0},
    {"samples", "int", 1, "samples per checkpoint", min = 1},
    {"width", "int", 0, "display width in columns (0: the terminal's)", min = 0},
  },
  epilog = "Checkpoints are model:save / part3_train.lua files (cache/part3-sa-*.safetensors, part3-xsa-*).",
}

-- Positional arguments (checkpoints) apart from the flags.
local function split_args(argv)
  local takes_value = {}
  for _, o in ipairs(spec.options) do takes_value[o[1]] = o[2] ~= "bool" end
  local flags, paths = {}, {}
  local i = 1
  while i <= #argv do
    local a = argv[i]
    if a:sub(1, 2) == "--" or a == "-h" then
      flags[#flags + 1] = a
      local name = a:match("^%-%-([%w%-_]+)$")
      if name and takes_value[name:gsub("_", "-")] and argv[i + 1] then
        flags[#flags + 1] = argv[i + 1]
        i = i + 1
      end
    else
      paths[#paths + 1] = a
    end
    i = i + 1
  end
  return flags, paths
end

local flags, paths = split_args(arg)
local opts = xsa.args.parse(flags, spec)
if #paths < 1 or #paths > 2 then
  io.stderr:write("sample.lua: give one or two checkpoints (see --help)\n")
  os.exit(2)
end
if opts.samples < 1 or opts.tokens < 0 then
  io.stderr:write("sample.lua: --samples must be >= 1 and --tokens >= 0\n")
  os.exit(2)
end

local samples = xsa.samples
local width = opts.width > 0 and opts.width or samples.terminal_width()
local gen = {max_new_tokens = opts.tokens, temperature = opts.temperature, seed = opts.seed,
  top_k = opts.top_k > 0 and opts.top_k or nil, top_p = opts.top_p}

local models = {}
for i, p in ipairs(paths) do
  local ok, m = pcall(xsa.gpt.load, p)
  if not ok then
    io.stderr:write("sample.lua: ", tostring(m), "\n")
    os.exit(1)
  end
  local c = m:config()
  models[i] = {model = m, name = samples.model_name(m), path = p}
  print(string.format("%s: %s (%d layers, d_model %d, seq_len %d, %d parameters)", models[i].name,
    p, c.n_layer, c.d_model, c.seq_len, m:num_params()))
end
print(string.format("prompt: %q; %d tokens, temperature %g, top-k %s, top-p %g, seed %d",
  opts.prompt, opts.tokens, opts.temperature, opts.top_k > 0 and tostring(opts.top_k) or "all", opts.top_p, opts.seed))

-- all samples of one checkpoint in one batch (row i draws from seed + i - 1)
local prompts = {}
for i = 1, opts.samples do prompts[i] = opts.prompt end
local texts, rates = {}, {}
for i, m in ipairs(models) do
  local t, _, info = m.model:generate(prompts, gen)
  texts[i] = t
  rates[i] = info.tokens_per_s
end
for s = 1, opts.samples do
  print(string.format("\n== sample %d (seed %d)", s, opts.seed + s - 1))
  if #models == 1 then
    print(table.concat(samples.wrap(opts.prompt .. texts[1][s], width), "\n"))
  else
    local cols = {}
    for i, m in ipairs(models) do cols[i] = {title = m.name, text = opts.prompt .. texts[i][s]} end
    print(samples.side_by_side(cols, width))
  end
end
local parts = {}
for i, m in ipairs(models) do
  parts[i] = string.format("%s %s", m.name, rates[i] and string.format("%.0f tokens/s", rates[i]) or "n/a")
end
print("\n(decoding: " .. table.concat(parts, ", ") .. ", batch " .. opts.samples .. ")")
