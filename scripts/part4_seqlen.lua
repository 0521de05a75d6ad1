-- part4_seqlen.lua: the SA/XSA pair at several sequence lengths.
--
--   xsa scripts/part4_seqlen.lua                    # 64,128,256; 150k tokens, batch 8, 500 steps each
--   xsa scripts/part4_seqlen.lua --seq-lens 64,128 --steps 200
--   xsa scripts/part4_seqlen.lua --quick
--
-- For each length a fresh pair is trained with xsa.train.pair on windows of
-- that length, from the same seed. The lengths do not share initial weights
-- beyond the token embedding: the position embedding wpe, whose size is the
-- length, is drawn right after it, so every later draw differs. Each length's
-- result is a cache entry keyed by the full configuration, so adding a length
-- or changing a flag trains only what is new. Figure: plots/part4_seqlen.png
-- (final val loss vs length; improvement % bars). Improvement % = 100 (SA -
-- XSA) / SA of the final val loss: positive when XSA is lower.
local xsa = xsa or require "xsa"
local study, plot = xsa.study, xsa.plot

local ex = xsa.experiment{
  name = "part4", script = "part4_seqlen.lua", title = "Sequence length",
  summary = "SA vs XSA at several sequence lengths (a fresh pair for each): final val loss per length\n" ..
    "and the improvement %; each length cached.",
  options = study.options({steps = 500, batch = 8, max_tokens = 150000}, {{"seq-lens", "numbers", {64, 128, 256},
    "the sequence lengths", check = function(v)
      for _, T in ipairs(v) do if not math.tointeger(T) or T < 2 then return false, "lengths must be integers >= 2" end end
      return true
    end}}, {"seq-len"}),
  quick = {steps = 4, max_tokens = 6000, batch = 2, eval_every = 2, eval_batches = 2, seq_lens = {16, 32}},
}
local opts = ex.opts

ex:main(function()
  local runs, xs, sa_val, xsa_val, imp, tics, rows, list = {}, {}, {}, {}, {}, {}, {}, {}
  for i, T in ipairs(opts.seq_lens) do
    T = math.tointeger(T)
    local r, status, entry = ex:pair{name = string.format("part4-T%d", T), config = ex:pair_config{seq_len = T},
      label = string.format("part4 T=%d", T), what = string.format("part4 seq_len %d", T),
      after = function(res) res.sa.step_loss, res.xsa.step_loss = nil, nil end} -- keep the entries small
    runs[i], xs[i], sa_val[i], xsa_val[i], imp[i], tics[i] = r, i, r.sa.final_val, r.xsa.final_val,
      r.improvement_pct or 0, {tostring(T), i}
    rows[i] = {tostring(T), string.format("%.4f", r.sa.final_val), string.format("%.4f", r.xsa.final_val),
      study.pct(r.improvement_pct), string.format("%.0f", r.elapsed_s), status}
    list[i] = {seq_len = T, sa_val = r.sa.final_val, xsa_val = r.xsa.final_val, improvement_pct = r.improvement_pct,
      elapsed_s = r.elapsed_s, tokens_per_s = r.tokens_per_s, steps = r.steps, sa_curve = r.sa.val,
      xsa_curve = r.xsa.val, cache = status, entry = entry}
  end

  local n = #runs
  local fig = plot.figure{cols = 2, width = 1300, height = 520,
    title = string.format("Sequence length: %d steps per run, batch %d, %d tokens, lr %g", opts.steps, opts.batch,
      opts.max_tokens, opts.lr)}
  local p = fig:panel{title = "final validation loss (all val batches)", xlabel = "sequence length",
    ylabel = "val loss", xtics = tics, xrange = {0.6, n + 0.4}}
  p:line(xs, sa_val, {label = "SA", color = plot.colors.sa, points = true})
  p:line(xs, xsa_val, {label = "XSA", color = plot.colors.xsa, points = true})
  local q = fig:panel{title = "improvement of XSA over SA, % (positive: XSA lower)", xlabel = "sequence length",
    ylabel = "improvement %", xtics = tics, xrange = {0.4, n + 0.6}, key = "top right", zero = true,
    headroom = 0.3}
  study.improvement_bars(q, xs, imp, 0.5)
  ex:save_figure(fig, "part4_seqlen")

  local tbl = ex:table({"seq_len", "SA val loss", "XSA val loss", "improvement", "train time (s)", "cache"}, rows)
  ex:summary{config = {steps = opts.steps, batch = opts.batch, max_tokens = opts.max_tokens, lr = opts.lr,
    lambda = opts.lambda, seq_lens = opts.seq_lens, seed = opts.seed, eval_every = opts.eval_every},
    result = {runs = list}, table = tbl}
end)
