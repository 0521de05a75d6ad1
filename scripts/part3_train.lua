-- part3_train.lua: the main experiment: SA and XSA from identical weights on
-- identical batches, each with its own AdamW, per seed (--seeds N: the verdict
-- with a 95% interval); per seed a cache entry and part3-{init,sa,xsa}-... checkpoints.
--   xsa scripts/part3_train.lua [--seeds 5] [--quick]   # 300 steps, batch 16, seq_len 64, seed 0
local xsa = xsa or require "xsa"
local study, plot, fmt = xsa.study, xsa.plot, string.format

local P = {name = "part3", title = "Paired training", report = "report/part3.lua", publish = {seeds = 50},
  summary = "Paired training: SA and XSA from identical initial weights, the same batch to both at every step,\n" ..
    "AdamW each; train/val loss curves, final val loss table, checkpoints and results; --seeds N replicates\n" ..
    "the pair over seeds and gives the verdict with a 95% interval.",
  options = study.options({}), quick = xsa.experiment.pair_quick(),
  config = function(opts) return xsa.experiment.pair_config(opts, "part3") end}

function P.units(ex) -- one paired run per seed
  return ex:seed_units(function(seed)
    local r, status, entry = ex:pair{seed = seed, checkpoints = true, what = fmt("part3 paired training (seed %d)", seed),
      label = ex.replicated and fmt("part3 seed %d", seed) or "part3", on_start = function(sa, train, val)
        print(fmt("seed %d: SA and XSA (lambda %g) from identical weights: %d parameters each; %d train / %d val batches of %dx%d",
          seed, ex.opts.lambda, sa:num_params(), train:num_batches(), val:num_batches(), ex.opts.batch, ex.opts.seq_len))
      end}
    return {seed = seed, r = r, cache = status, entry = entry}
  end)
end

function P.main(ex, runs)
  local opts, results = ex.opts, study.collect(runs, function(x) return x.r end)
  local r1, N = results[1], #runs
  local c = r1.config
  local sa_final = study.collect(results, function(r) return r.sa.final_val end)
  local xsa_final = study.collect(results, function(r) return r.xsa.final_val end)
  local st = study.paired_stats(sa_final, xsa_final, ex.seeds)
  local fig = plot.figure{cols = N > 1 and 3 or 2, width = N > 1 and 1800 or 1300, height = 660,
    title = fmt("SA vs XSA (λ = %g): %d steps, batch %d, seq_len %d, lr %g, %d tokens, %s", opts.lambda, c.steps,
      c.batch_size, c.seq_len, c.lr, opts.max_tokens, N > 1 and fmt("%d seeds (mean and 95%% band)", N) or fmt("seed %d", ex.seeds[1]))}
  for _, kind in ipairs{"train", "val"} do
    local p = fig:panel{title = kind == "train" and "training loss (mean since the previous point)" or
      fmt("validation loss (%d val batches; last point: all %d)", c.eval_batches, c.val_batches),
      xlabel = "step", ylabel = "cross-entropy loss", key = "top right"}
    study.loss_curves(p, results, kind) -- one seed: the gap shaded; several: the mean and its 95% band
    if kind == "val" then
      p:text(0.97, 0.6, N == 1 and fmt("final val loss\n(all %d batches):\nSA %.4f   XSA %.4f\n" ..
        "improvement %s", c.val_batches, r1.sa.final_val, r1.xsa.final_val, study.pct(r1.improvement_pct))
        or fmt("mean final val loss\n(all %d batches):\nSA %.4f   XSA %.4f", c.val_batches,
        xsa.stats.mean(sa_final), xsa.stats.mean(xsa_final)), {graph = true, align = "right", fontsize = 10})
    end
  end
  if N > 1 then study.seed_improvement_panel(fig, st) end -- each seed's improvement, the mean and its interval
  ex:save_figure(fig, "part3_loss", fmt("The last point of each validation curve is the loss over the whole validation set " ..
    "(%d batches), the number the table reports; the earlier points use the first %d batches.%s", c.val_batches, c.eval_batches,
    N > 1 and fmt(" Thick lines: the mean over %d seeds; bands: its 95%% t interval at each point; thin lines: each seed. " ..
    "Right: each seed's improvement and their mean with its 95%% t interval.", N) or ""))
  local rows, per_seed, elapsed = {}, {}, 0
  for i, x in ipairs(runs) do
    local r, n = x.r, #x.r.steps
    rows[i] = {tostring(x.seed), fmt("%.4f", r.sa.final_val), fmt("%.4f", r.xsa.final_val), study.pct(r.improvement_pct),
      fmt("%.4f", r.sa.train[n]), fmt("%.4f", r.xsa.train[n]), x.cache}
    per_seed[i] = {seed = x.seed, sa_val = r.sa.final_val, xsa_val = r.xsa.final_val, improvement_pct = r.improvement_pct,
      steps = r.steps, sa = {train = r.sa.train, val = r.sa.val}, xsa = {train = r.xsa.train, val = r.xsa.val},
      elapsed_s = r.elapsed_s, checkpoints = r.checkpoints, entry = x.entry, cache = x.cache}
    elapsed = elapsed + r.elapsed_s
  end
  local tbl = ex:table({"seed", "SA final val loss", "XSA final val loss", "improvement", "SA train loss (last interval)",
    "XSA train loss (last interval)", "cache"}, rows)
  print("\nfinal val loss: over all val batches, the last point of each validation curve")
  local lines = study.stats_lines(st, "final val loss", true)
  for _, l in ipairs(lines) do print(l) end
  local timing = ex:timing(runs, "paired run") -- a record's time was spent when and where it was recorded
  print(fmt("%s (%.1f s evaluating in the first, %s tokens/s over both models)", timing, r1.eval_s, xsa.progress.rate(r1.tokens_per_s)))
  for _, x in ipairs(runs) do
    local ck = x.r.checkpoints -- none when the run came from its record
    print(fmt("seed %d: %s%s", x.seed, x.entry, ck and fmt("; checkpoints %s, %s, %s", ck.init, ck.sa, ck.xsa) or ""))
  end
  ex:summary{cache = runs[1].cache, entry = runs[1].entry, result = r1, seeds = ex.seeds, runs = per_seed, stats = st,
    stats_lines = lines, table = tbl, train_s = elapsed, timing = timing}
end

return xsa.experiment.part(P, ...)
