-- xsa.endpoints: the endpoints of a paired SA/XSA run, read off the
-- validation curves xsa.train.pair records, and their paired statistics
-- over seeds. The definitions, the targets and why are in doc/study.md
-- ("Endpoints"); they were fixed before the runs that use them.
--
--   local ep = require "xsa.endpoints"
--   local steps, val = r.steps, r.sa.val         -- one model's curve of a result
--   print(ep.final_loss(steps, val), ep.mean_loss(steps, val), ep.crossing_step(steps, val, 5.5))
--   for _, row in ipairs(ep.paired(results)) do print(row.label, row.stats and row.stats.verdict) end
--
-- A curve is steps[1..n] (increasing, steps[1] = 0: the untrained model)
-- and losses[1..n] at those steps; losses[n] is over the whole validation
-- set (the final val loss), the others over its first eval_batches batches.
--   final_loss(steps, losses)     losses[n]: the primary endpoint.
--   mean_loss(steps, losses)      the area under the curve after step 0 over the run's
--                                 length: sum over i >= 2 of losses[i] (steps[i] -
--                                 steps[i-1]) / (steps[n] - steps[1]). With evaluation
--                                 points every eval_every steps (and steps a multiple of
--                                 it) this is the plain mean of the points after step 0.
--                                 Step 0 is left out: both models have the same weights
--                                 there, so it carries no difference and its loss (10.9,
--                                 twice the rest) would dominate the mean. Needs n >= 2.
--   crossing_step(steps, losses, target)   the first step at which the loss reaches
--                                 target (loss <= target), linearly interpolated between
--                                 the last point above it and the first at or below it;
--                                 0 when step 0 already is. nil, "not reached by step S"
--                                 when no point reaches it.
--   escape_step(steps, losses [, level])   the plateau-escape step: crossing_step of
--                                 level (default M.ESCAPE_LEVEL, 5.95: the unigram
--                                 plateau 6.05 minus a margin of 0.1; doc/study.md).
-- Paired over seeds
--   ENDPOINTS                     the default list: final, mean, escape, cross5.5, cross5.0
--   paired(results [, opts])      results[i]: the xsa.train.pair result of seed i (steps,
--                                 sa.val, xsa.val). Returns one row per endpoint:
--       key, label, kind          kind "loss" (d = 100 (SA - XSA) / SA, %) or "step"
--                                 (d = SA step - XSA step: positive, XSA reached it earlier)
--       sa, xsa                   the per-seed values (steps censored at the last step)
--       censored                  {sa = k, xsa = k, both = k}: seeds where a model never reached
--                                 the level (k of sa/xsa count the seeds where that model did
--                                 not; both: neither)
--       used                      the positions i of the results the statistics use
--       stats                     xsa.stats.paired_summary of the used pairs, or nil with
--       note                      why (every pair censored on both sides)
--     Censoring: a model that never reaches the level gets the last step
--     (steps[n]) in its place: its true step is later, so the pair's difference
--     is a bound that errs towards 0 (in either direction), never away from it. A
--     pair where neither model reaches it says nothing about which is earlier and
--     is left out (counted in censored.both); the verdict of a row with censored
--     values says so. Step endpoints get seeds_needed for
--     half-widths of 20 and 10 steps (one and half an evaluation interval of the
--     study's curves); loss endpoints 1 and 0.5 points.
--     opts: targets ({5.5, 5.0}), escape_level (5.95), level, resamples, seed
--     (passed to xsa.stats.paired_summary).
-- Non-goals: endpoints of the training-loss curve (each point is a different set
-- of batches), per-curve plateau detection (the evaluation points are 20 steps
-- apart: too coarse to find a plateau's edges from the curve alone).
local stats = require "xsa.stats"
local finite = require("xsa.numbers").finite

local M = {}

-- The plateau: the unigram cross-entropy of the study's validation set (the
-- best a model that ignores the context can do), 6.05, and a margin of 0.1
-- (six times the +-0.015 wander of SA's curve on it). doc/study.md.
M.PLATEAU = 6.05
M.ESCAPE_LEVEL = 5.95
M.TARGETS = {5.5, 5.0}
M.STEP_HALF_WIDTHS = {20, 10}

local function check_curve(fn, steps, losses, min_n)
  if type(steps) ~= "table" or type(losses) ~= "table" then
    error(string.format("endpoints.%s: expected steps and losses (lists), got %s and %s", fn, type(steps),
      type(losses)), 3)
  end
  local n = #steps
  if n < (min_n or 1) or #losses ~= n then
    error(string.format("endpoints.%s: %d steps and %d losses (at least %d points, one loss per step)", fn, n,
      #losses, min_n or 1), 3)
  end
  for i = 1, n do
    if not (finite(steps[i]) and finite(losses[i])) or (i > 1 and steps[i] <= steps[i - 1]) then
      error(string.format("endpoints.%s: point %d (step %s, loss %s) is not finite or not after the previous",
        fn, i, tostring(steps[i]), tostring(losses[i])), 3)
    end
  end
  return n
end

function M.final_loss(steps, losses)
  local n = check_curve("final_loss", steps, losses)
  return losses[n]
end

function M.mean_loss(steps, losses)
  local n = check_curve("mean_loss", steps, losses, 2)
  local area = 0.0
  for i = 2, n do area = area + losses[i] * (steps[i] - steps[i - 1]) end
  return area / (steps[n] - steps[1])
end

function M.crossing_step(steps, losses, target)
  local n = check_curve("crossing_step", steps, losses)
  if not finite(target) then error("endpoints.crossing_step: target must be a finite number", 2) end
  if losses[1] <= target then return steps[1] end
  for i = 2, n do
    if losses[i] <= target then
      -- losses[i-1] > target >= losses[i]: the straight line between them
      local frac = (losses[i - 1] - target) / (losses[i - 1] - losses[i])
      return steps[i - 1] + frac * (steps[i] - steps[i - 1])
    end
  end
  return nil, string.format("not reached by step %s", tostring(steps[n]))
end

function M.escape_step(steps, losses, level)
  return M.crossing_step(steps, losses, level or M.ESCAPE_LEVEL)
end

-- The endpoints of the study, in the order tables show them.
function M.list(opts)
  opts = opts or {}
  local esc = opts.escape_level or M.ESCAPE_LEVEL
  local out = {
    {key = "final", kind = "loss", label = "final val loss (whole val set)", value = M.final_loss},
    {key = "mean", kind = "loss", label = "mean val loss (evaluation points after step 0)", value = M.mean_loss},
    {key = "escape", kind = "step", label = string.format("plateau-escape step (val loss <= %g)", esc),
      value = function(s, l) return M.escape_step(s, l, esc) end},
  }
  for _, t in ipairs(opts.targets or M.TARGETS) do
    out[#out + 1] = {key = string.format("cross%g", t), kind = "step",
      label = string.format("step at which val loss reaches %g", t),
      value = function(s, l) return M.crossing_step(s, l, t) end}
  end
  return out
end
M.ENDPOINTS = M.list()

-- Per-seed values of endpoint e for both models: lists sa, xsa (censored
-- steps replaced by the last step), the positions used, the censored counts.
local function values(results, e)
  local sa, xs, used, cens = {}, {}, {}, {sa = 0, xsa = 0, both = 0}
  for i, r in ipairs(results) do
    local a = e.value(r.steps, r.sa.val)
    local b = e.value(r.steps, r.xsa.val)
    if a == nil and b == nil then
      cens.both = cens.both + 1
    else
      local last = r.steps[#r.steps]
      if a == nil then cens.sa = cens.sa + 1 end
      if b == nil then cens.xsa = cens.xsa + 1 end
      sa[#sa + 1], xs[#xs + 1], used[#used + 1] = a or last, b or last, i
    end
  end
  return sa, xs, used, cens
end

function M.paired(results, opts)
  opts = opts or {}
  local rows = {}
  for _, e in ipairs(opts.endpoints or M.list(opts)) do
    local sa, xs, used, cens = values(results, e)
    local row = {key = e.key, kind = e.kind, label = e.label, sa = sa, xsa = xs, used = used, censored = cens}
    local so = {level = opts.level, resamples = opts.resamples, seed = opts.seed}
    if e.kind == "step" then
      so.diff, so.unit, so.half_widths = "absolute", "steps", M.STEP_HALF_WIDTHS
      so.words = {better = "earlier", worse = "later", ahead = "earlier"}
    end
    if #used > 0 then
      row.stats = stats.paired_summary(sa, xs, so)
      if cens.sa + cens.xsa > 0 then -- the verdict says its numbers are bounds
        row.stats.verdict = string.format("%s [censored at the last step: SA in %d, XSA in %d of %d seeds; " ..
          "those differences are bounds towards 0]", row.stats.verdict, cens.sa, cens.xsa, #used)
      end
    else
      row.note = string.format("neither model reached it in any of the %d seeds", #results)
    end
    rows[#rows + 1] = row
  end
  return rows
end

return M
