-- xsa.study: what the experiment scripts (scripts/part*.lua) share: the
-- common flags, where results and figures go, data loaders and models of
-- the study's configuration, markdown tables, the per-part summaries the
-- report reads, and a main() wrapper that turns Ctrl-C into a clean exit.
--
-- Layout of outputs (defaults; --out and --plots change them):
--   cache/            results (JSON, cache entries), checkpoints (safetensors)
--   cache/summary/    partN.json: the latest run of each part, for the report
--   plots/            figures (PNG) with their .dat and .gp files
-- Non-goals: anything a user would call from the REPL (see xsa.train, xsa.plot).
local M = {}

local sys = require "xsa.sys"
local numbers = require "xsa.numbers"

local function xsa_lib() return package.loaded.xsa or require("xsa") end

-- The flags every training script has (defaults per part in `d`), plus
-- `extra` ones, minus the names in `skip`.
function M.options(d, extra, skip)
  local o = {
    {"steps", "int", d.steps or 300, "training steps per model"},
    {"seq-len", "int", d.seq_len or 64, "tokens per training window (model context)"},
    {"batch", "int", d.batch or 16, "sequences per batch"},
    {"lr", "number", d.lr or 1e-3, "AdamW learning rate"},
    {"weight-decay", "number", d.weight_decay or 0.01, "AdamW weight decay"},
    {"max-tokens", "int", d.max_tokens or 500000, "TinyStories tokens used (from the start of the text)"},
    {"val-frac", "number", d.val_frac or 0.1, "fraction of the windows held out for validation"},
    {"eval-every", "int", d.eval_every or 20, "steps between evaluations"},
    {"eval-batches", "int", d.eval_batches or 10, "val batches per intermediate evaluation (final: all)"},
    {"lambda", "number", d.lambda or 1.0, "XSA strength (1 = full projection)"},
    {"n-layer", "int", d.n_layer or 2, "transformer blocks"},
    {"d-model", "int", d.d_model or 128, "model width"},
    {"n-head", "int", d.n_head or 2, "attention heads"},
    {"seed", "int", d.seed or 0, "seed of the initial weights and of the batch order"},
    {"threads", "int", d.threads or 0, "BLAS/engine threads (0: leave as is)"},
    {"precision", "string", "f32", "f32, or bf16: the lm_head's products bf16 through oneDNN (opt-in)",
      check = function(v) return v == "f32" or v == "bf16", "expects f32 or bf16" end},
    {"out", "string", "cache", "results folder (JSON, checkpoints, cache entries)"},
    {"plots", "string", "plots", "figures folder"},
    {"format", "string", "png", "figure format: png or svg"},
    {"no-cache", "bool", false, "recompute even when a cached result exists"},
    {"quick", "bool", false, "a fast small run (seconds), for trying things out and tests"},
  }
  for _, e in ipairs(extra or {}) do o[#o + 1] = e end
  if skip then
    local drop = {}
    for _, n in ipairs(skip) do drop[n] = true end
    local kept = {}
    for _, e in ipairs(o) do if not drop[e[1]] then kept[#kept + 1] = e end end
    o = kept
  end
  return o
end

-- Settings after parsing: threads, absolute folders relative to the root
-- for the defaults and to the working directory for user-given paths.
function M.setup(opts)
  local xsa = xsa_lib()
  if opts.threads and opts.threads > 0 then xsa.set_threads(opts.threads) end
  local root = sys.abspath(sys.root())
  local function place(key, default)
    if opts.given and opts.given[key] then return sys.abspath(opts[key]) end
    return root .. "/" .. default
  end
  opts.out = place("out", "cache")
  opts.plots = place("plots", "plots")
  if opts.format ~= "png" and opts.format ~= "svg" then
    io.stderr:write("--format must be png or svg\n")
    os.exit(2)
  end
  sys.mkdir(opts.out)
  sys.mkdir(opts.plots)
  sys.mkdir(opts.out .. "/summary")
  opts.root = root
  return opts
end

-- The data part of a configuration (what defines the loaders).
function M.data_config(opts, seq_len, batch)
  return {
    max_tokens = opts.max_tokens, seq_len = seq_len or opts.seq_len, batch_size = batch or opts.batch,
    val_frac = opts.val_frac, seed = opts.seed,
  }
end

-- Train and val loaders over the first max_tokens tokens of TinyStories.
function M.loaders(dc)
  local xsa = xsa_lib()
  local t0 = os.time()
  local train, val = xsa.data.tinystories{
    max_tokens = dc.max_tokens, seq_len = dc.seq_len, batch = dc.batch_size,
    val_fraction = dc.val_frac, seed = dc.seed,
  }
  if os.time() - t0 > 2 then
    io.stderr:write(string.format("data: ready in %ds\n", os.time() - t0))
  end
  if train:num_batches() < 1 or val:num_batches() < 1 then
    error(string.format("not enough data: %d train and %d val batches of %d x %d (raise --max-tokens or lower --batch)",
      train:num_batches(), val:num_batches(), dc.batch_size, dc.seq_len), 0)
  end
  return train, val
end

-- The model part of a configuration.
function M.model_config(opts, seq_len)
  return {
    vocab = opts.vocab or 50257, n_layer = opts.n_layer, d_model = opts.d_model, n_head = opts.n_head,
    seq_len = seq_len or opts.seq_len, seed = opts.seed,
    precision = opts.precision ~= "f32" and opts.precision or nil, -- f32 keeps the cache keys as before
  }
end

-- A fresh SA model of a model configuration.
function M.new_model(mc)
  local c = {}
  for k, v in pairs(mc) do c[k] = v end
  c.attention = "sa"
  return xsa_lib().gpt(c)
end

-- A fresh SA model and an XSA clone with identical weights.
function M.new_pair(mc, lambda)
  local sa_model = M.new_model(mc)
  local xsa_model = sa_model:clone{attention = "xsa", lambda = lambda or 1.0}
  return sa_model, xsa_model
end

-- The training part of a configuration (what xsa.train.pair is given).
function M.adam_config(opts)
  return {steps = opts.steps, lr = opts.lr, weight_decay = opts.weight_decay, eval_every = opts.eval_every,
    eval_batches = opts.eval_batches}
end

-- The options of xsa.train.pair: the training part of a configuration
-- (adam_config) plus `extra` (label, save, baseline, ...), so that what is
-- trained is what the cache key says.
function M.pair_options(train, extra)
  local o = {}
  for k, v in pairs(train) do o[k] = v end
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

-- The cache check of an xsa.train.pair result: the run finished, both final
-- val losses are there and every number is finite. Returns true or false, why.
function M.check_pair(r)
  if r.status ~= "done" then return false, "run did not finish" end
  if not (r.sa and r.xsa and numbers.finite(r.sa.final_val) and numbers.finite(r.xsa.final_val)) then
    return false, "final val losses missing"
  end
  return numbers.all_finite(r)
end

----------------------------------------------------------------------------
-- numbers in words and tables

-- "+1.80%", or "n/a" for a missing or non-finite value.
function M.pct(x)
  if not numbers.finite(x) then return "n/a" end
  return string.format("%+.2f%%", x)
end

-- "XSA's final val loss (3.1000) is 1.80% lower than SA's (3.1568)": the
-- sentence the scripts print and the report writes; `what` defaults to
-- "final val loss".
function M.compare_words(sa_value, xsa_value, what)
  what = what or "final val loss"
  if not (numbers.finite(sa_value) and numbers.finite(xsa_value)) then
    return "no comparison is possible (missing values)"
  end
  if sa_value == xsa_value then return string.format("SA and XSA have the same %s (%.4f)", what, sa_value) end
  local d = 100 * (xsa_value - sa_value) / sa_value
  return string.format("XSA's %s (%.4f) is %.2f%% %s than SA's (%.4f)", what, xsa_value, math.abs(d),
    d < 0 and "lower" or "higher", sa_value)
end

-- A markdown table: headers (list of strings), rows (lists of values).
function M.md_table(headers, rows)
  local lines = {}
  lines[1] = "| " .. table.concat(headers, " | ") .. " |"
  local sep = {}
  for i = 1, #headers do sep[i] = (i == 1) and "---" or "---:" end
  lines[2] = "| " .. table.concat(sep, " | ") .. " |"
  for _, r in ipairs(rows) do
    local cells = {}
    for i = 1, #headers do cells[i] = tostring(r[i] == nil and "" or r[i]) end
    lines[#lines + 1] = "| " .. table.concat(cells, " | ") .. " |"
  end
  return table.concat(lines, "\n") .. "\n"
end

----------------------------------------------------------------------------
-- outputs

-- Saves a figure; prints where (or how to render it without gnuplot).
function M.save_figure(fig, opts, name)
  local path = opts.plots .. "/" .. name .. "." .. opts.format
  local out, msg = fig:save(path, {format = opts.format})
  if out then
    print("figure: " .. out)
    if msg then io.stderr:write("gnuplot: ", msg, "\n") end
  else
    io.stderr:write("figure not rendered: ", msg, "\n")
  end
  return {name = name, path = path, gp = opts.plots .. "/" .. name .. ".gp", rendered = out ~= nil}
end

-- The summary of a part's latest run (what the report reads).
function M.write_summary(opts, part, summary)
  local xsa = xsa_lib()
  summary.part = part
  summary.finished_at = os.date("!%Y-%m-%d %H:%M:%S UTC")
  summary.command = summary.command or M.command_line()
  local path = opts.out .. "/summary/" .. part .. ".json"
  xsa.json.write_file(path, summary, {indent = true})
  return path
end

function M.command_line()
  local parts = {"xsa", arg and arg[0] or "?"}
  for i = 1, #(arg or {}) do parts[#parts + 1] = arg[i] end
  return table.concat(parts, " ")
end

-- A save hook for xsa.train.pair that keeps only what an unfinished run
-- leaves behind (a finished one goes to the cache): the result so far as
-- NAME-HASH-atN.json and both models (with their AdamW) as checkpoints.
function M.partial_saver(opts, name, config)
  local xsa = xsa_lib()
  return function(res, status, ctx)
    if status == "done" then return nil end
    local base = xsa.cache.path(opts.out, name, config, "")
    local at = string.format("-at%d", res.completed_steps)
    local files = {}
    if res.completed_steps > 0 then
      for _, k in ipairs{"sa", "xsa"} do
        local p = string.format("%s-%s%s.safetensors", base, k, at)
        ctx[k]:save(p, {optimizer = ctx[k .. "_opt"]})
        files[#files + 1] = p
      end
    end
    local rp = base .. at .. ".json"
    xsa.json.write_file(rp, {config = config, result = res}, {indent = true})
    files[#files + 1] = rp
    return table.concat(files, ", ")
  end
end

-- Runs main(); "interrupted!" (Ctrl-C) ends the script with status 130 and no
-- traceback (the training loop already said what it saved).
function M.main(fn)
  local ok, err = xpcall(fn, sys.traceback_unless_interrupted)
  if ok then return end
  if sys.interrupted(err) then
    io.stderr:write("interrupted\n")
    os.exit(130)
  end
  -- an expected stop (a diverging loss) needs no traceback
  local plain = type(err) == "string" and err:match("^(train%.pair: [^\n]*loss became[^\n]*)")
  if plain then
    io.stderr:write(plain, "\n")
    os.exit(1)
  end
  io.stderr:write(tostring(err), "\n")
  os.exit(1)
end

-- Improvement bars: XSA blue where XSA's loss is lower (positive), SA red
-- where SA's is, each labelled with its value.
function M.improvement_bars(panel, xs, vals, width)
  local plot = xsa_lib().plot
  local px, py, nx, ny, zx, zy = {}, {}, {}, {}, {}, {}
  for i, v in ipairs(vals) do
    if v > 0 then px[#px + 1] = xs[i]; py[#py + 1] = v
    elseif v < 0 then nx[#nx + 1] = xs[i]; ny[#ny + 1] = v
    else zx[#zx + 1] = xs[i]; zy[#zy + 1] = v end
  end
  if #zx > 0 then panel:bars(zx, zy, {color = plot.colors.untrained, barwidth = width, values = "%+.2f%%", label = "equal"}) end
  if #px > 0 then panel:bars(px, py, {color = plot.colors.xsa, barwidth = width, values = "%+.2f%%", label = "XSA's loss lower"}) end
  if #nx > 0 then panel:bars(nx, ny, {color = plot.colors.sa, barwidth = width, values = "%+.2f%%", label = "SA's loss lower"}) end
end

-- Mean of a per-layer metric over layers.
function M.layer_mean(probe, key)
  local s, n = 0, 0
  for _, l in ipairs(probe) do
    if numbers.finite(l[key]) then s = s + l[key]; n = n + 1 end
  end
  return n > 0 and s / n or nil
end

-- The probe as plain data {layers = {{value_cos=,...}, ...}} (JSON-safe).
function M.probe(model, loader, n_batches)
  local xsa = xsa_lib()
  local p = xsa.no_grad(function() return model:probe(loader, n_batches) end)
  local out = {}
  for i, l in ipairs(p) do
    out[i] = {value_cos = l.value_cos, self_attn = l.self_attn, pre_cos = l.pre_cos, post_cos = l.post_cos}
  end
  return out
end

return M
