-- part1_bias.lua: the bias probe of an untrained model: per layer, how
-- similar value vectors are to each other, how much attention each token
-- pays to itself, and how much of each attention output points along the
-- token's own value vector.
--
--   xsa scripts/part1_bias.lua            # 80k tokens, 8 batches of 16
--   xsa scripts/part1_bias.lua --quick
--
-- Metrics (per layer, averaged over heads, batches and tokens):
--   value_cos  mean cos(v_i, v_j), i != j (same sequence, causal pairs)
--   self_attn  mean a_ii (attention weight of a token on itself)
--   pre_cos    mean cos(y_i, v_i) (attention output vs own value)
-- Figure: plots/part1_bias.png (three panels, x = layer). Result: cached
-- under --out by its configuration.
local xsa = xsa or require "xsa"
local study = xsa.study
local numbers = xsa.numbers
local plot = xsa.plot

local spec = {
  name = "part1_bias.lua",
  summary = "Bias probe of an untrained model (SA attention): per layer mean cos(v_i,v_j) (i != j),\n" ..
    "mean a_ii and mean cos(y_i,v_i); a three-panel figure with the values written on the bars.",
  options = {
    {"seq-len", "int", 64, "tokens per window"},
    {"batch", "int", 16, "sequences per batch"},
    {"probe-batches", "int", 8, "batches the probe averages over"},
    {"max-tokens", "int", 80000, "TinyStories tokens used"},
    {"val-frac", "number", 0.1, "fraction of windows held out (the probe uses train batches)"},
    {"n-layer", "int", 2, "transformer blocks"},
    {"d-model", "int", 128, "model width"},
    {"n-head", "int", 2, "attention heads"},
    {"seed", "int", 0, "seed of the initial weights"},
    {"threads", "int", 0, "BLAS/engine threads (0: leave as is)"},
    {"out", "string", "cache", "results folder"},
    {"plots", "string", "plots", "figures folder"},
    {"format", "string", "png", "figure format: png or svg"},
    {"no-cache", "bool", false, "recompute even when a cached result exists"},
    {"quick", "bool", false, "a fast small run"},
  },
  quick = {max_tokens = 20000, batch = 4, probe_batches = 2},
}

local metrics = {
  {key = "value_cos", title = "mean cos(v_i, v_j), i ≠ j", color = plot.colors.metric1},
  {key = "self_attn", title = "mean a_{ii} (self-attention weight)", color = plot.colors.metric2},
  {key = "pre_cos", title = "mean cos(y_i, v_i)", color = plot.colors.metric3},
}

local function main()
  local opts = study.setup(xsa.args.parse(arg, spec))
  local config = {part = "part1", data = study.data_config(opts), model = study.model_config(opts),
    probe_batches = opts.probe_batches}
  local t0 = os.time()
  local result, status, entry = xsa.cache.fetch(opts.out, "part1", config, function()
    local train_loader = study.loaders(config.data)
    local n = math.min(opts.probe_batches, train_loader:num_batches())
    local model = study.new_model(config.model)
    local tp = xsa.progress.now()
    local layers = study.probe(model, train_loader, n)
    return {layers = layers, probe_batches = n, tokens = n * opts.batch * opts.seq_len,
      elapsed_s = xsa.progress.now() - tp, num_params = model:num_params()}
  end, {no_cache = opts.no_cache, check = function(r)
    if type(r.layers) ~= "table" or #r.layers < 1 then return false, "no layers" end
    return numbers.all_finite(r)
  end, label = "part1 probe"})

  local L = #result.layers
  local fig = plot.figure{cols = 3, width = 1500, height = 480,
    title = string.format("Untrained model (SA): bias probe over %d batches of %dx%d tokens", result.probe_batches,
      opts.batch, opts.seq_len)}
  local xtics = {}
  for l = 1, L do xtics[l] = {tostring(l), l} end
  for _, m in ipairs(metrics) do
    local xs, ys = {}, {}
    for l = 1, L do xs[l] = l; ys[l] = result.layers[l][m.key] end
    local p = fig:panel{title = m.title, xlabel = "layer", ylabel = m.key:gsub("_", "\\_"), key = false,
      xrange = {0.4, L + 0.6}, xtics = xtics, zero = true}
    p:bars(xs, ys, {color = m.color, barwidth = 0.55, values = "%.3f", fontsize = 10})
  end
  local figinfo = study.save_figure(fig, opts, "part1_bias")

  local rows = {}
  for l = 1, L do
    local r = result.layers[l]
    rows[l] = {tostring(l), string.format("%.4f", r.value_cos), string.format("%.4f", r.self_attn),
      string.format("%.4f", r.pre_cos)}
  end
  local tbl = study.md_table({"layer", "mean cos(v_i,v_j) i≠j", "mean a_ii", "mean cos(y_i,v_i)"}, rows)
  io.stdout:write("\n", tbl)
  print("result: " .. entry)
  study.write_summary(opts, "part1", {title = "Bias probe, untrained model", config = config, cache = status,
    entry = entry, wall_s = os.time() - t0, result = result, figures = {figinfo}, table = tbl})
end

study.main(main)
