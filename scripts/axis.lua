-- axis.lua: what parts 8 and 9 share: a declaration over one axis of the
-- registered grid (scripts/plan.lua): its flags, its units (one SA/XSA group
-- per cell and seed, grid.lua) and its outputs: the gain per cell with its
-- interval, the end-of-training gaps, the slope of the gain per doubling,
-- and the registered family's verdicts once every cell has N seeds
-- (verdicts.lua). A flag that leaves the plan (--steps, --tokens-per-step,
-- --max-tokens, --val-tokens, --quick) writes to results/explore/ and says
-- "exploratory" wherever it prints.
local xsa = xsa or require "xsa"
xsa.sys.library_file() -- run alone, it says what it is
local study, plot, stats, fmt = xsa.study, xsa.plot, xsa.stats or require "xsa.stats", string.format
local DIR = (debug.getinfo(1, "S").source:match("^@(.-)[^/]*$") or "./")
local plan, grid, V = dofile(DIR .. "plan.lua"), dofile(DIR .. "grid.lua"), dofile(DIR .. "verdicts.lua")

local M = {}
local SKIP = {"steps", "seq-len", "batch", "lr", "weight-decay", "max-tokens", "val-frac", "eval-every", "eval-batches",
  "lambda", "n-layer", "d-model", "n-head", "seed", "data-seed", "init-seed", "data-parallel", "precision", "resume",
  "save-every"}
local PLAN_FLAGS = {{"steps", "int", plan.steps, "optimizer steps per run (registered: " .. plan.steps .. ")", min = 1},
  {"tokens-per-step", "int", plan.tokens_per_step, "batch x seq_len of every cell", min = 1},
  {"max-tokens", "int", plan.max_tokens, "corpus tokens used (from the start; $XSA_DATA picks the corpus)", min = 2},
  {"val-tokens", "int", plan.val_tokens, "the held-out tail every cell is evaluated on", min = 2}}

local function explore(o)
  return o.quick or o.steps ~= plan.steps or o.tokens_per_step ~= plan.tokens_per_step or
    o.max_tokens ~= plan.max_tokens or o.val_tokens ~= plan.val_tokens
end

-- The configuration of a cell's group for seed s under the flags, recorded
-- in results/<folder> (default "grid"; "explore" under off-plan flags).
local function config(opts, cell, s, lr, folder)
  folder = explore(opts) and "explore" or folder or "grid"
  return grid.config(plan, folder, cell, s, lr, {"sa", "xsa"}, {steps = opts.steps, tokens_per_step = opts.tokens_per_step,
    max_tokens = opts.max_tokens, val_tokens = opts.val_tokens, eval_every = opts.quick and 2 or nil,
    eval_batches = opts.quick and 1 or nil})
end

-- The part's seeds: --seeds, else the registered N; nil and why while the
-- pilot has not fixed it (then --from-records publishes "not yet").
local function seeds(ex)
  if ex.opts.seeds then return ex.seeds end
  local n, how = V.seeds_rule(ex.opts.results)
  if not n then return nil, "no --seeds given and the registered N is not known yet: " .. how end
  local out = {}
  for s = 0, n - 1 do out[#out + 1] = s end
  return out
end

M.config, M.explore = config, explore

-- A unit's result: the SA/XSA group of cfg (from its record, else trained)
-- as the parts' row {cell, seed, sa, xsa, gain, gap, cpu_s, wall_s, status}.
function M.pair_row(ex, cfg, cell, with_lr)
  local r, status = grid.group(ex, cfg, cell, with_lr)
  local f, gap = grid.finals(r, {"sa", "xsa"})
  return {cell = cell.key, seed = cfg.model.seed, sa = f.sa, xsa = f.xsa, gain = 100 * (f.sa - f.xsa) / f.sa, gap = gap,
    cpu_s = r.cpu_s, wall_s = r.elapsed_s, status = status, curves = grid.curves(r, {"sa", "xsa"})}
end

function M.units(ex, cells)
  local units, lrs, list, why = {}, {}, seeds(ex)
  if not list then
    if not ex.opts.from_records then ex:fail(why) end
    ex.not_yet = why
    return units
  end
  -- --from-records: the seeds left out are named against this list, and a
  -- grid still being run is reported, not refused
  ex.seeds, ex.partial_ok, ex.cells_of_part = list, true, cells
  for _, s in ipairs(list) do
    for _, c in ipairs(cells) do
      lrs[c.size] = lrs[c.size] or V.chosen_lr(ex.opts.results, c.size) or (ex.opts.quick and 2e-3)
      if not lrs[c.size] then ex:fail("the pilot's lr sweep of " .. c.size .. " is not finished: xsa scripts/pilot.lua") end
      units[#units + 1] = {key = fmt("%s seed %d", c.key, s), seed = s, run = function()
        return M.pair_row(ex, config(ex.opts, c, s, lrs[c.size]), c, false)
      end}
    end
  end
  ex.groups_total = #units
  return units
end

-- How far the part's groups are recorded (--from-records), in words, or nil
-- when every group was there or none was looked up in the records.
local function progress(ex)
  local total, missing = ex.groups_total or 0, #(ex.missing or {})
  if not ex.opts.from_records or missing == 0 then return nil end
  local n = #ex.cells_of_part
  return fmt("%d of %d groups of this part recorded (%d seeds x %d cells); the numbers are those of the seeds with " ..
    "every cell recorded, and the registered verdicts wait for all %d groups", total - missing, total,
    total // math.max(1, n), n, total)
end

-- The slope of the gain per doubling along the axis, per seed that has
-- every cell, with its 95% t interval: {mean, lo, hi, n, text}.
function M.slope(by, axis)
  local per, xs = {}, {}
  for i, c in ipairs(axis.cells) do
    xs[i] = axis.x(c)
    for _, r in ipairs(by[c.key] or {}) do per[r.seed] = per[r.seed] or {}; per[r.seed][i] = r.gain end
  end
  local slopes = {}
  for _, g in pairs(per) do if #g == #axis.cells then slopes[#slopes + 1] = V.slope(xs, g) end end
  table.sort(slopes)
  local out = {n = #slopes, mean = #slopes > 0 and stats.mean(slopes) or nil}
  if #slopes > 1 then out.lo, out.hi = stats.t_interval(slopes) end
  out.text = out.lo and fmt("\nslope of the gain: %+.3f points per doubling (95%% t %+.3f to %+.3f, %d seeds)", out.mean,
    out.lo, out.hi, out.n) or fmt("\nslope of the gain: %s (%d seeds with every cell)", out.mean and fmt("%+.3f", out.mean)
    or "n/a", out.n)
  return out
end

-- Exploratory (outside the plan's family, doc/preregistration.md): the
-- validation curves of every cell, each seed thin and the mean over seeds
-- bold, on one y range. They show what a cell's gain is made of: an earlier
-- escape from the loss plateau, a lead kept to the end, or a model that has
-- not left the plateau by the last step. Step 0 (the same loss for both
-- models, far above the rest) is left out.
local LIGHT = {sa = "#F5B7B1", xsa = "#A9CCE3"}
local function tail(list) return {table.unpack(list, 2)} end
local function curves_figure(ex, by, axis, label)
  local with, lo, hi = {}, math.huge, -math.huge -- per cell, its runs that kept their curves; their y range
  for _, c in ipairs(axis.cells) do
    with[c.key] = {}
    for _, r in ipairs(by[c.key] or {}) do
      if r.curves then table.insert(with[c.key], r) end
      for _, arm in ipairs(r.curves and {"sa", "xsa"} or {}) do
        local v = tail(r.curves[arm])
        lo, hi = math.min(lo, table.unpack(v)), math.max(hi, table.unpack(v))
      end
    end
  end
  if lo > hi then return end -- one evaluation point: no curve to draw
  local fig = plot.figure{cols = #axis.cells, width = 430 * #axis.cells + 80, height = 460,
    title = fmt("%s: validation curves, each seed and the mean over seeds (exploratory)%s", axis.title, label)}
  for _, c in ipairs(axis.cells) do
    local list = with[c.key]
    local p = fig:panel{title = fmt("%s %s, %d seeds", axis.column, axis.tic(c), #list), xlabel = "step",
      ylabel = "val loss", yrange = {lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo)}}
    local steps = list[1] and tail(list[1].curves.steps) -- one configuration per cell: the same steps
    for _, arm in ipairs(steps and {"sa", "xsa"} or {}) do
      local mean = {}
      for _, r in ipairs(list) do
        local v = tail(r.curves[arm])
        p:line(steps, v, {color = LIGHT[arm], width = 0.5})
        for k, x in ipairs(v) do mean[k] = (mean[k] or 0) + x / #list end
      end
      p:line(steps, mean, {color = plot.colors[arm], width = 2, label = arm:upper() .. ", mean"})
    end
  end
  ex:save_figure(fig, axis.figure .. "_curves", "Exploratory: every seed's validation curve (thin) and the mean over " ..
    "seeds (bold), SA red and XSA blue. The points before the last are on the first 8 batches of the held-out tail; " ..
    "the last is the final loss on all of it, which the verdicts use.")
end

-- The part's outputs from its units' results (a list).
function M.main(ex, runs, axis)
  if ex.not_yet then
    print(ex.not_yet)
    return ex:summary{incomplete = ex.not_yet}
  end
  local so_far = progress(ex)
  if #runs == 0 then
    print(so_far)
    local fam = explore(ex.opts) and {} or V.family(ex.opts.results)
    return ex:summary{incomplete = fam.incomplete or so_far, progress = so_far, seeds = {}, n = fam.n,
      seeds_rule = fam.how, lrs = fam.lrs, recorded = fam.recorded, total = fam.total}
  end
  local by, xs, rows, tics, per = {}, {}, {}, {}, {}
  for _, r in ipairs(runs) do by[r.cell] = by[r.cell] or {}; by[r.cell][#by[r.cell] + 1] = r end
  for i, c in ipairs(axis.cells) do
    local list, g, sa, x, gs, gx = by[c.key] or {}, {}, {}, {}, {}, {}
    for j, r in ipairs(list) do g[j], sa[j], x[j], gs[j], gx[j] = r.gain, r.sa, r.xsa, r.gap.sa, r.gap.xsa end
    xs[i], tics[i], per[i] = axis.x(c), {axis.tic(c), axis.x(c)}, g
    local lo, hi
    if #g > 1 then lo, hi = stats.t_interval(g) end
    rows[i] = {axis.tic(c), tostring(#g), #g > 0 and fmt("%.4f", stats.mean(sa)) or "n/a",
      #g > 0 and fmt("%.4f", stats.mean(x)) or "n/a", #g > 0 and fmt("%+.2f%%", stats.mean(g)) or "n/a",
      lo and fmt("%+.2f to %+.2f", lo, hi) or "n/a",
      #g > 0 and fmt("%+.3f / %+.3f", stats.mean(gs), stats.mean(gx)) or "n/a"}
  end
  local slope = M.slope(by, axis)
  local label = explore(ex.opts) and " (exploratory)" or ""
  local fig = plot.figure{cols = 1, width = 1000, height = 620, title = fmt("%s: XSA's gain, %d steps of %d tokens%s",
    axis.title, ex.opts.steps, ex.opts.tokens_per_step, label)}
  local p = fig:panel{title = "improvement % of the final val loss (positive: XSA lower)", xlabel = axis.xlabel,
    ylabel = "improvement %", xtics = tics, zero = true, key = "top left", xrange = {xs[1] - 0.6, xs[#xs] + 0.6}}
  study.points_ci(p, xs, per, {color = plot.colors.xsa, label = "XSA over SA", line = true})
  ex:save_figure(fig, axis.figure, "Each dot one seed's paired improvement; markers the mean with its 95% t interval.")
  curves_figure(ex, by, axis, label)
  local tbl = ex:table({axis.column, "seeds", "SA val (mean)", "XSA val (mean)", "improvement", "95% t interval",
    "val - train, SA / XSA"}, rows)
  local fam = (not explore(ex.opts)) and V.family(ex.opts.results) or {incomplete = "exploratory flags: no verdict"}
  print(slope.text)
  if so_far then print("\n" .. so_far) end
  print("\n" .. (fam.incomplete or "registered verdicts (Holm over gain, length, size):"))
  for _, r in ipairs(fam.rows or {}) do
    print(fmt("  %s: %+.3f (95%% t %+.3f to %+.3f), p %.4f, Holm p %.4f: %s", r.key, r.mean, r.lo, r.hi, r.p, r.p_holm,
      r.verdict))
  end
  ex:summary{table = tbl, slope = slope, exploratory = explore(ex.opts) or nil, family = fam.rows, incomplete = fam.incomplete,
    n = fam.n, seeds_rule = fam.how, lrs = fam.lrs, seeds = ex.seeds, progress = so_far, recorded = fam.recorded,
    total = fam.total}
end

-- A declaration with the grid's flags: d = {name, title, summary, report}.
function M.declaration(d)
  local P = {name = d.name, title = d.title, summary = d.summary, report = d.report,
    options = study.options({}, nil, SKIP),
    quick = {steps = 2, val_tokens = 2050, seeds = "1"}}
  for _, f in ipairs(PLAN_FLAGS) do P.options[#P.options + 1] = f end
  return P
end

-- A part's declaration: axis = {name, title, summary, cells, x, tic, xlabel, column, figure}.
function M.part(axis)
  local P = M.declaration(axis)
  function P.units(ex) return M.units(ex, axis.cells) end
  function P.main(ex, runs) return M.main(ex, runs, axis) end
  return P
end

return M
