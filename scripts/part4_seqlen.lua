-- part4_seqlen.lua: the SA/XSA pair at several sequence lengths.
--
--   xsa scripts/part4_seqlen.lua                    # 64,128,256; 150k tokens, batch 8, 500 steps each
--   xsa scripts/part4_seqlen.lua --seq-lens 64,128 --steps 200 --seeds 5
--   xsa scripts/part4_seqlen.lua --quick
--
-- For each seed and length a fresh pair is trained with xsa.train.pair on
-- windows of that length. The lengths do not share initial weights beyond
-- the token embedding: the position embedding wpe, whose size is the length,
-- is drawn right after it, so every later draw differs. Each (seed, length)
-- is a cache entry keyed by the full configuration, so adding a length, a
-- seed or changing a flag trains only what is new. Figure:
-- plots/part4_seqlen.png (final val loss vs length; improvement % per
-- length, over seeds with 95% error bars and each seed as a dot).
-- Improvement % = 100 (SA - XSA) / SA of the final val loss: positive when
-- XSA is lower.
local xsa = xsa or require "xsa"
local study, plot = xsa.study, xsa.plot

local ex = xsa.experiment{
  name = "part4", script = "part4_seqlen.lua", title = "Sequence length",
  summary = "SA vs XSA at several sequence lengths (a fresh pair for each): final val loss per length\n" ..
    "and the improvement % (over --seeds with a 95% interval); each (seed, length) cached.",
  options = study.options({steps = 500, batch = 8, max_tokens = 150000}, {{"seq-lens", "numbers", {64, 128, 256},
    "the sequence lengths", check = function(v)
      for _, T in ipairs(v) do if not math.tointeger(T) or T < 2 then return false, "lengths must be integers >= 2" end end
      return true
    end}}, {"seq-len"}),
  quick = {steps = 4, max_tokens = 6000, batch = 2, eval_every = 2, eval_batches = 2, seq_lens = {16, 32}},
  ranks = true, -- mpirun: the (seed, length) runs over the ranks
}
local opts = ex.opts

ex:main(function()
  local lens, by_len = {}, {}
  for i, T in ipairs(opts.seq_lens) do lens[i] = math.tointeger(T); by_len[i] = {} end
  local function run(seed, T)
    local config = ex:pair_config{seq_len = T, seed = seed}
    return ex:pair{name = string.format("part4-T%d-%s", T, xsa.experiment.seed_tag(config)),
      config = config, label = string.format("part4 T=%d seed %d", T, seed),
      what = string.format("part4 seq_len %d seed %d", T, seed),
      after = function(res) res.sa.step_loss, res.xsa.step_loss = nil, nil end} -- keep the entries small
  end
  local units = {} -- mpirun: every (seed, length) is a run of its own
  for _, seed in ipairs(ex.seeds) do
    for _, T in ipairs(lens) do units[#units + 1] = {seed = seed, T = T, label = string.format("seed %d seq_len %d", seed, T)} end
  end
  ex:spread(units, function(u) run(u.seed, u.T) end)
  ex:each_seed(function(seed) -- --jobs J: J seeds side by side
    local mine = {} -- a seed counts only with every length (--from-records)
    for i, T in ipairs(lens) do
      local r, status, entry = run(seed, T)
      mine[i] = {seed = seed, seq_len = T, sa_val = r.sa.final_val, xsa_val = r.xsa.final_val,
        improvement_pct = r.improvement_pct, elapsed_s = r.elapsed_s, tokens_per_s = r.tokens_per_s, steps = r.steps,
        sa_curve = r.sa.val, xsa_curve = r.xsa.val, cache = status, entry = entry}
    end
    for i, x in ipairs(mine) do by_len[i][#by_len[i] + 1] = x end
  end)

  local N, xs, tics, sts, sa_vals, xsa_vals, rows, list = #ex.seeds, {}, {}, {}, {}, {}, {}, {}
  for i, T in ipairs(lens) do
    local runs = by_len[i]
    xs[i], tics[i] = i, {tostring(T), i}
    sa_vals[i] = study.collect(runs, function(r) return r.sa_val end)
    xsa_vals[i] = study.collect(runs, function(r) return r.xsa_val end)
    sts[i] = study.paired_stats(sa_vals[i], xsa_vals[i], ex.seeds)
    local s = sts[i]
    rows[i] = {tostring(T), string.format("%.4f", xsa.stats.mean(sa_vals[i])), string.format("%.4f", xsa.stats.mean(xsa_vals[i])),
      study.pct(s.mean), s.t_lo and string.format("%+.2f to %+.2f", s.t_lo, s.t_hi) or "n/a",
      string.format("%d of %d", s.k_xsa_lower, s.n), s.verdict}
    list[i] = {seq_len = T, sa_val = xsa.stats.mean(sa_vals[i]), xsa_val = xsa.stats.mean(xsa_vals[i]),
      improvement_pct = s.mean, stats = s, seeds = runs}
  end

  local fig = plot.figure{cols = 2, width = 1300, height = 540,
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
end)
