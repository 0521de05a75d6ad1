-- part5_bias_trained.lua: the bias probe after training: trained SA, trained
-- XSA (part 3's checkpoints) and the untrained shared initial weights.
--
--   xsa scripts/part3_train.lua && xsa scripts/part5_bias_trained.lua
--   xsa scripts/part5_bias_trained.lua --train     # trains part 3 itself if needed
--   xsa scripts/part5_bias_trained.lua --quick --train
--
-- The training flags (--steps, --batch, --seq-len, ...) select which part-3
-- run to use: they must match the part-3 run (same defaults). The probe runs
-- on the first --probe-batches validation batches (text no model trained on).
-- Metrics per layer: value_cos = mean cos(v_i,v_j) i != j, self_attn = mean
-- a_ii, pre_cos = mean cos(y_i,v_i) before the projection, post_cos = mean
-- cos(z_i,v_i) after it (the model's own lambda; for SA z = y).
-- "bias removed %" = 100 (|pre| - |post|) / |pre|.
local xsa = xsa or require "xsa"
local study = xsa.study
local numbers = xsa.numbers
local plot = xsa.plot

local part3 = assert(loadfile(xsa.sys.root() .. "/scripts/part3_train.lua"))("part3")

local options = study.options({})
options[#options + 1] = {"probe-batches", "int", 8, "validation batches the probe averages over"}
options[#options + 1] = {"train", "bool", false, "train part 3 first when its checkpoints are missing"}

local spec = {
  name = "part5_bias_trained.lua",
  summary = "Bias probe of trained SA, trained XSA (part 3's checkpoints) and the untrained initial model:\n" ..
    "four panels (three metrics + post-projection cos(z_i,v_i)) and the pre- vs post-projection table.",
  options = options,
  quick = {probe_batches = 2},
}
-- --quick selects part 3's quick run
for k, v in pairs(part3.spec.quick) do spec.quick[k] = v end

local models = {
  {key = "untrained", label = "untrained", color = plot.colors.untrained},
  {key = "sa", label = "SA (trained)", color = plot.colors.sa},
  {key = "xsa", label = "XSA (trained)", color = plot.colors.xsa},
}
local metrics = {
  {key = "value_cos", title = "mean cos(v_i, v_j), i ≠ j"},
  {key = "self_attn", title = "mean a_{ii}"},
  {key = "pre_cos", title = "pre-projection mean cos(y_i, v_i)"},
  {key = "post_cos", title = "post-projection mean cos(z_i, v_i)"},
}

local function removed_pct(pre, post)
  if not (numbers.finite(pre) and numbers.finite(post)) or pre == 0 then return nil end
  return 100 * (math.abs(pre) - math.abs(post)) / math.abs(pre)
end

local function main()
  local opts = study.setup(xsa.args.parse(arg, spec))
  local t0 = os.time()
  local config3 = part3.config_of(opts)
  local p3 = part3.paths(opts, config3)
  local r3, why = xsa.cache.load(opts.out, p3.name, config3, part3.check)
  if not r3 then
    if not opts.train then
      local flags = table.concat(xsa.args.to_argv(opts, part3.spec, true), " ")
      io.stderr:write(string.format(
        "part5: no finished part-3 run for this configuration (%s: %s).\n" ..
        "Run part 3 first with the same flags:\n  xsa scripts/part3_train.lua %s\n" ..
        "or add --train to this command.\n", p3.name, why, flags))
      os.exit(1)
    end
    print("part5: part 3 has not been run with this configuration; running it now (--train)")
    r3 = part3.run(opts) -- with its figure and summary, so the report shows part 3 too
  end

  local config = {part = "part5", part3 = config3, probe_batches = opts.probe_batches}
  local result, status, entry = xsa.cache.fetch(opts.out, "part5", config, function()
    local _, val_loader = study.loaders(config3.data)
    local n = math.min(opts.probe_batches, val_loader:num_batches())
    local out = {probe_batches = n, checkpoints = r3.checkpoints, models = {}}
    for _, m in ipairs(models) do
      local path = r3.checkpoints[m.key == "untrained" and "init" or m.key]
      local model = xsa.gpt.load(path)
      out.models[m.key] = study.probe(model, val_loader, n)
    end
    out.part3_improvement_pct = r3.improvement_pct
    return out
  end, {no_cache = opts.no_cache, label = "part5 probes", check = function(r)
    if type(r.models) ~= "table" then return false, "no probes" end
    for _, m in ipairs(models) do
      if type(r.models[m.key]) ~= "table" or #r.models[m.key] < 1 then return false, "probe of " .. m.key .. " missing" end
    end
    return numbers.all_finite(r)
  end})

  local L = #result.models.sa
  local tics = {}
  for l = 1, L do tics[l] = {"layer " .. l, l} end
  local fig = plot.figure{rows = 2, cols = 2, width = 1300, height = 980,
    title = string.format("Bias probe after %d steps (part 3) vs untrained; %d val batches of %dx%d", opts.steps,
      result.probe_batches, opts.batch, opts.seq_len)}
  local w = 0.26
  for k, met in ipairs(metrics) do
    local p = fig:panel{title = met.title, xlabel = "", ylabel = met.key:gsub("_", "\\_"), xtics = tics,
      xrange = {0.5, L + 0.5}, zero = true, key = k == 1 and "top center horizontal" or false, headroom = 0.3}
    for j, m in ipairs(models) do
      local xs, ys = {}, {}
      for l = 1, L do xs[l] = l + (j - 2) * w; ys[l] = result.models[m.key][l][met.key] end
      p:bars(xs, ys, {color = m.color, barwidth = w * 0.95, label = m.label, values = "%.3f", fontsize = 8})
    end
  end
  local figinfo = study.save_figure(fig, opts, "part5_bias_trained")

  local rows = {}
  local summary_rows = {}
  for _, m in ipairs(models) do
    local probe = result.models[m.key]
    for l = 1, L do
      local r = probe[l]
      local rem = removed_pct(r.pre_cos, r.post_cos)
      rows[#rows + 1] = {m.label, tostring(l), string.format("%.4f", r.pre_cos), string.format("%.4f", r.post_cos),
        rem and string.format("%.1f%%", rem) or "n/a"}
    end
    local pre, post = study.layer_mean(probe, "pre_cos"), study.layer_mean(probe, "post_cos")
    local rem = removed_pct(pre, post)
    rows[#rows + 1] = {m.label, "mean", string.format("%.4f", pre), string.format("%.4f", post),
      rem and string.format("%.1f%%", rem) or "n/a"}
    summary_rows[#summary_rows + 1] = {model = m.key, pre = pre, post = post, removed_pct = rem}
  end
  local tbl = study.md_table({"model", "layer", "pre cos(y_i,v_i)", "post cos(z_i,v_i)", "bias removed %"}, rows)
  io.stdout:write("\n", tbl)
  print("result: " .. entry)
  study.write_summary(opts, "part5", {title = "Bias probe after training", config = config, cache = status,
    entry = entry, wall_s = os.time() - t0, result = result, means = summary_rows, figures = {figinfo}, table = tbl})
end

study.main(main)
