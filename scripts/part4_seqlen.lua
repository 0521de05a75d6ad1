-- part4_seqlen.lua: the SA/XSA pair at several sequence lengths.
--
--   xsa scripts/part4_seqlen.lua                    # 64,128,256; 150k tokens, batch 8, 500 steps each
--   xsa scripts/part4_seqlen.lua --seq-lens 64,128 --steps 200
--   xsa scripts/part4_seqlen.lua --quick
--
-- For each length a fresh pair (same seed, so the same initial weights for
-- the parameters both lengths share) is trained with xsa.train.pair on
-- windows of that length; each length's result is a cache entry keyed by the
-- full configuration, so adding a length or changing a flag trains only
-- what is new. Figure: plots/part4_seqlen.png (final val loss vs length;
-- improvement % bars). Improvement % = 100 (SA - XSA) / SA of the final val
-- loss: positive when XSA is lower.
local xsa = xsa or require "xsa"
local study = xsa.study
local plot = xsa.plot

local spec = {
  name = "part4_seqlen.lua",
  summary = "SA vs XSA at several sequence lengths (a fresh pair for each): final val loss per length\n" ..
    "and the improvement %; each length cached.",
  options = study.options({steps = 500, batch = 8, max_tokens = 150000}, {
    {"seq-lens", "numbers", {64, 128, 256}, "the sequence lengths"},
  }, {"seq-len"}),
  quick = {steps = 4, max_tokens = 6000, batch = 2, eval_every = 2, eval_batches = 2, seq_lens = {16, 32}},
}

local function main()
  local opts = study.setup(xsa.args.parse(arg, spec))
  local t0 = os.time()
  local runs, statuses, entries = {}, {}, {}
  for i, T in ipairs(opts.seq_lens) do
    T = math.tointeger(T)
    if not T or T < 2 then
      io.stderr:write("part4_seqlen.lua: sequence lengths must be integers >= 2\n")
      os.exit(2)
    end
    local config = {part = "part4", data = study.data_config(opts, T), model = study.model_config(opts, T),
      train = study.adam_config(opts), lambda = opts.lambda}
    local res, status, entry = xsa.cache.fetch(opts.out, string.format("part4-T%d", T), config, function()
      local tl, vl = study.loaders(config.data)
      local sa_model, xsa_model = study.new_pair(config.model, opts.lambda)
      local r = xsa.train.pair(sa_model, xsa_model, tl, vl, study.pair_options(config.train, {
        label = string.format("part4 T=%d", T), save = study.partial_saver(opts, string.format("part4-T%d", T), config)}))
      r.sa.step_loss, r.xsa.step_loss = nil, nil -- keep the entries small
      sa_model:free(); xsa_model:free()
      return r
    end, {no_cache = opts.no_cache, label = string.format("part4 seq_len %d", T), check = study.check_pair})
    runs[i], statuses[i], entries[i] = res, status, entry
  end

  local n = #runs
  local xs, sa_val, xsa_val, imp, tics = {}, {}, {}, {}, {}
  for i, r in ipairs(runs) do
    xs[i] = i
    sa_val[i] = r.sa.final_val
    xsa_val[i] = r.xsa.final_val
    imp[i] = r.improvement_pct or 0
    tics[i] = {tostring(math.tointeger(opts.seq_lens[i])), i}
  end
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
  local figinfo = study.save_figure(fig, opts, "part4_seqlen")

  local rows = {}
  for i, r in ipairs(runs) do
    rows[i] = {tostring(math.tointeger(opts.seq_lens[i])), string.format("%.4f", r.sa.final_val),
      string.format("%.4f", r.xsa.final_val), study.pct(r.improvement_pct), string.format("%.0f", r.elapsed_s),
      statuses[i]}
  end
  local tbl = study.md_table({"seq_len", "SA val loss", "XSA val loss", "improvement", "train time (s)", "cache"}, rows)
  io.stdout:write("\n", tbl)
  local list = {}
  for i, r in ipairs(runs) do
    list[i] = {seq_len = math.tointeger(opts.seq_lens[i]), sa_val = r.sa.final_val, xsa_val = r.xsa.final_val,
      improvement_pct = r.improvement_pct, elapsed_s = r.elapsed_s, tokens_per_s = r.tokens_per_s,
      steps = r.steps, sa_curve = r.sa.val, xsa_curve = r.xsa.val, cache = statuses[i], entry = entries[i]}
  end
  study.write_summary(opts, "part4", {title = "Sequence length", config = {steps = opts.steps, batch = opts.batch,
    max_tokens = opts.max_tokens, lr = opts.lr, lambda = opts.lambda, seq_lens = opts.seq_lens, seed = opts.seed,
    eval_every = opts.eval_every}, wall_s = os.time() - t0, result = {runs = list}, figures = {figinfo}, table = tbl})
end

study.main(main)
