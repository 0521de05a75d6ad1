-- part10_sensitivity.lua: the grid's registered secondary question
-- (doc/preregistration.md): does XSA's gain in one cell, 2x128 at seq_len
-- 256, hold when both models train at half and at twice the peak lr the
-- sweep chose? Seeds 0-4 at each lr; the chosen lr's groups are the grid's
-- own records (part 8's cell, not trained again). Secondary: no verdict,
-- never counted as support for a claim. plots/part10_sensitivity.png.
--   xsa scripts/part10_sensitivity.lua --jobs 2
local xsa = xsa or require "xsa"
local DIR = (debug.getinfo(1, "S").source:match("^@(.-)[^/]*$") or "./")
local plan, axis, V = dofile(DIR .. "plan.lua"), dofile(DIR .. "axis.lua"), dofile(DIR .. "verdicts.lua")
local study, plot, stats, fmt = xsa.study, xsa.plot, xsa.stats, string.format
local S, CELL = plan.sensitivity, plan.cell[plan.sensitivity.cell]
local FACTORS = {S.factors[1], 1, S.factors[2]}

local P = axis.declaration{name = "part10", title = "Learning-rate sensitivity of one cell", report = "report/part10.lua",
  summary = "The registered secondary question: XSA's gain in the 2x128, seq_len 256 cell when both models train at\n" ..
    "half and at twice the swept peak lr (seeds 0-4; the chosen lr's runs are the grid's)."}

function P.units(ex)
  local lr, why = V.chosen_lr(ex.opts.results, CELL.size)
  lr = lr or (ex.opts.quick and 2e-3)
  if not lr then
    if not ex.opts.from_records then ex:fail("the pilot's lr sweep of " .. CELL.size .. " is not finished: " .. why) end
    ex.not_yet = "not yet: the lr sweep of " .. CELL.size .. " is not finished"
    return {}
  end
  local units = {}
  for _, s in ipairs(ex.opts.seeds and ex.seeds or S.seeds) do
    for _, f in ipairs(FACTORS) do
      units[#units + 1] = {key = fmt("lr x%g seed %d", f, s), seed = s, run = function()
        local row = axis.pair_row(ex, axis.config(ex.opts, CELL, s, lr * f, f == 1 and "grid" or "sensitivity"), CELL, f ~= 1)
        row.factor, row.lr = f, lr * f
        return row
      end}
    end
  end
  return units
end

function P.main(ex, runs)
  if ex.not_yet then
    print(ex.not_yet)
    return ex:summary{incomplete = ex.not_yet}
  end
  local rows, per, xs, tics = {}, {}, {}, {}
  for i, f in ipairs(FACTORS) do
    local g, sa, x, lr = {}, {}, {}, nil
    for _, r in ipairs(runs) do
      if r.factor == f then g[#g + 1], sa[#sa + 1], x[#x + 1], lr = r.gain, r.sa, r.xsa, r.lr end
    end
    local lo, hi
    if #g > 1 then lo, hi = stats.t_interval(g) end
    xs[i], per[i], tics[i] = math.log(f, 2), g, {fmt("%gx (%g)", f, lr or 0), math.log(f, 2)}
    rows[i] = {fmt("%g x", f), lr and fmt("%g", lr) or "n/a", tostring(#g), #g > 0 and fmt("%.4f", stats.mean(sa)) or "n/a",
      #g > 0 and fmt("%.4f", stats.mean(x)) or "n/a", #g > 0 and fmt("%+.2f%%", stats.mean(g)) or "n/a",
      lo and fmt("%+.2f to %+.2f", lo, hi) or "n/a"}
  end
  local label = axis.explore(ex.opts) and " (exploratory flags)" or " (secondary, registered)"
  local fig = plot.figure{cols = 1, width = 1000, height = 620, title = "XSA's gain at half, once and twice the " ..
    "swept peak lr, 2x128 at seq_len 256" .. label}
  local p = fig:panel{title = "improvement % of the final val loss (positive: XSA lower)", xlabel = "peak lr, x the chosen",
    ylabel = "improvement %", xtics = tics, zero = true, key = "top left", xrange = {xs[1] - 0.6, xs[#xs] + 0.6}}
  study.points_ci(p, xs, per, {color = plot.colors.xsa, label = "XSA over SA", line = true})
  ex:save_figure(fig, "part10_sensitivity", "Each dot one seed's paired improvement; markers the mean with its 95% t interval.")
  local tbl = ex:table({"peak lr", "lr", "seeds", "SA val (mean)", "XSA val (mean)", "improvement", "95% t interval"}, rows)
  print("\nsecondary: no verdict (doc/preregistration.md); the 1 x row is the grid's cell")
  ex:summary{table = tbl, exploratory = axis.explore(ex.opts) or nil, factors = FACTORS,
    seeds = ex.opts.seeds and ex.seeds or S.seeds}
end

return xsa.experiment.part(P, ...)
