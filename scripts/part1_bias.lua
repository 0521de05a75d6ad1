-- part1_bias.lua: the bias probe of an untrained model: per layer, how
-- similar value vectors are to each other (value_cos: mean cos(v_i, v_j),
-- i != j), how much attention each token pays to itself (self_attn: mean
-- a_ii) and how much of each attention output points along its own value
-- (pre_cos: mean cos(y_i, v_i); shown for positions >= 1, pre_cos_pos1: at
-- position 0, y = v). It reads the validation windows of the first
-- --max-tokens tokens, as the notebook does; plots/part1_bias.png.
--
--   xsa scripts/part1_bias.lua            # the val windows of 80k tokens: 8 batches of 16
--   xsa scripts/part1_bias.lua --quick
local xsa = xsa or require "xsa"
local study, numbers, plot = xsa.study, xsa.numbers, xsa.plot

local P = {name = "part1", report = "report/part1.lua", title = "Bias probe, untrained model",
  summary = "Bias probe of an untrained model (SA attention): per layer mean cos(v_i,v_j) (i != j),\n" ..
    "mean a_ii and mean cos(y_i,v_i); a three-panel figure with the values written on the bars.",
  options = study.options({max_tokens = 80000}, {{"probe-batches", "int", 8, "validation batches the probe averages over", min = 1}},
    {"steps", "lr", "weight-decay", "eval-every", "eval-batches", "lambda", "seeds", "data-seed", "init-seed", "jobs", "worker", "unit"}), -- --resume, --save-every: unused
  quick = {max_tokens = 20000, batch = 4, probe_batches = 2},
  config = function(o)
    return {part = "part1", data = study.data_config(o), model = study.model_config(o), probe_batches = o.probe_batches,
      split = "val"}
  end,
}
local mk = plot.markup -- the titles' subscripts are gnuplot enhanced text
local metrics = {
  {key = "value_cos", title = mk("mean cos(v_i, v_j), i ≠ j"), y = "cosine of two values", color = plot.colors.metric1},
  {key = "self_attn", title = mk("mean a_{ii} (self-attention weight)"), y = "attention to itself", color = plot.colors.metric2},
  {key = "pre_cos_pos1", title = mk("mean cos(y_i, v_i), positions ≥ 1"), y = "cosine of output and own value",
    color = plot.colors.metric3},
}

function P.main(ex)
  local opts = ex.opts
  local result, status, entry = ex:cached(function()
    local _, val = study.loaders(ex.config.data) -- the probe reads validation batches
    local n = math.min(opts.probe_batches, val:num_batches())
    local model = study.new_model(ex.config.model)
    local t0 = xsa.progress.now()
    local layers = study.probe(model, val, n)
    return {layers = layers, probe_batches = n, split = "val", val_windows = val.num_windows,
      tokens = math.min(n * opts.batch, val.num_windows) * opts.seq_len,
      elapsed_s = xsa.progress.now() - t0, num_params = model:num_params()}
  end, {label = "part1 probe", check = function(r)
    if type(r.layers) ~= "table" or #r.layers < 1 then return false, "no layers" end
    return numbers.all_finite(r)
  end})

  local L, xtics = #result.layers, {}
  for l = 1, L do xtics[l] = {tostring(l), l} end
  local fig = plot.figure{cols = 3, width = 1500, height = 480,
    title = string.format("Untrained model (SA): bias probe over %d validation batches of %dx%d tokens (of the first %d)",
      result.probe_batches, opts.batch, opts.seq_len, opts.max_tokens)}
  for _, m in ipairs(metrics) do
    local xs, ys = {}, {}
    for l = 1, L do xs[l] = l; ys[l] = result.layers[l][m.key] end
    local p = fig:panel{title = m.title, xlabel = "layer", ylabel = m.y, key = false,
      xrange = {0.4, L + 0.6}, xtics = xtics, zero = true}
    p:bars(xs, ys, {color = m.color, barwidth = 0.55, values = "%.3f", fontsize = 10})
  end
  ex:save_figure(fig, "part1_bias", "cos(y_i, v_i) is over positions ≥ 1: at position 0 a token attends only to itself, " ..
    "so y_0 = v_0 and the cosine is 1 by construction (the all-positions value is in the table and the JSON).")

  local rows = {}
  for l, r in ipairs(result.layers) do
    local f4 = function(x) return xsa.numbers.text("%.4f", x) end
    rows[l] = {tostring(l), f4(r.value_cos), f4(r.self_attn), f4(r.pre_cos_pos1), f4(r.pre_cos)}
  end
  local tbl = ex:table({"layer", "mean cos(v_i,v_j) i≠j", "mean a_ii", "mean cos(y_i,v_i), positions ≥ 1",
    "(all positions)"}, rows)
  print("positions >= 1: at position 0 a token attends only to itself (y = v, cos = 1), which would inflate the mean")
  print("result: " .. entry)
  ex:summary{cache = status, entry = entry, result = result, table = tbl}
end

return xsa.experiment.part(P, ...)
