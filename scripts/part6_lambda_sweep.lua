-- part6_lambda_sweep.lua: how much projection? Per seed, one group: SA and XSA at every lambda from one init on the same
-- batches (runs part 3 trained are read from its records, lambda.lua), each probed: mean cos(z_i, v_i), positions >= 1.
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

function P.units(ex) -- one per seed; part 5's probes of part 3's models read first (lambda.lua)
  local o, units = ex.opts, {}
  for _, seed in ipairs(ex.seeds) do
    ex.unit_seed = seed -- the records it reads are this seed's (ex:note_record)
    local probes = L.part5_probes(ex, seed, o.probe_batches, study.probe_data_config(o, o.seq_len))
    ex.unit_seed = nil
    units[#units + 1] = {key = "seed " .. seed, seed = seed, run = function() return L.sweep(ex, seed, probes) end}
  end
  return units
end

function P.main(ex, runs)
  local opts, N, lams, tics, sts, bias_x, bias_s, rows, list = ex.opts, #ex.seeds, ex.opts.lambdas, {}, {}, {}, {}, {}, {}
  local each = {} -- per seed, every lambda
  for _, u in ipairs(runs) do for _, x in ipairs(u) do each[#each + 1] = x end end
  local groups = study.paired_groups(each, #lams, function(_, j) return (j - 1) % #lams + 1 end, ex.seeds)
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
