-- part3_train.lua: paired training of SA and XSA from identical weights on
-- identical batches (the main experiment of the study).
--
--   xsa scripts/part3_train.lua                 # 300 steps, batch 16, seq_len 64
--   xsa scripts/part3_train.lua --quick         # a few seconds
--
-- Writes, under --out (default cache/), with the step count and a hash of the
-- configuration in each name: part3-300steps-HASH.json (the result, a cache
-- entry), part3-{init,sa,xsa}-300steps-HASH.safetensors (the shared initial
-- weights; trained SA and XSA with their AdamW state); and plots/part3_loss.png:
-- train and val loss of both, the gap shaded. A second run with the same
-- flags is a cache hit (nothing retrained); a run stopped by Ctrl-C or kill
-- continues from its saved state (every --save-every steps) when run again.
local xsa = xsa or require "xsa"
local study, plot = xsa.study, xsa.plot

local ex = xsa.experiment{
  name = "part3", script = "part3_train.lua", title = "Paired training",
  summary = "Paired training: SA and XSA from identical initial weights, the same batch to both at every step,\n" ..
    "AdamW each; train/val loss curves, final val loss table, checkpoints and results.",
  options = study.options({}), quick = xsa.experiment.pair_quick(),
  config = function(opts) return xsa.experiment.pair_config(opts, "part3") end,
}
local opts = ex.opts

ex:main(function()
  local r, status, entry = ex:pair{checkpoints = true, what = "part3 paired training",
    on_start = function(sa_model, train, val)
      print(string.format("SA and XSA (lambda %g) from identical weights: %d parameters each; %d train / %d val batches of %dx%d",
        opts.lambda, sa_model:num_params(), train:num_batches(), val:num_batches(), opts.batch, opts.seq_len))
    end}

  local c = r.config
  local fig = plot.figure{cols = 2, width = 1300, height = 520,
    title = string.format("SA vs XSA (λ = %g): %d steps, batch %d, seq\\_len %d, lr %g, %d tokens",
      opts.lambda, c.steps, c.batch_size, c.seq_len, c.lr, opts.max_tokens)}
  for _, kind in ipairs{"train", "val"} do
    local p = fig:panel{
      title = kind == "train" and "training loss (mean since the previous point)" or
        string.format("validation loss (%d val batches; final over all %d)", c.eval_batches, c.val_batches),
      xlabel = "step", ylabel = "cross-entropy loss", key = "top right"}
    p:band(r.steps, r.sa[kind], r.xsa[kind], {color = "#7D3C98", alpha = 0.18, label = "gap"})
    p:line(r.steps, r.sa[kind], {label = "SA", color = plot.colors.sa, points = true, pointsize = 0.7})
    p:line(r.steps, r.xsa[kind], {label = "XSA", color = plot.colors.xsa, points = true, pointsize = 0.7})
    if kind == "val" and r.sa.final_val then
      p:text(0.97, 0.62, string.format("final val loss (all %d val batches):\nSA %.4f   XSA %.4f\nimprovement %s (positive: XSA lower)",
        c.val_batches, r.sa.final_val, r.xsa.final_val, study.pct(r.improvement_pct)),
        {graph = true, align = "right", fontsize = 10})
    end
  end
  ex:save_figure(fig, "part3_loss")

  local n = #r.steps
  local tbl = ex:table({"model", "final val loss (all val batches)", "train loss (last interval)"}, {
    {"SA", string.format("%.4f", r.sa.final_val), string.format("%.4f", r.sa.train[n])},
    {"XSA", string.format("%.4f", r.xsa.final_val), string.format("%.4f", r.xsa.train[n])},
  })
  print()
  print(string.format("improvement of XSA over SA (final val loss): %s  (positive = XSA lower)", study.pct(r.improvement_pct)))
  print("in this run " .. study.compare_words(r.sa.final_val, r.xsa.final_val) .. ".")
  print(string.format("training: %.1f s (%.1f s evaluating), %s tokens/s over both models",
    r.elapsed_s, r.eval_s, xsa.progress.rate(r.tokens_per_s)))
  print("result: " .. entry)
  print("checkpoints: " .. r.checkpoints.init .. ", " .. r.checkpoints.sa .. ", " .. r.checkpoints.xsa)
  ex:summary{cache = status, entry = entry, result = r, table = tbl}
end)
