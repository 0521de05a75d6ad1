-- test_endpoints.lua: xsa.endpoints on curves whose endpoints are worked out
-- by hand (areas, straight-line crossings), on a real curve of part 3 (seed
-- 0's SA at 20-step points, from a run's log), the censoring rule, and the
-- paired statistics of step endpoints against hand-computed values (t
-- quantiles from a printed table).
local T = require "testing"
local ep = require "xsa.endpoints"
local study = require "xsa.study"

local function close(a, b, tol, msg)
  T.ok(type(a) == "number" and math.abs(a - b) <= tol, string.format("%s: %s vs %.12g", msg or "close", tostring(a), b))
end

T.case("final and mean loss: the last point, the area after step 0 over the run", function()
  local steps, val = {0, 20, 40, 60}, {10, 7, 6, 5}
  T.eq(ep.final_loss(steps, val), 5)
  close(ep.mean_loss(steps, val), 6, 1e-15, "equal spacing: the mean of 7, 6, 5")
  -- a shorter last interval counts for its length: (8*20 + 6*20 + 4*10) / 50
  close(ep.mean_loss({0, 20, 40, 50}, {10, 8, 6, 4}), 6.4, 1e-15, "uneven")
  -- step 0 is left out whatever its value
  close(ep.mean_loss(steps, {99, 7, 6, 5}), 6, 1e-15, "step 0 ignored")
end)

T.case("crossing step: interpolated between the points around the first reach", function()
  local steps, val = {0, 20, 40, 60}, {10, 7, 6, 5}
  close(ep.crossing_step(steps, val, 6.5), 30, 1e-12, "half-way from 7 to 6")
  close(ep.crossing_step(steps, val, 6), 40, 1e-12, "exactly at a point")
  close(ep.crossing_step(steps, val, 9.25), 5, 1e-12, "a quarter of the first interval")
  T.eq(ep.crossing_step(steps, val, 11), 0, "already below at step 0")
  local s, why = ep.crossing_step(steps, val, 4)
  T.eq(s, nil)
  T.eq(why, "not reached by step 60")
  -- a bump: the first reach counts, between 40 (6.4) and 60 (5.8)
  close(ep.crossing_step(steps, {10, 6.2, 6.4, 5.8}, 6.0), 40 + 20 * 0.4 / 0.6, 1e-12, "after a rise")
end)

T.case("escape step on a real SA curve of part 3 (seed 0, 300 steps, points every 20)", function()
  -- val loss of SA, seed 0, steps 0..140 (the plateau near 6.0 from step 40)
  local steps = {0, 20, 40, 60, 80, 100, 120, 140}
  local sa = {10.8598, 7.3927, 6.0933, 6.0069, 5.7077, 5.4448, 5.1931, 4.9926}
  local xs = {10.8598, 7.3732, 5.9968, 5.6523, 5.3638, 5.1080, 4.9369, 4.7892}
  T.eq(ep.ESCAPE_LEVEL, 5.95)
  -- 60 + (6.0069 - 5.95) / (6.0069 - 5.7077) * 20
  close(ep.escape_step(steps, sa), 63.80347593582888, 1e-9, "SA leaves the plateau")
  -- 40 + (5.9968 - 5.95) / (5.9968 - 5.6523) * 20
  close(ep.escape_step(steps, xs), 42.71698113207547, 1e-9, "XSA passes the level")
  close(ep.crossing_step(steps, sa, 5.5), 80 + 20 * 0.2077 / 0.2629, 1e-9, "SA 5.5")
  close(ep.crossing_step(steps, sa, 5.0), 120 + 20 * 0.1931 / 0.2005, 1e-9, "SA 5.0")
end)

T.case("curve errors name the function and the point", function()
  T.raises(function() ep.final_loss({0, 1}, {1}) end, "endpoints.final_loss: 2 steps and 1 losses")
  T.raises(function() ep.mean_loss({0}, {1}) end, "endpoints.mean_loss: 1 steps and 1 losses (at least 2 points")
  T.raises(function() ep.crossing_step({0, 5, 5}, {3, 2, 1}, 2) end, "point 3 (step 5, loss 1) is not finite or not after")
  T.raises(function() ep.crossing_step({0, 5}, {3, 0 / 0}, 2) end, "point 2")
  T.raises(function() ep.crossing_step({0, 5}, {3, 2}, nil) end, "target must be a finite number")
  T.raises(function() ep.final_loss(nil, {1}) end, "expected steps and losses")
end)

-- A result as xsa.train.pair records it (only what the endpoints read).
local function result(steps, sa, xs) return {steps = steps, sa = {val = sa}, xsa = {val = xs}} end

T.case("paired step endpoints: differences, censoring, verdict words", function()
  local steps = {0, 50, 100}
  -- target 5.0 crossings: seed 0 SA 75, XSA 65 (d 10); seed 1 SA 90, XSA 70 (d 20);
  -- seed 2 SA never (censored at 100), XSA 70 (d 30); seed 3 neither (left out)
  local rs = {
    result(steps, {10, 5.5, 4.5}, {10, 5.3, 4.3}),
    result(steps, {10, 5.8, 4.8}, {10, 5.4, 4.4}),
    result(steps, {10, 5.8, 5.2}, {10, 5.4, 4.4}),
    result(steps, {10, 5.8, 5.2}, {10, 5.8, 5.1}),
  }
  local rows = study.endpoint_stats(rs, {3, 7, 11, 13}, {targets = {5.0}})
  T.eq(#rows, 4)
  T.eq(table.concat({rows[1].key, rows[2].key, rows[3].key, rows[4].key}, ","), "final,mean,escape,cross5")
  local c = rows[4]
  T.eq(c.kind, "step")
  T.eq(c.censored.sa, 1)
  T.eq(c.censored.xsa, 0)
  T.eq(c.censored.both, 1)
  T.eq(table.concat(c.stats.seeds, ","), "3,7,11", "the seeds used: seed 13 left out")
  T.eq(c.sa[3], 100, "censored at the last step")
  local d = c.stats.d
  close(d[1], 10, 1e-9, "d1")
  close(d[2], 20, 1e-9, "d2")
  close(d[3], 30, 1e-9, "d3 (a bound: SA later than 100)")
  -- mean 20, sd 10, t(0.975, 2) = 4.303 (table): half-width 4.303 * 10 / sqrt 3 = 24.84
  close(c.stats.mean, 20, 1e-9, "mean")
  close(c.stats.sd, 10, 1e-9, "sd")
  close(c.stats.t_hi - c.stats.mean, 24.84, 0.005, "half-width")
  T.eq(c.stats.verdict, "inconclusive at N=3 seeds (mean 20.0 steps, 95% CI -4.8 to 44.8) [censored at the last step: " ..
    "SA in 1, XSA in 0 of 3 seeds; those differences are bounds towards 0]")
  T.eq(c.stats.k_xsa_better, 3)
  -- seeds for +-20 steps at sd 10: n = 4 gives t(0.975, 3) 10 / 2 = 3.182 * 5 = 15.9 <= 20,
  -- n = 3 gives 24.8 > 20; for +-10: n = 7 (2.447 * 10 / 2.646 = 9.25), n = 6: 10.49
  T.eq(c.stats.seeds_needed[1].half_width, 20)
  T.eq(c.stats.seeds_needed[1].n, 4)
  T.eq(c.stats.seeds_needed[2].n, 7)
  local lines = study.stats_lines(c.stats, c.label)
  T.eq(lines[1], "verdict (step at which val loss reaches 5, difference = SA - XSA per seed): " .. c.stats.verdict)
  T.ok(lines[2]:find("^mean %+20%.0 steps %(sd 10%.0%) over 3 seeds; 95%% t interval %-4%.8 to %+44%.8;"), lines[2])
  T.ok(lines[2]:find("XSA earlier in 3 of 3 seeds", 1, true), lines[2])
  T.eq(lines[3], "seeds needed for a 95% t interval of ±20 steps: 4, of ±10 steps: 7, at this spread (sd 10.0 steps; this comparison has 3)")
  -- XSA later in every seed, by 10, 11, 12 steps: mean -11, sd 1, half-width 4.303 / sqrt 3 = 2.48
  local function reach(at) -- a curve that reaches 5.0 exactly at step `at` (points every step)
    local st, l = {}, {}
    for t = 0, 50 do st[#st + 1], l[#l + 1] = t, t < at and 6 or (t == at and 5 or 4) end
    return st, l
  end
  local later = {}
  for i, at in ipairs{20, 25, 30} do
    local st, sa = reach(at)
    local _, xs = reach(at + 9 + i)
    later[i] = result(st, sa, xs)
  end
  local lrow = study.endpoint_stats(later, {0, 1, 2}, {targets = {5.0}})[4]
  T.eq(lrow.stats.verdict, "XSA later by 11.0 steps (95% CI -13.5 to -8.5, N=3)")
  T.eq(lrow.stats.k_xsa_better, 0)
  T.ok(study.stats_lines(lrow.stats, "x")[2]:find("XSA earlier in 0 of 3 seeds", 1, true))
  -- a level no model reaches: no statistics, a note
  local none = study.endpoint_stats({rs[4]}, {0}, {targets = {1.0}})
  T.eq(none[4].stats, nil)
  T.eq(none[4].note, "neither model reached it in any of the 1 seeds")
  T.eq(study.endpoint_lines({none[4]})[1], "step at which val loss reaches 1: neither model reached it in any of the 1 seeds")
end)

T.case("paired loss endpoints: improvement in % as the notebook's", function()
  local steps = {0, 10, 20}
  local rs = {result(steps, {10, 6, 4}, {10, 5, 3.96}), result(steps, {10, 6, 4}, {10, 6, 3.98}),
    result(steps, {10, 6, 4}, {10, 7, 4.012})}
  local rows = study.endpoint_stats(rs, {0, 1, 2})
  -- final: d = 1, 0.5, -0.3 % (the numbers of test_scripts' stand-in case)
  T.eq(rows[1].stats.verdict, "inconclusive at N=3 seeds (mean 0.40%, 95% CI -1.23 to 2.03)")
  -- mean: SA (6 + 4) / 2 = 5 every seed; XSA 4.48, 4.99, 5.506: d = 10.4, 0.2, -10.12 %
  close(rows[2].stats.d[1], 10.4, 1e-9, "mean d1")
  close(rows[2].stats.d[3], -10.12, 1e-9, "mean d3")
  local h, t = study.endpoint_table(rows)
  T.eq(#h, 10)
  T.eq(t[1][1], "final val loss (whole val set)")
  T.eq(t[1][4], "+0.40%")
  T.eq(t[1][5], "-1.23 to 2.03")
  T.eq(t[1][8], "2 of 3")
end)

T.done()
