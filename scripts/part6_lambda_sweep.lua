-- part6_lambda_sweep.lua: how much projection? From one init per seed each
-- XSA(lambda) trains against its own SA baseline (same init, same batches),
-- then is probed: mean post-projection cos(z_i, v_i) over layers, positions
-- >= 1. The baseline is one run per seed, trained with the first lambda;
-- the other lambdas' units need it (its record, probe and checkpoint).
--   xsa scripts/part6_lambda_sweep.lua [--lambdas 0,1] [--seeds 3] [--quick]
local xsa = xsa or require "xsa"
local study, plot = xsa.study, xsa.plot

local P = {name = "part6", title = "Lambda sweep", report = "report/part6.lua", publish = {seeds = 5}, ranks = true,
  summary = "Lambda sweep from one fixed init per seed: each XSA(lambda) against its own paired SA baseline;\n" ..
    "paired improvement % and mean post-projection bias vs lambda (over --seeds with 95% intervals);\n" ..
    "each (seed, lambda) cached, with the trained XSA model and the SA baseline as checkpoints.",
  options = study.options({}, {{"lambdas", "numbers", {0, 0.25, 0.5, 0.75, 1.0}, "the lambda values"},
    table.unpack(study.probe_options(3))}, {"lambda"}),
  quick = {steps = 4, max_tokens = 6000, batch = 2, eval_every = 2, eval_batches = 2, probe_batches = 2,
    probe_tokens = 6000, probe_batch = 2, seq_len = 32, lambdas = {0, 1}}}

-- One (seed, lambda) run; `base`: this seed's SA baseline (the first lambda's run; nil: train SA here too).
local function run(ex, seed, lam, base)
  local opts, probe_data = ex.opts, study.probe_data_config(ex.opts, ex.opts.seq_len)
  local config = ex:pair_config{lambda = lam, seed = seed, probe_batches = opts.probe_batches, probe = probe_data}
  local baseline = base and base.sa.step_loss and base.probe.sa and base -- a record of it that kept what is reused
  local r, status, entry = ex:pair{name = string.format("part6-lambda%g-%s", lam, xsa.experiment.seed_tag(config)),
    config = config, label = string.format("part6 λ=%g seed %d", lam, seed), what = string.format("part6 lambda %g seed %d", lam, seed),
    baseline = baseline and baseline.sa, checkpoints = baseline and {"xsa"} or {"sa", "xsa"}, optimizer = false,
    after = function(res, m)
      res.xsa.step_loss = nil
      local _, pv = study.loaders(probe_data)
      local n = math.min(opts.probe_batches, pv:num_batches())
      res.probe = {batches = n, xsa = study.probe(m.xsa, pv, n), sa = baseline and baseline.probe.sa or study.probe(m.sa, pv, n)}
      if baseline then res.checkpoints.sa = baseline.checkpoints and baseline.checkpoints.sa end
      pv:free()
    end, check = function(res) return #((res.probe or {}).xsa or {}) > 0, "no probe" end}
  return {r = r, x = {seed = seed, sa_val = r.sa.final_val, xsa_val = r.xsa.final_val, improvement_pct = r.improvement_pct,
    xsa_post_cos = study.layer_mean(r.probe.xsa, "post_cos_pos1"), sa_post_cos = study.layer_mean(r.probe.sa, "post_cos_pos1"),
    xsa_post_cos_all = study.layer_mean(r.probe.xsa, "post_cos"), elapsed_s = r.elapsed_s, checkpoints = r.checkpoints,
    cache = status, entry = entry}}
end

function P.units(ex) -- per seed: the first lambda (it trains the SA baseline), then the others, which need it
  local units = {}
  for _, seed in ipairs(ex.seeds) do
    local first = string.format("seed %d lambda %g", seed, ex.opts.lambdas[1])
    for i, lam in ipairs(ex.opts.lambdas) do
      units[#units + 1] = {key = string.format("seed %d lambda %g", seed, lam), seed = seed, after = i > 1 and {first} or nil,
        run = function(d) return run(ex, seed, lam, i > 1 and d[first].r or nil) end}
    end
  end
  return units
end

function P.main(ex, runs)
  local opts, N, lams, tics, sts, bias_x, bias_s, rows, list = ex.opts, #ex.seeds, ex.opts.lambdas, {}, {}, {}, {}, {}, {}
  local groups = study.paired_groups(study.collect(runs, function(u) return u.x end), #lams, function(_, j)
    return (j - 1) % #lams + 1 end, ex.seeds) -- the units: per seed, every lambda
  for i, lam in ipairs(lams) do
    local g, fmt = groups[i], string.format
    tics[i], sts[i] = {fmt("%g", lam), lam}, g.stats
    bias_x[i] = study.collect(g.runs, function(r) return r.xsa_post_cos end)
    bias_s[i] = study.collect(g.runs, function(r) return r.sa_post_cos end)
    local s, bx, bs = g.stats, study.mean_ci(bias_x[i]), study.mean_ci(bias_s[i])
    rows[i] = {fmt("%g", lam), fmt("%.4f", g.sa_mean), fmt("%.4f", g.xsa_mean), study.pct(s.mean), study.interval_text(s),
      s.verdict, fmt("%.4f", bx.mean), fmt("%.4f", bs.mean)}
    list[i] = {lambda = lam, improvement_pct = s.mean, stats = s, xsa_post_cos = bx.mean, xsa_post_cos_ci = {bx.lo, bx.hi},
      sa_post_cos = bs.mean, sa_val = rows[i][2] + 0, xsa_val = rows[i][3] + 0, seeds = g.runs}
  end
  local lo, hi = math.min(table.unpack(lams)), math.max(table.unpack(lams))
  local pad, bw = math.max(0.08, (hi - lo) * 0.08), #lams > 1 and math.min(0.15, (hi - lo) / #lams * 0.6) or 0.15
  local fig = plot.figure{cols = 2, width = 1300, height = 540,
    title = string.format("λ sweep from one init per seed: %d steps per run, batch %d, seq\\_len %d, %d tokens, %s",
      opts.steps, opts.batch, opts.seq_len, opts.max_tokens, N > 1 and string.format("%d seeds", N) or string.format("seed %d", ex.seeds[1]))}
  local p = fig:panel{title = "paired improvement of XSA(λ) over its SA baseline, %", xlabel = "λ",
    ylabel = "improvement % (positive: XSA lower)", xtics = tics, xrange = {lo - pad - bw, hi + pad + bw},
    key = "top left", zero = true, headroom = 0.35}
  study.improvement_bars_ci(p, lams, sts, bw)
  local q = fig:panel{title = string.format("post-projection mean cos(z_i, v_i): layers, positions ≥ 1, %d batches",
      opts.probe_batches), xlabel = "λ", ylabel = "mean cos(z_i, v_i)", xtics = tics, xrange = {lo - pad, hi + pad},
    zero = true, key = "top right"}
  study.points_ci(q, lams, bias_s, {color = plot.colors.sa, label = "SA baseline (z = y)", line = true, dash = 2})
  local mx = study.points_ci(q, lams, bias_x, {color = plot.colors.xsa, label = "XSA(λ)", line = true})
  local vals = {}
  for i, b in ipairs(mx) do vals[i] = plot.number_text("%.3f", b) end
  q:labels(lams, mx, vals, {color = plot.colors.xsa, offset = {3.5, 0}})
  ex:save_figure(fig, "part6_lambda_sweep", "cos(z_i, v_i) is over positions ≥ 1 (at position 0 a token attends only " ..
    "to itself; the JSON keeps the all-positions values)." .. (N > 1 and string.format(" Over %d seeds: means, 95%% t " ..
    "intervals as error bars, each seed as a dot.", N) or ""))
  local tbl = ex:table({"lambda", "SA val loss", "XSA val loss", "improvement", "95% t interval", "verdict",
    "XSA mean cos(z,v)", "SA mean cos(z,v)"}, rows)
  print("cos(z,v): mean over layers and positions >= 1" .. (N > 1 and ", then over seeds" or ""))
  if N == 1 then print("one seed cannot give an interval; for a 95% interval run with --seeds 5") end
  ex:summary{config = {steps = opts.steps, batch = opts.batch, seq_len = opts.seq_len, max_tokens = opts.max_tokens,
    lr = opts.lr, seeds = ex.seeds, data_seed = opts.data_seed, init_seed = opts.init_seed, lambdas = opts.lambdas,
    probe_batches = opts.probe_batches, probe = study.probe_data_config(opts, opts.seq_len)}, seeds = ex.seeds, result = {runs = list}, table = tbl}
end

return xsa.experiment.part(P, ...)
