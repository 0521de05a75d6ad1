-- part6_lambda_sweep.lua: how much projection? lambda in {0, .25, .5, .75, 1}.
--
--   xsa scripts/part6_lambda_sweep.lua                  # 5 x 2 x 300 steps
--   xsa scripts/part6_lambda_sweep.lua --lambdas 0,1 --steps 100
--   xsa scripts/part6_lambda_sweep.lua --quick
--
-- One fixed initialisation (--seed) for every lambda: each XSA(lambda) model
-- is trained against its own SA baseline, both cloned from that init and fed
-- the same batches. After training, the XSA model is probed on --probe-batches
-- val batches: the mean over layers of the post-projection cos(z_i, v_i) is its
-- remaining self-value bias. The SA baseline is the same run for every lambda
-- (training is deterministic), so it is trained once, with the first lambda,
-- and its record and probe are reused. Paired improvement % = 100 (SA - XSA) /
-- SA of the final val loss (positive when XSA is lower). Each lambda is one
-- cache entry.
local xsa = xsa or require "xsa"
local study, plot = xsa.study, xsa.plot

local ex = xsa.experiment{
  name = "part6", script = "part6_lambda_sweep.lua", title = "Lambda sweep",
  summary = "Lambda sweep from one fixed init: each XSA(lambda) against its own paired SA baseline;\n" ..
    "paired improvement % and mean post-projection bias vs lambda; each lambda cached.",
  options = study.options({}, {{"lambdas", "numbers", {0, 0.25, 0.5, 0.75, 1.0}, "the lambda values"},
    {"probe-batches", "int", 8, "val batches the probe averages over"}}, {"lambda"}),
  quick = {steps = 4, max_tokens = 6000, batch = 2, eval_every = 2, eval_batches = 2, probe_batches = 2,
    seq_len = 32, lambdas = {0, 1}},
}
local opts = ex.opts

ex:main(function()
  local lams, imp, bias_xsa, bias_sa, tics, rows, list = {}, {}, {}, {}, {}, {}, {}
  local baseline -- the SA record and probe of the first run that has them
  for i, lam in ipairs(opts.lambdas) do
    local r, status, entry = ex:pair{name = string.format("part6-lambda%g", lam),
      config = ex:pair_config{lambda = lam, probe_batches = opts.probe_batches}, label = string.format("part6 λ=%g", lam),
      what = string.format("part6 lambda %g", lam), baseline = baseline and baseline.record,
      after = function(res, m)
        res.xsa.step_loss = nil
        local n = math.min(opts.probe_batches, m.val:num_batches())
        res.probe = {batches = n, xsa = study.probe(m.xsa, m.val, n), sa = baseline and baseline.probe or study.probe(m.sa, m.val, n)}
      end, check = function(res) return #((res.probe or {}).xsa or {}) > 0, "no probe" end}
    if not baseline and r.sa.step_loss and r.probe.sa then baseline = {record = r.sa, probe = r.probe.sa} end
    lams[i], imp[i], tics[i] = lam, r.improvement_pct or 0, {string.format("%g", lam), lam}
    bias_xsa[i], bias_sa[i] = study.layer_mean(r.probe.xsa, "post_cos"), study.layer_mean(r.probe.sa, "post_cos")
    rows[i] = {string.format("%g", lam), string.format("%.4f", r.sa.final_val), string.format("%.4f", r.xsa.final_val),
      study.pct(r.improvement_pct), string.format("%.4f", bias_xsa[i]), string.format("%.4f", bias_sa[i]), status}
    list[i] = {lambda = lam, sa_val = r.sa.final_val, xsa_val = r.xsa.final_val, improvement_pct = r.improvement_pct,
      xsa_post_cos = bias_xsa[i], sa_post_cos = bias_sa[i], elapsed_s = r.elapsed_s, cache = status, entry = entry}
  end

  local lo, hi = math.min(table.unpack(lams)), math.max(table.unpack(lams))
  local pad, bw = math.max(0.08, (hi - lo) * 0.08), #lams > 1 and math.min(0.15, (hi - lo) / #lams * 0.6) or 0.15
  local fig = plot.figure{cols = 2, width = 1300, height = 520,
    title = string.format("λ sweep from one init (seed %d): %d steps per run, batch %d, seq\\_len %d, %d tokens",
      opts.seed, opts.steps, opts.batch, opts.seq_len, opts.max_tokens)}
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
  ex:save_figure(fig, "part6_lambda_sweep")

  local tbl = ex:table({"lambda", "SA val loss", "XSA val loss", "improvement", "XSA mean cos(z,v)",
    "SA mean cos(z,v)", "cache"}, rows)
  ex:summary{config = {steps = opts.steps, batch = opts.batch, seq_len = opts.seq_len, max_tokens = opts.max_tokens,
    lr = opts.lr, seed = opts.seed, lambdas = opts.lambdas, probe_batches = opts.probe_batches},
    result = {runs = list}, table = tbl}
end)
