-- part6_lambda_sweep.lua: how much projection? Per seed, each XSA(lambda) trains against one SA baseline (part 3's
-- when recorded, see lambda.lua; else trained with the first lambda) and is probed: mean cos(z_i, v_i), positions >= 1.
--   xsa scripts/part6_lambda_sweep.lua [--lambdas 0,1] [--seeds 3] [--quick]
local xsa = xsa or require "xsa"
local study, plot = xsa.study, xsa.plot
local L = dofile((debug.getinfo(1, "S").source:match("^@(.-)[^/]*$") or "./") .. "lambda.lua")

local P = {name = "part6", title = "Lambda sweep", report = "report/part6.lua", publish = {seeds = 10},
  summary = "Lambda sweep from one init per seed, each XSA(lambda) against its seed's SA baseline: paired\n" ..
    "improvement % and mean post-projection bias vs lambda (95% intervals over --seeds); checkpoints kept.",
  options = study.options({}, {{"lambdas", "numbers", {0, 0.25, 0.5, 0.75, 1.0}, "the lambda values"},
    table.unpack(study.probe_options(8))}, {"lambda"}),
  quick = {steps = 4, max_tokens = 6000, batch = 2, eval_every = 2, eval_batches = 2, probe_batches = 2,
    probe_tokens = 6000, probe_batch = 2, seq_len = 32, lambdas = {0, 1}}}

local function train(ex, seed, lam, base, probe_data) -- XSA(lam), against base (the seed's SA run) when given
  local config = ex:pair_config{lambda = lam, seed = seed, probe_batches = ex.opts.probe_batches, probe = probe_data}
  local baseline = base and base.sa.step_loss and base.probe.sa and base -- a record of it that kept what is reused
  return ex:pair{name = string.format("part6-lambda%g-%s", lam, xsa.experiment.seed_tag(config)), config = config,
    label = string.format("part6 λ=%g seed %d", lam, seed), what = string.format("part6 lambda %g seed %d", lam, seed),
    baseline = baseline and baseline.sa, checkpoints = baseline and {"xsa"} or {"sa", "xsa"}, optimizer = false,
    after = L.probe_after(probe_data, ex.opts.probe_batches, baseline),
    check = function(res) return #((res.probe or {}).xsa or {}) > 0, "no probe" end}
end

local function run(ex, seed, lam, first, reuse) -- one (seed, lambda); first: the first lambda's run (its SA baseline)
  local probe_data, base, r, status, entry = study.probe_data_config(ex.opts, ex.opts.seq_len), first and first.r
  if reuse then r, base = L.from_part3(reuse, lam) end
  if not r then r, status, entry = train(ex, seed, lam, base, probe_data) end
  local cos = function(m, key) return study.layer_mean(r.probe[m], key or "post_cos_pos1") end
  return {r = r, x = {seed = seed, sa_val = r.sa.final_val, xsa_val = r.xsa.final_val, improvement_pct = r.improvement_pct,
    steps = r.steps, sa_curve = r.sa.val, xsa_curve = r.xsa.val, -- the mean val loss (make results)
    xsa_post_cos = cos("xsa"), sa_post_cos = cos("sa"), xsa_post_cos_all = cos("xsa", "post_cos"), elapsed_s = r.elapsed_s,
    checkpoints = r.checkpoints, cache = status or r.reused, entry = entry}}
end

function P.units(ex) -- per seed and lambda; part 3's records (probed by part 5) or the first lambda's SA baseline
  local o = ex.opts
  return L.units(ex, o.lambdas, o.probe_batches, study.probe_data_config(o, o.seq_len), function(...) return run(ex, ...) end)
end

function P.main(ex, runs)
  local opts, N, lams, tics, sts, bias_x, bias_s, rows, list = ex.opts, #ex.seeds, ex.opts.lambdas, {}, {}, {}, {}, {}, {}
  local groups = study.paired_groups(study.collect(runs, function(u) return u.x end), #lams, function(_, j)
    return (j - 1) % #lams + 1 end, ex.seeds) -- the units: per seed, every lambda
  for i, lam in ipairs(lams) do
    local g, fmt = groups[i], string.format
    tics[i], sts[i], bias_x[i] = {fmt("%g", lam), lam}, g.stats, study.collect(g.runs, function(r) return r.xsa_post_cos end)
    bias_s[i] = study.collect(g.runs, function(r) return r.sa_post_cos end)
    local s, bx, bs = g.stats, study.mean_ci(bias_x[i]), study.mean_ci(bias_s[i])
    rows[i] = {fmt("%g", lam), fmt("%.4f", g.sa_mean), fmt("%.4f", g.xsa_mean), study.pct(s.mean), study.interval_text(s),
      s.verdict, xsa.numbers.text("%.4f", bx.mean), xsa.numbers.text("%.4f", bs.mean)}
    list[i] = {lambda = lam, improvement_pct = s.mean, stats = s, xsa_post_cos = bx.mean, xsa_post_cos_ci = {bx.lo, bx.hi},
      sa_post_cos = bs.mean, sa_val = rows[i][2] + 0, xsa_val = rows[i][3] + 0, seeds = g.runs}
  end
  local lo, hi, pad, bw = study.sweep_span(lams)
  local fig = plot.figure{cols = 2, width = 1300, height = 600,
    title = string.format("λ sweep from one init per seed: %d steps per run, batch %d, seq_len %d, %d tokens, %s",
      opts.steps, opts.batch, opts.seq_len, opts.max_tokens, study.seeds_text(ex.seeds))}
  local p = fig:panel{title = "paired improvement of XSA(λ) over its SA baseline, %", xlabel = "λ",
    ylabel = "improvement % (positive: XSA lower)", xtics = tics, xrange = {lo - pad - bw, hi + pad + bw},
    key = "top left", zero = true}
  study.improvement_bars_ci(p, lams, sts, bw)
  local q = fig:panel{title = plot.markup(string.format("post-projection mean cos(z_i, v_i): layers, positions ≥ 1, %d batches",
      opts.probe_batches)), xlabel = "λ", ylabel = plot.markup "mean cos(z_i, v_i)", xtics = tics, xrange = {lo - pad, hi + pad},
    zero = true, key = "top right"}
  study.points_ci(q, lams, bias_s, {color = plot.colors.sa, label = "SA baseline (z = y)", line = true, dash = 2})
  study.points_ci(q, lams, bias_x, {color = plot.colors.xsa, label = "XSA(λ)", line = true}) -- no values: lines cross them
  ex:save_figure(fig, "part6_lambda_sweep", "cos(z_i, v_i) is over positions ≥ 1 (at position 0 a token sees only itself; " ..
    "the JSON keeps all positions)." .. (N > 1 and " Means, 95% t intervals as error bars, each seed as a dot." or ""))
  local tbl = ex:table({"lambda", "SA val loss", "XSA val loss", "improvement", "95% t interval", "verdict",
    "XSA mean cos(z,v)", "SA mean cos(z,v)"}, rows)
  print("cos(z,v): mean over layers and positions >= 1" .. (N > 1 and ", then over seeds" or
    "\none seed cannot give an interval; for a 95% interval run with --seeds 5"))
  ex:summary{config = study.train_config(opts, ex.seeds, {lambdas = opts.lambdas, probe_batches = opts.probe_batches,
    probe = study.probe_data_config(opts, opts.seq_len)}), seeds = ex.seeds, result = {runs = list}, table = tbl}
end

return xsa.experiment.part(P, ...)
