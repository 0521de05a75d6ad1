-- part4_seqlen.lua: the SA/XSA pair at several sequence lengths: per seed
-- and length a fresh pair (the lengths share only the token embedding: wpe,
-- whose size is the length, is drawn right after it) and its own cache
-- entry; plots/part4_seqlen.png: final val loss and improvement % per length
-- (over seeds: 95% error bars, each seed a dot).
--
--   xsa scripts/part4_seqlen.lua                    # 64,128,256; 150k tokens, batch 8, 500 steps each
--   xsa scripts/part4_seqlen.lua --seq-lens 64,128 --steps 200 --seeds 5
local xsa = xsa or require "xsa"
local study, plot = xsa.study, xsa.plot

local P = {name = "part4", title = "Sequence length", report = "report/part4.lua", publish = {seeds = 15},
  summary = "SA vs XSA at several sequence lengths (a fresh pair for each): final val loss per length\n" ..
    "and the improvement % (over --seeds with a 95% interval); each (seed, length) cached.",
  options = study.options({steps = 500, batch = 8, max_tokens = 150000}, {{"seq-lens", "numbers", {64, 128, 256},
    "the sequence lengths", check = function(v)
      for _, T in ipairs(v) do if not math.tointeger(T) or T < 2 then return false, "lengths must be integers >= 2" end end
      return true
    end}}, {"seq-len"}),
  quick = {steps = 4, max_tokens = 6000, batch = 2, eval_every = 2, eval_batches = 2, seq_lens = {16, 32}}}

function P.units(ex) -- one paired run per (seed, length)
  local units = {}
  for _, seed in ipairs(ex.seeds) do
    for _, T in ipairs(ex.opts.seq_lens) do
      T = math.tointeger(T)
      units[#units + 1] = {key = string.format("seed %d seq_len %d", seed, T), seed = seed, run = function()
        local config = ex:pair_config{seq_len = T, seed = seed}
        local r, status, entry = ex:pair{name = string.format("part4-T%d-%s", T, xsa.experiment.seed_tag(config)),
          config = config, label = string.format("part4 T=%d seed %d", T, seed),
          what = string.format("part4 seq_len %d seed %d", T, seed),
          after = function(res) res.sa.step_loss, res.xsa.step_loss = nil, nil end} -- keep the entries small
        return {seed = seed, seq_len = T, sa_val = r.sa.final_val, xsa_val = r.xsa.final_val,
          improvement_pct = r.improvement_pct, elapsed_s = r.elapsed_s, tokens_per_s = r.tokens_per_s, steps = r.steps,
          sa_curve = r.sa.val, xsa_curve = r.xsa.val, cache = status, entry = entry}
      end}
    end
  end
  return units
end

function P.main(ex, runs)
  local opts, lens, fmt = ex.opts, {}, string.format
  for i, T in ipairs(opts.seq_lens) do lens[i] = math.tointeger(T) end
  local N, xs, tics, sts, sa_vals, xsa_vals, rows, list = #ex.seeds, {}, {}, {}, {}, {}, {}, {}
  local place = {}
  for i, T in ipairs(lens) do place[T] = i end
  local groups = study.paired_groups(runs, #lens, function(x) return place[x.seq_len] end, ex.seeds)
  for i, T in ipairs(lens) do
    local g, s = groups[i], groups[i].stats
    xs[i], tics[i], sa_vals[i], xsa_vals[i], sts[i] = i, {tostring(T), i}, g.sa, g.xsa, s
    rows[i] = {tostring(T), fmt("%.4f", g.sa_mean), fmt("%.4f", g.xsa_mean), study.pct(s.mean), study.interval_text(s),
      fmt("%d of %d", s.k_xsa_lower, s.n), s.verdict}
    list[i] = {seq_len = T, sa_val = g.sa_mean, xsa_val = g.xsa_mean, improvement_pct = s.mean, stats = s, seeds = g.runs}
  end
  local fig = plot.figure{cols = 2, width = 1300, height = 600,
    title = string.format("Sequence length: %d steps per run, batch %d, %d tokens, lr %g, %s", opts.steps, opts.batch,
      opts.max_tokens, opts.lr, N > 1 and string.format("%d seeds", N) or string.format("seed %d", ex.seeds[1]))}
  local p = fig:panel{title = "final validation loss (all val batches)", xlabel = "sequence length",
    ylabel = "val loss", xtics = tics, xrange = {0.6, #lens + 0.4}}
  study.points_ci(p, xs, sa_vals, {color = plot.colors.sa, label = "SA", offset = -0.06, line = true})
  study.points_ci(p, xs, xsa_vals, {color = plot.colors.xsa, label = "XSA", offset = 0.06, line = true})
  local q = fig:panel{title = "improvement of XSA over SA, % (positive: XSA lower)", xlabel = "sequence length",
    ylabel = "improvement %", xtics = tics, xrange = {0.4, #lens + 0.6}, key = "top right", zero = true,
    headroom = 0.35}
  study.improvement_bars_ci(q, xs, sts, 0.5)
  ex:save_figure(fig, "part4_seqlen", N > 1 and string.format("Over %d seeds: markers and bars are means, error bars " ..
    "95%% t intervals, dots each seed's value.", N) or "One seed: no interval (run with --seeds 5 for one).")
  local tbl = ex:table({"seq_len", "SA val loss (mean)", "XSA val loss (mean)", "improvement (mean)", "95% t interval",
    "XSA lower in", "verdict"}, rows)
  if N == 1 then print("\none seed cannot give an interval; for a 95% interval run with --seeds 5") end
  ex:summary{config = {steps = opts.steps, batch = opts.batch, max_tokens = opts.max_tokens, lr = opts.lr,
    lambda = opts.lambda, seq_lens = opts.seq_lens, seeds = ex.seeds, data_seed = opts.data_seed,
    init_seed = opts.init_seed, eval_every = opts.eval_every}, seeds = ex.seeds, result = {runs = list}, table = tbl}
end

return xsa.experiment.part(P, ...)
