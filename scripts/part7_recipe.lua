-- part7_recipe.lua: does the verdict survive a standard recipe? Part 3's pair
-- under the notebook's constant lr and under --warmup 30 (10% of the steps,
-- before SA's plateau) then cosine decay to a tenth of the peak, over --seeds
-- (10). The constant-lr runs ARE part 3's. Every endpoint per recipe.
local xsa = xsa or require "xsa"
local study, plot, E = xsa.study, xsa.plot, xsa.experiment

local options = study.options({}, {{"warmup", "int", 30, "linear warmup steps of the cosine recipe"},
  {"min-lr-frac", "number", 0.1, "the cosine recipe's final lr / peak lr"}}, {"seed", "seeds"})
options[#options + 1] = {"seeds", "string", "10", "seeds 0..N-1, or a list (3,7,11; one seed: 3,)",
  check = function(v) return study.parse_seeds(v) ~= nil, select(2, study.parse_seeds(v)) end}
local P = {name = "part7", title = "Training recipe", options = options, report = "report/part7.lua", publish = {seeds = 10},
  summary = "Part 3's pair under the notebook's constant lr and under warmup + cosine decay, over --seeds;\n" ..
    "every endpoint of doc/study.md per recipe with its 95% interval.",
  quick = E.pair_quick({seeds = "2", warmup = 3})}
local function recipes(opts)
  return {{key = "constant", label = string.format("constant lr %g (part 3's runs)", opts.lr)},
    {key = "cosine", label = string.format("warmup %d, cosine to %g", opts.warmup, opts.min_lr_frac * opts.lr)}}
end

local function run(ex, seed, rc)
  local opts, config = ex.opts, E.pair_config(ex.opts, "part3", {seed = seed}) -- part 3's run: its entry and checkpoints
  local o = {config = config, name = E.pair_name("part3", config), checkpoints = true}
  if rc.key == "cosine" then
    config.part, config.train.schedule, config.train.warmup, config.train.min_lr_frac = "part7", "cosine", opts.warmup, opts.min_lr_frac
    o = {config = config, name = E.pair_name("part7-cosine", config),
      after = function(r) r.sa.step_loss, r.xsa.step_loss = nil, nil end} -- keep the entries small
  end
  o.label, o.what = string.format("part7 %s seed %d", rc.key, seed), string.format("part7 %s (seed %d)", rc.label, seed)
  return (ex:pair(o))
end

function P.units(ex) -- per seed: both recipes
  local RECIPES = recipes(ex.opts)
  return ex:seed_units(function(seed) return {run(ex, seed, RECIPES[1]), run(ex, seed, RECIPES[2])} end)
end

function P.main(ex, per)
  local opts, RECIPES = ex.opts, recipes(ex.opts)
  local by, lo = {}, math.huge -- both curve panels zoom on the plateau and after (step 0 is at 10.9)
  for k = 1, 2 do
    by[k] = study.collect(per, function(x) return x[k] end)
    for _, r in ipairs(by[k]) do lo = math.min(lo, r.sa.final_val, r.xsa.final_val) end
  end
  local fig = plot.figure{cols = 3, width = 1900, height = 680, title = string.format(
    "SA vs XSA under two recipes: %d steps, batch %d, seq_len %d, peak lr %g, %d seeds (mean and 95%% band)",
    opts.steps, opts.batch, opts.seq_len, opts.lr, #ex.seeds)}
  local esc = xsa.endpoints.ESCAPE_LEVEL
  for k, rc in ipairs(RECIPES) do
    local p = fig:panel{title = rc.label, xlabel = "step", ylabel = "validation loss", key = "top right",
      yrange = lo < 6.5 and {lo - 0.1, 8.4} or nil} -- above 7: room for the key
    study.loss_curves(p, by[k], "val")
    p:line({0, opts.steps}, {esc, esc}, {color = "#777777", width = 1, dash = 2, label = "escape level " .. esc})
  end
  local sdp = fig:panel{title = "spread between seeds: sd of the val loss", xlabel = "step", ylabel = "sd over seeds", key = "top left"}
  local headers, rows, lines, rec = nil, {}, {}, {}
  for k, rc in ipairs(RECIPES) do
    for _, m in ipairs{"sa", "xsa"} do
      sdp:line(by[k][1].steps, study.curve_sd(by[k], m, "val"), {color = plot.colors[m], dash = k == 2 and 2 or nil,
        label = string.format("%s, %s", m:upper(), rc.key)})
    end
    local eps = study.endpoint_stats(by[k], ex.seeds)
    local h, t = study.endpoint_table(eps)
    headers = {"recipe", table.unpack(h)}
    for _, r in ipairs(t) do rows[#rows + 1] = {rc.key, table.unpack(r)} end
    for _, l in ipairs(study.endpoint_lines(eps, rc.key .. ": ")) do lines[#lines + 1] = l end
    rec[rc.key] = {label = rc.label, endpoints = eps}
  end
  ex:save_figure(fig, "part7_recipe", "Left and middle: each recipe's mean validation curves over the seeds (thick) " ..
    "with their 95% t bands and each seed (thin); grey dashes: the plateau-escape level. Right: the sd over seeds " ..
    "of each model's validation loss at each evaluation point (solid: constant lr; dashed: warmup + cosine).")
  local tbl = ex:table(headers, rows)
  print()
  for _, l in ipairs(lines) do print(l) end
  ex:summary{seeds = ex.seeds, recipes = rec, table = tbl, stats_lines = lines, warmup = opts.warmup,
    min_lr_frac = opts.min_lr_frac}
end

return xsa.experiment.part(P, ...)
