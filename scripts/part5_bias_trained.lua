-- part5_bias_trained.lua: the bias probe after training: trained SA, trained
-- XSA (part 3's checkpoints) and the untrained shared initial weights.
--
--   xsa scripts/part3_train.lua && xsa scripts/part5_bias_trained.lua
--   xsa scripts/part5_bias_trained.lua --quick --train   # trains part 3 itself if needed
--
-- The training flags (--steps, --batch, ...) select the part-3 run (same defaults);
-- the probe runs on the first --probe-batches val batches. Per layer: value_cos =
-- mean cos(v_i,v_j) i != j, self_attn = mean a_ii, pre_cos = mean cos(y_i,v_i)
-- before the projection, post_cos = mean cos(z_i,v_i) after it (SA: z = y);
-- "bias removed %" = 100 (|pre| - |post|) / |pre|.
local xsa = xsa or require "xsa"
local study, numbers, plot = xsa.study, xsa.numbers, xsa.plot

local ex = xsa.experiment{
  name = "part5", script = "part5_bias_trained.lua", title = "Bias probe after training",
  summary = "Bias probe of trained SA, trained XSA (part 3's checkpoints) and the untrained initial model:\n" ..
    "four panels (three metrics + post-projection cos(z_i,v_i)) and the pre- vs post-projection table.",
  options = study.options({}, {{"probe-batches", "int", 8, "validation batches the probe averages over"},
    {"train", "bool", false, "train part 3 first when its checkpoints are missing"}}),
  quick = xsa.experiment.pair_quick{probe_batches = 2}, -- --quick selects part 3's quick run
}
local opts = ex.opts
local models = {{key = "untrained", ckpt = "init", label = "untrained", color = plot.colors.untrained},
  {key = "sa", ckpt = "sa", label = "SA (trained)", color = plot.colors.sa},
  {key = "xsa", ckpt = "xsa", label = "XSA (trained)", color = plot.colors.xsa}}
local metrics = {{key = "value_cos", title = "mean cos(v_i, v_j), i ≠ j"}, {key = "self_attn", title = "mean a_{ii}"},
  {key = "pre_cos", title = "pre-projection mean cos(y_i, v_i)"}, {key = "post_cos", title = "post-projection mean cos(z_i, v_i)"}}

local function removed(pre, post) -- "12.3%" and 12.3, or "n/a"
  local v = numbers.finite(pre) and numbers.finite(post) and pre ~= 0 and 100 * (math.abs(pre) - math.abs(post)) / math.abs(pre)
  return v and string.format("%.1f%%", v) or "n/a", v or nil
end

ex:main(function()
  local r3, config3 = ex:results("part3", {train = opts.train}) -- computed with --train
  ex.config = {part = "part5", part3 = config3, probe_batches = opts.probe_batches}
  local result, status, entry = ex:cached(function()
    local _, val = study.loaders(config3.data)
    local n = math.min(opts.probe_batches, val:num_batches())
    local out = {probe_batches = n, checkpoints = r3.checkpoints, models = {}, part3_improvement_pct = r3.improvement_pct}
    for _, m in ipairs(models) do out.models[m.key] = study.probe(xsa.gpt.load(r3.checkpoints[m.ckpt]), val, n) end
    return out
  end, {label = "part5 probes", check = function(r)
    for _, m in ipairs(models) do if #((r.models or {})[m.key] or {}) < 1 then return false, "no probe of " .. m.key end end
    return numbers.all_finite(r)
  end})

  local L, w, tics = #result.models.sa, 0.26, {}
  for l = 1, L do tics[l] = {"layer " .. l, l} end
  local fig = plot.figure{rows = 2, cols = 2, width = 1300, height = 980,
    title = string.format("Bias probe after %d steps (part 3) vs untrained; %d val batches of %dx%d", opts.steps,
      result.probe_batches, opts.batch, opts.seq_len)}
  for k, met in ipairs(metrics) do
    local p = fig:panel{title = met.title, xlabel = "", ylabel = met.key:gsub("_", "\\_"), xtics = tics,
      xrange = {0.5, L + 0.5}, zero = true, key = k == 1 and "top center horizontal" or false, headroom = 0.3}
    for j, m in ipairs(models) do
      local xs, ys = {}, {}
      for l = 1, L do xs[l] = l + (j - 2) * w; ys[l] = result.models[m.key][l][met.key] end
      p:bars(xs, ys, {color = m.color, barwidth = w * 0.95, label = m.label, values = "%.3f", fontsize = 8})
    end
  end
  ex:save_figure(fig, "part5_bias_trained")

  local rows, means = {}, {}
  local function row(m, l, pre, post)
    rows[#rows + 1] = {m.label, l, string.format("%.4f", pre), string.format("%.4f", post), (removed(pre, post))}
  end
  for _, m in ipairs(models) do
    local probe = result.models[m.key]
    for l = 1, L do row(m, tostring(l), probe[l].pre_cos, probe[l].post_cos) end
    local pre, post = study.layer_mean(probe, "pre_cos"), study.layer_mean(probe, "post_cos")
    row(m, "mean", pre, post)
    means[#means + 1] = {model = m.key, pre = pre, post = post, removed_pct = select(2, removed(pre, post))}
  end
  local tbl = ex:table({"model", "layer", "pre cos(y_i,v_i)", "post cos(z_i,v_i)", "bias removed %"}, rows)
  print("result: " .. entry)
  ex:summary{cache = status, entry = entry, result = result, means = means, table = tbl}
end)
