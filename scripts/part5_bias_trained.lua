-- part5_bias_trained.lua: part 1's probe, plus post_cos = mean cos(z_i, v_i)
-- after the projection, of part 3's trained SA and XSA and their initial
-- weights, for every seed of part 3 (its flags select the runs), on a probe
-- set (--probe-batches of --probe-batch, first --probe-tokens tokens).
--   xsa scripts/part5_bias_trained.lua --seeds 5 [--train: part 3 first if needed] [--quick]
local xsa = xsa or require "xsa"
local study, numbers, plot = xsa.study, xsa.numbers, xsa.plot
local bias = dofile((debug.getinfo(1, "S").source:match("^@(.-)[^/]*$") or "./") .. "bias_table.lua")

local P = {name = "part5", title = "Bias probe after training", report = "report/part5.lua", publish = {seeds = 10},
  summary = "Bias probe of trained SA, trained XSA (part 3's checkpoints, every seed) and the untrained initial\n" ..
    "model: four panels (three metrics + post-projection cos(z_i,v_i)) and the pre- vs post-projection table.",
  options = study.options({}, {{"train", "bool", false, "train part 3 first when its checkpoints are missing"},
    table.unpack(study.probe_options(8))}),
  quick = xsa.experiment.pair_quick{probe_batches = 2, probe_tokens = 20000, probe_batch = 4}} -- part 3's quick run
local models = {{key = "untrained", ckpt = "init", label = "untrained", color = plot.colors.untrained},
  {key = "sa", ckpt = "sa", label = "SA (trained)", color = plot.colors.sa}, {key = "xsa", ckpt = "xsa", label = "XSA (trained)", color = plot.colors.xsa}}
local metrics = {{key = "value_cos", title = plot.markup "mean cos(v_i, v_j), i ≠ j", y = "cosine of two values"},
  {key = "self_attn", title = plot.markup "mean a_{ii}", y = "attention to itself"},
  {key = "pre_cos_pos1", title = plot.markup "pre-projection mean cos(y_i, v_i), positions ≥ 1", y = "cosine of output and own value"},
  {key = "post_cos_pos1", title = plot.markup "post-projection mean cos(z_i, v_i), positions ≥ 1", y = "cosine of output and own value"}}

function P.units(ex) -- per seed: the probes of part 3's three models of that seed
  local opts, probe_data = ex.opts, study.probe_data_config(ex.opts, ex.opts.seq_len)
  return ex:seed_units(function(seed)
    local config3 = xsa.experiment.pair_config(opts, "part3", {seed = seed})
    local config = {part = "part5", part3 = config3, probe_batches = opts.probe_batches, probe = probe_data}
    local result, status, entry = ex:cached(function() -- part 3's checkpoints only when this has no record
      local r3 = ex:results("part3", {train = opts.train, seed = seed, script = "scripts/part3_train.lua"}) -- --train: computed
      local _, val = study.loaders(probe_data)
      local n = math.min(opts.probe_batches, val:num_batches())
      local out = {probe_batches = n, checkpoints = r3.checkpoints, models = {}, part3_improvement_pct = r3.improvement_pct}
      for _, m in ipairs(models) do out.models[m.key] = study.probe(xsa.gpt.load(r3.checkpoints[m.ckpt]), val, n) end
      return out
    end, {name = "part5-" .. xsa.experiment.seed_tag(config3), config = config, label = string.format("part5 probes (seed %d)", seed),
      check = function(r)
        for _, m in ipairs(models) do if #((r.models or {})[m.key] or {}) < 1 then return false, "no probe of " .. m.key end end
        return numbers.all_finite(r)
      end})
    return {seed = seed, result = result, cache = status, entry = entry}
  end)
end

function P.main(ex, per_seed)
  local opts, probe_data = ex.opts, study.probe_data_config(ex.opts, ex.opts.seq_len)
  local N, first = #per_seed, per_seed[1].result
  local L, w, tics = #first.models.sa, 0.26, {}
  for l = 1, L do tics[l] = {"layer " .. l, l} end
  local fig = plot.figure{rows = 2, cols = 2, width = 1300, height = 1000,
    title = string.format("Bias probe after %d steps (part 3) vs untrained; %d val batches of %dx%d from %d tokens; %s", opts.steps,
      first.probe_batches, opts.probe_batch, opts.seq_len, opts.probe_tokens,
      N > 1 and string.format("%d seeds (mean, 95%% t interval, dots: seeds)", N) or string.format("seed %d", ex.seeds[1]))}
  for k, met in ipairs(metrics) do
    local p = fig:panel{title = met.title, xlabel = "", ylabel = met.y, xtics = tics,
      xrange = {0.5, L + 0.5}, zero = true, key = k == 1 and "top center horizontal" or false, headroom = 0.3}
    for j, m in ipairs(models) do
      local xs, per_x = {}, {}
      for l = 1, L do xs[l] = l + (j - 2) * w; per_x[l] = study.collect(per_seed, function(x) return x.result.models[m.key][l][met.key] end) end
      local means = study.collect(per_x, function(v) return xsa.stats.mean(v) end)
      p:bars(xs, means, {color = m.color, barwidth = w * 0.95, label = m.label, values = N == 1 and "%.3f" or nil,
        fontsize = 9, alpha = N > 1 and 0.6 or nil})
      if N > 1 then study.points_ci(p, xs, per_x, {color = "#222222", values = "%.3f", fontsize = 9}) end
    end
  end
  ex:save_figure(fig, "part5_bias_trained", "cos(y_i, v_i) and cos(z_i, v_i) are over positions ≥ 1: at position 0 a " ..
    "token attends only to itself (y_0 = v_0, cos 1) and z_0 is rounding residue; the JSON keeps the all-positions values." ..
    (N > 1 and string.format(" Bars: means over %d seeds; error bars: 95%% t intervals; dots: each seed.", N) or ""))
  local rows, means = bias.rows(per_seed, models, L)
  local tbl = ex:table({"model", "layer", "pre cos(y_i,v_i), pos ≥ 1", "post cos(z_i,v_i), pos ≥ 1", "bias removed %"}, rows)
  print("cos: mean over heads, tokens at positions >= 1 and batches" .. (N > 1 and string.format("; mean over %d seeds (95%% t interval)", N) or ""))
  for _, x in ipairs(per_seed) do print(string.format("seed %d: %s", x.seed, x.entry)) end
  ex:summary{config = {part = "part5", seeds = ex.seeds, probe_batches = opts.probe_batches, probe = probe_data,
    part3 = xsa.experiment.pair_config(opts, "part3")}, cache = per_seed[1].cache, entry = per_seed[1].entry,
    result = first, seeds = ex.seeds, runs = per_seed, means = means, table = tbl}
end

return xsa.experiment.part(P, ...)
