-- part3_train.lua: paired training of SA and XSA from identical weights on
-- identical batches (the main experiment of the study).
--
--   xsa scripts/part3_train.lua                 # 300 steps, batch 16, seq_len 64
--   xsa scripts/part3_train.lua --quick         # a few seconds
--
-- Writes, under --out (default cache/), with the step count and a hash of the
-- configuration in each name:
--   part3-init-300steps-HASH.safetensors   the shared initial weights
--   part3-sa-300steps-HASH.safetensors     trained SA (with its AdamW state)
--   part3-xsa-300steps-HASH.safetensors    trained XSA
--   part3-300steps-HASH.json               the result (cache entry)
-- and plots/part3_loss.png: train and val loss of both, the gap shaded.
-- A second run with the same flags is a cache hit (nothing retrained).
local xsa = xsa or require "xsa"
local study = xsa.study
local plot = xsa.plot

local spec = {
  name = "part3_train.lua",
  summary = "Paired training: SA and XSA from identical initial weights, the same batch to both at every step,\n" ..
    "AdamW each; train/val loss curves, final val loss table, checkpoints and results.",
  options = study.options({}),
  quick = {steps = 10, max_tokens = 10000, batch = 4, eval_every = 5, eval_batches = 2},
}

local function paths(opts, config)
  local base = xsa.cache.path(opts.out, "part3", config, "")
  local hash = base:match("%-(%x+)$")
  local function ck(kind, suffix)
    return string.format("%s/part3-%s-%dsteps-%s%s.safetensors", opts.out, kind, opts.steps, hash, suffix or "")
  end
  return {
    name = string.format("part3-%dsteps", opts.steps),
    init = ck("init"), sa = ck("sa"), xsa = ck("xsa"),
    partial = function(kind, done) return ck(kind, string.format("-at%d", done)) end,
    hash = hash,
  }
end

-- The configuration of a part-3 run given the flags (part5 uses it too).
local function config_of(opts)
  return {
    part = "part3", data = study.data_config(opts), model = study.model_config(opts),
    train = study.adam_config(opts), lambda = opts.lambda,
  }
end

local function train(opts, config, p)
  local train_loader, val_loader = study.loaders(config.data)
  local sa_model, xsa_model = study.new_pair(config.model, opts.lambda)
  sa_model:save(p.init)
  print(string.format("SA and XSA (lambda %g) from identical weights: %d parameters each; %d train / %d val batches of %dx%d",
    opts.lambda, sa_model:num_params(), train_loader:num_batches(), val_loader:num_batches(), opts.batch, opts.seq_len))
  local result = xsa.train.pair(sa_model, xsa_model, train_loader, val_loader, study.pair_options(config.train, {
    label = "part3",
    save = function(res, status, ctx)
      local files = {}
      local sa_path, xsa_path = p.sa, p.xsa
      if status ~= "done" then
        sa_path, xsa_path = p.partial("sa", res.completed_steps), p.partial("xsa", res.completed_steps)
      end
      if res.completed_steps > 0 then
        ctx.sa:save(sa_path, {optimizer = ctx.sa_opt})
        ctx.xsa:save(xsa_path, {optimizer = ctx.xsa_opt})
        files[#files + 1] = sa_path
        files[#files + 1] = xsa_path
      end
      if status ~= "done" then
        local rp = string.format("%s/%s-%s-at%d.json", opts.out, p.name, p.hash, res.completed_steps)
        res.checkpoints = {init = p.init, sa = sa_path, xsa = xsa_path}
        xsa.json.write_file(rp, {config = config, result = res}, {indent = true})
        files[#files + 1] = rp
      end
      return table.concat(files, ", ")
    end,
  }))
  result.checkpoints = {init = p.init, sa = p.sa, xsa = p.xsa}
  return result
end

local function check(result)
  local ok, why = study.check_pair(result)
  if not ok then return false, why end
  for _, k in ipairs{"init", "sa", "xsa"} do
    local f = result.checkpoints and result.checkpoints[k]
    if not (f and xsa.sys.exists(f)) then return false, "checkpoint " .. tostring(f) .. " is missing" end
  end
  return true
end

local function figure(opts, result)
  local c = result.config
  local fig = plot.figure{cols = 2, width = 1300, height = 520,
    title = string.format("SA vs XSA (λ = %g): %d steps, batch %d, seq\\_len %d, lr %g, %d tokens",
      opts.lambda, c.steps, c.batch_size, c.seq_len, c.lr, opts.max_tokens)}
  for _, kind in ipairs{"train", "val"} do
    local p = fig:panel{
      title = kind == "train" and "training loss (mean since the previous point)" or
        string.format("validation loss (%d val batches; final over all %d)", c.eval_batches, c.val_batches),
      xlabel = "step", ylabel = "cross-entropy loss", key = "top right"}
    p:band(result.steps, result.sa[kind], result.xsa[kind], {color = "#7D3C98", alpha = 0.18, label = "gap"})
    p:line(result.steps, result.sa[kind], {label = "SA", color = plot.colors.sa, points = true, pointsize = 0.7})
    p:line(result.steps, result.xsa[kind], {label = "XSA", color = plot.colors.xsa, points = true, pointsize = 0.7})
    if kind == "val" and result.sa.final_val then
      p:text(0.97, 0.62, string.format("final val loss (all %d val batches):\nSA %.4f   XSA %.4f\nimprovement %s (positive: XSA lower)",
        c.val_batches, result.sa.final_val, result.xsa.final_val, study.pct(result.improvement_pct)),
        {graph = true, align = "right", fontsize = 10})
    end
  end
  return study.save_figure(fig, opts, "part3_loss")
end

-- The whole part for settled options: train (or a cache hit), figure, table
-- and the summary the report reads. Returns the result.
local function run(opts)
  local config = config_of(opts)
  local p = paths(opts, config)
  local t0 = os.time()
  local result, status, entry = xsa.cache.fetch(opts.out, p.name, config, function()
    return train(opts, config, p)
  end, {no_cache = opts.no_cache, check = check, label = "part3 paired training"})
  local fig = figure(opts, result)

  local n = #result.steps
  local rows = {
    {"SA", string.format("%.4f", result.sa.final_val), string.format("%.4f", result.sa.train[n])},
    {"XSA", string.format("%.4f", result.xsa.final_val), string.format("%.4f", result.xsa.train[n])},
  }
  local tbl = study.md_table({"model", "final val loss (all val batches)", "train loss (last interval)"}, rows)
  local imp = result.improvement_pct
  io.stdout:write("\n", tbl, "\n")
  print(string.format("improvement of XSA over SA (final val loss): %s  (positive = XSA lower)", study.pct(imp)))
  print("in this run " .. study.compare_words(result.sa.final_val, result.xsa.final_val) .. ".")
  print(string.format("training: %.1f s (%.1f s evaluating), %s tokens/s over both models",
    result.elapsed_s, result.eval_s, xsa.progress.rate(result.tokens_per_s)))
  print("result: " .. entry)
  print("checkpoints: " .. result.checkpoints.init .. ", " .. result.checkpoints.sa .. ", " .. result.checkpoints.xsa)

  study.write_summary(opts, "part3", {
    title = "Paired training", config = config, cache = status, entry = entry,
    wall_s = os.time() - t0, result = result, figures = {fig}, table = tbl,
  })
  return result
end

local function main()
  run(study.setup(xsa.args.parse(arg, spec)))
end

-- part5 reuses the configuration and file names
if ... == "part3" then
  return {spec = spec, config_of = config_of, paths = paths, check = check, train = train, run = run}
end
study.main(main)
