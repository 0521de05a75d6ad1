-- part6_lambda_sweep.lua: how much projection? lambda in {0, .25, .5, .75, 1}.
--
--   xsa scripts/part6_lambda_sweep.lua                  # 5 x 2 x 300 steps
--   xsa scripts/part6_lambda_sweep.lua --lambdas 0,1 --steps 100
--   xsa scripts/part6_lambda_sweep.lua --quick
--
-- One fixed initialisation (--seed) for every lambda: each XSA(lambda) model
-- is trained against its own SA baseline, both cloned from that init and
-- fed the same batches (xsa.train.pair). After training, the XSA model is
-- probed on --probe-batches val batches: the mean over layers of the
-- post-projection cos(z_i, v_i) is its remaining self-value bias.
-- The SA baseline is the same run for every lambda (same init, batches and
-- optimizer; training is deterministic), so it is trained once, with the
-- first lambda, and its record and probe are reused for the others.
-- Paired improvement % = 100 (SA - XSA) / SA of the final val loss (positive
-- when XSA is lower). Each lambda is one cache entry.
local xsa = xsa or require "xsa"
local study = xsa.study
local plot = xsa.plot

local options = study.options({}, {
  {"lambdas", "numbers", {0, 0.25, 0.5, 0.75, 1.0}, "the lambda values"},
  {"probe-batches", "int", 8, "val batches the probe averages over"},
}, {"lambda"})

local spec = {
  name = "part6_lambda_sweep.lua",
  summary = "Lambda sweep from one fixed init: each XSA(lambda) against its own paired SA baseline;\n" ..
    "paired improvement % and mean post-projection bias vs lambda; each lambda cached.",
  options = options,
  quick = {steps = 4, max_tokens = 6000, batch = 2, eval_every = 2, eval_batches = 2, probe_batches = 2,
    seq_len = 32, lambdas = {0, 1}},
}

local function main()
  local opts = study.setup(xsa.args.parse(arg, spec))
  local t0 = os.time()
  local runs, statuses = {}, {}
  local baseline -- the SA record and probe of the first run that has them
  for i, lam in ipairs(opts.lambdas) do
    local config = {part = "part6", data = study.data_config(opts), model = study.model_config(opts),
      train = study.adam_config(opts), lambda = lam, probe_batches = opts.probe_batches}
    local res, status, entry = xsa.cache.fetch(opts.out, string.format("part6-lambda%g", lam), config, function()
      local tl, vl = study.loaders(config.data)
      local sa_model, xsa_model = study.new_pair(config.model, lam)
      local r = xsa.train.pair(sa_model, xsa_model, tl, vl, study.pair_options(config.train, {
        label = string.format("part6 λ=%g", lam), baseline = baseline and baseline.record,
        save = study.partial_saver(opts, string.format("part6-lambda%g", lam), config)}))
      r.xsa.step_loss = nil
      local n = math.min(opts.probe_batches, vl:num_batches())
      r.probe = {batches = n, xsa = study.probe(xsa_model, vl, n),
        sa = baseline and baseline.probe or study.probe(sa_model, vl, n)}
      sa_model:free(); xsa_model:free()
      return r
    end, {no_cache = opts.no_cache, label = string.format("part6 lambda %g", lam), check = function(r)
      local ok, why = study.check_pair(r)
      if not ok then return false, why end
      if not (r.probe and r.probe.xsa and #r.probe.xsa > 0) then return false, "no probe" end
      return true
    end})
    res.entry = entry
    runs[i], statuses[i] = res, status
    if not baseline and res.sa.step_loss and res.probe.sa then
      baseline = {record = res.sa, probe = res.probe.sa}
    end
  end

  local lams, imp, bias_xsa, bias_sa, tics = {}, {}, {}, {}, {}
  for i, r in ipairs(runs) do
    lams[i] = opts.lambdas[i]
    imp[i] = r.improvement_pct or 0
    bias_xsa[i] = study.layer_mean(r.probe.xsa, "post_cos")
    bias_sa[i] = study.layer_mean(r.probe.sa, "post_cos")
    tics[i] = {string.format("%g", lams[i]), lams[i]}
  end
  local lo, hi = math.min(table.unpack(lams)), math.max(table.unpack(lams))
  local pad = math.max(0.08, (hi - lo) * 0.08)
  local fig = plot.figure{cols = 2, width = 1300, height = 520,
    title = string.format("λ sweep from one init (seed %d): %d steps per run, batch %d, seq\\_len %d, %d tokens",
      opts.seed, opts.steps, opts.batch, opts.seq_len, opts.max_tokens)}
  local bw = #lams > 1 and math.min(0.15, (hi - lo) / #lams * 0.6) or 0.15
  local p = fig:panel{title = "paired improvement of XSA(λ) over its SA baseline, %", xlabel = "λ",
    ylabel = "improvement % (positive: XSA lower)", xtics = tics, xrange = {lo - pad - bw, hi + pad + bw},
    key = "top left", zero = true, headroom = 0.3}
  study.improvement_bars(p, lams, imp, bw)
  local q = fig:panel{title = "mean post-projection cos(z_i, v_i) over layers", xlabel = "λ",
    ylabel = "mean cos(z_i, v_i)", xtics = tics, xrange = {lo - pad, hi + pad}, zero = true, key = "top right"}
  q:line(lams, bias_sa, {label = "SA baseline (z = y)", color = plot.colors.sa, points = true, dash = 2})
  q:line(lams, bias_xsa, {label = "XSA(λ)", color = plot.colors.xsa, points = true})
  local vals = {}
  for i, b in ipairs(bias_xsa) do vals[i] = string.format("%.3f", b) end
  q:labels(lams, bias_xsa, vals, {color = plot.colors.xsa, offset = {0, 1}})
  local figinfo = study.save_figure(fig, opts, "part6_lambda_sweep")

  local rows, list = {}, {}
  for i, r in ipairs(runs) do
    rows[i] = {string.format("%g", lams[i]), string.format("%.4f", r.sa.final_val), string.format("%.4f", r.xsa.final_val),
      study.pct(r.improvement_pct), string.format("%.4f", bias_xsa[i]), string.format("%.4f", bias_sa[i]), statuses[i]}
    list[i] = {lambda = lams[i], sa_val = r.sa.final_val, xsa_val = r.xsa.final_val, improvement_pct = r.improvement_pct,
      xsa_post_cos = bias_xsa[i], sa_post_cos = bias_sa[i], elapsed_s = r.elapsed_s, cache = statuses[i], entry = r.entry}
  end
  local tbl = study.md_table({"lambda", "SA val loss", "XSA val loss", "improvement", "XSA mean cos(z,v)",
    "SA mean cos(z,v)", "cache"}, rows)
  io.stdout:write("\n", tbl)
  study.write_summary(opts, "part6", {title = "Lambda sweep", config = {steps = opts.steps, batch = opts.batch,
    seq_len = opts.seq_len, max_tokens = opts.max_tokens, lr = opts.lr, seed = opts.seed, lambdas = opts.lambdas,
    probe_batches = opts.probe_batches}, wall_s = os.time() - t0, result = {runs = list}, figures = {figinfo},
    table = tbl})
end

study.main(main)
