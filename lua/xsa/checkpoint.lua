-- xsa.checkpoint: the saved state of a training run (xsa.train) and resuming
-- from it.
--
--   local ok, why = xsa.checkpoint.check(state, 300)   -- intact for a 300-step run?
--
-- A state is plain data (it serialises to JSON), the `ctx.state` xsa.train
-- hands to its save hook with status "checkpoint" or "interrupted":
--   completed_steps   steps every model has finished (the points recorded in full)
--   model_steps       the optimizer steps each model took, keyed as the result
--                     keys its records (sa=, xsa= for a pair; 1, 2, ... for
--                     xsa.train.runs): after an interrupt one model may be one
--                     step past completed_steps, its loss for that step recorded
--   loader            {epoch=, position=}: the train loader after completed_steps batches
--   rng               xsa.get_rng_state() at that step
--   result            the result so far (status "running" or "interrupted")
-- The models and their AdamW are saved by the caller beside it
-- (model:save{optimizer=}); resuming with them and this state continues the
-- run to the bit, as if it had never stopped.
--
-- Where a result keeps its records (M.records): a pair's in result.sa and
-- result.xsa, a result of xsa.train.runs in the list result.runs. This module
-- is the one place that knows both.
--
-- On disk (xsa.state_files): the state of a run beside its cache entry, in
-- two slots written in turn, so that a process killed at any moment leaves
-- a complete state.
--
-- Non-goals: data-parallel runs (they do not resume).
local finite = require("xsa.numbers").finite

local M = {}

local core = require "xsa.core" -- the C functions and libraries

-- A deep copy of plain data (lists and records of numbers, strings, booleans).
local function copy(v)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = copy(x) end
  return out
end

local function truncate(list, n)
  for i = #list, n + 1, -1 do list[i] = nil end
  return list
end

-- The fields that must agree between a saved state and the run resuming it.
M.SAME = {"steps", "lr", "eval_every", "eval_batches", "val_batches", "train_batches", "batch_size", "seq_len",
  "weight_decay", "eps", "final_point", "schedule", "warmup", "min_lr_frac"}

-- The table holding a result's records, their keys in run order, and how a
-- message names the record of key k.
function M.records(result)
  if result.runs ~= nil then
    local keys = {}
    for i = 1, type(result.runs) == "table" and #result.runs or 0 do keys[i] = i end
    return result.runs, keys, function(k) return "runs[" .. k .. "]" end
  end
  return result, {"sa", "xsa"}, function(k) return k end
end

-- The loader's epoch (1-based) and position (batches taken in that epoch)
-- after `taken` calls of next() from reset().
function M.loader_position(loader, taken)
  if taken == 0 then return {epoch = 1, position = 0} end
  local nb = loader:num_batches()
  return {epoch = (taken - 1) // nb + 1, position = (taken - 1) % nb + 1}
end

----------------------------------------------------------------------------
-- checking a state
--
-- The rule: every field a resumed run reads from a state is checked here
-- first, so a damaged state is reported as damaged (xsa.experiment then
-- removes it and starts over with a message) instead of failing later with
-- an unrelated error on every rerun.

local function int_in(v, lo, hi) return math.type(v) == "integer" and v >= lo and v <= hi end

local function number_list(l, n, what)
  if type(l) ~= "table" then return false, what .. " is not a list" end
  if n and #l ~= n then return false, string.format("%s has %d values, not %d", what, #l, n) end
  for i = 1, #l do
    if type(l[i]) ~= "number" then return false, string.format("%s[%d] is not a number", what, i) end
  end
  return true
end

local function check_points(r, cs)
  if type(r.steps) ~= "table" or #r.steps == 0 then return false, "result.steps is empty" end
  local prev = -1
  for i = 1, #r.steps do
    local st = r.steps[i]
    if not int_in(st, prev + 1, cs) then return false, string.format("result.steps[%d] is out of order", i) end
    prev = st
  end
  return true
end

-- One model's record and step count in a state of a run of `steps` steps.
local function check_record(rec, name, ms, r, steps)
  local cs = r.completed_steps
  if type(rec) ~= "table" then return false, "result." .. name .. " is missing" end
  if not int_in(ms, 0, math.min(steps, cs + 1)) then return false, "model_steps." .. name .. " is out of range" end
  for _, f in ipairs{"train", "val"} do
    local ok, why = number_list(rec[f], #r.steps, name .. "." .. f)
    if not ok then return false, why end
  end
  -- the losses of the steps done (a reused baseline's: all of them)
  local ok, why = number_list(rec.step_loss, nil, name .. ".step_loss")
  if not ok then return false, why end
  if #rec.step_loss < cs then return false, name .. ".step_loss is shorter than completed_steps" end
  return true
end

local function check_rest(state, r)
  for _, f in ipairs{"elapsed_s", "train_s", "eval_s"} do
    if r[f] ~= nil and not (finite(r[f]) and r[f] >= 0) then return false, "result." .. f .. " is not a time" end
  end
  local l = state.loader
  if l ~= nil and not (type(l) == "table" and int_in(l.epoch, 1, 1 << 53) and int_in(l.position, 0, 1 << 53)) then
    return false, "loader is not an epoch and a position"
  end
  if state.rng ~= nil then
    local g = core.generator(0)
    if type(state.rng) ~= "string" or not pcall(g.set_state, g, state.rng) then return false, "rng is not a generator state" end
  end
  return true
end

-- Whether `state` is intact for a run of `steps` steps: true, or false and
-- what is wrong.
function M.check(state, steps)
  if type(state) ~= "table" then return false, "the state is not a table" end
  local cs, r, ms = state.completed_steps, state.result, state.model_steps
  if not int_in(cs, 0, steps) then return false, "completed_steps is not a step of this run" end
  if type(r) ~= "table" or type(r.config) ~= "table" then return false, "result.config is missing" end
  if type(ms) ~= "table" then return false, "model_steps is missing" end
  if r.completed_steps ~= cs then return false, "result.completed_steps is not completed_steps" end
  local ok, why = check_points(r, cs)
  if not ok then return false, why end
  local recs, keys, name = M.records(r)
  if type(recs) ~= "table" or #keys == 0 then return false, "result.runs is not a list of records" end
  for _, k in ipairs(keys) do
    ok, why = check_record(recs[k], name(k), ms[k], r, steps)
    if not ok then return false, why end
  end
  return check_rest(state, r)
end

----------------------------------------------------------------------------
-- saving and resuming

-- The state a run can resume from, whatever line an interrupt landed on:
-- the points recorded in full, each model's step losses up to the steps it
-- took (model_steps, keyed as the records; active[k] false for a reused
-- baseline, whose losses are all kept), where the train loader stands after
-- completed_steps batches, the global generator `rng`. nil before the step-0
-- point exists. o = {result=, status=, model_steps=, active=, loader=, rng=}.
function M.state(o)
  local result = o.result
  local c = result.completed_steps
  local recs, keys = M.records(result)
  local n = #result.steps
  for _, k in ipairs(keys) do n = math.min(n, #recs[k].val, #recs[k].train) end
  if n == 0 then return nil end
  local r = copy(result)
  r.status = o.status
  truncate(r.steps, n)
  local saved, ms = M.records(r), {}
  for _, k in ipairs(keys) do
    truncate(saved[k].val, n)
    truncate(saved[k].train, n)
    ms[k] = o.model_steps[k]
    if o.active[k] then truncate(saved[k].step_loss, ms[k]) end
  end
  return {completed_steps = c, model_steps = ms, loader = M.loader_position(o.loader, c), rng = o.rng, result = r}
end

-- How a result's records are laid out: "pair", or "N runs".
local function shape(r)
  local _, keys = M.records(r)
  return r.runs ~= nil and (#keys .. " runs") or "pair"
end

-- Continues the fresh `result` of a run of `steps` steps (made by `what`,
-- e.g. "train.pair") from `state`: checks that the state is intact and was
-- saved by the same run (M.SAME), then copies the points recorded so far
-- and, for the records with active[k], the step losses. Returns the time
-- already spent {elapsed=, train=, eval=}, or nil and why (a message for
-- opts.resume).
function M.resume(state, result, steps, what, active)
  local rr = type(state) == "table" and state.result
  if type(rr) ~= "table" or type(rr.config) ~= "table" or type(state.model_steps) ~= "table" then
    return nil, "opts.resume must be a state saved by " .. what .. " (ctx.state)"
  end
  for _, k in ipairs(M.SAME) do
    if rr.config[k] ~= result.config[k] then
      return nil, string.format("opts.resume was saved by another run (%s %s, not %s)", k,
        tostring(rr.config[k]), tostring(result.config[k]))
    end
  end
  local ok, why = M.check(state, steps)
  if not ok then return nil, "opts.resume is damaged: " .. why end
  if shape(rr) ~= shape(result) then
    return nil, string.format("opts.resume was saved by another run (%s, not %s)", shape(rr), shape(result))
  end
  result.steps = copy(rr.steps)
  result.completed_steps = rr.completed_steps
  local recs, keys = M.records(result)
  local saved = M.records(rr)
  for _, k in ipairs(keys) do
    recs[k].train, recs[k].val = copy(saved[k].train), copy(saved[k].val)
    if active[k] then recs[k].step_loss = copy(saved[k].step_loss) end
  end
  return {elapsed = rr.elapsed_s or 0, train = rr.train_s or 0, eval = rr.eval_s or 0}
end

-- Puts the train loader where it stood after the state's completed_steps
-- batches (loader:seek, else reset and next() again) and the global
-- generator as it was then.
function M.restore(state, loader)
  local taken = state.completed_steps
  local p = M.loader_position(loader, taken)
  if loader.seek then
    loader:seek(p.epoch, p.position)
  else
    loader:reset()
    for _ = 1, taken do loader:next() end
  end
  if state.rng and core.set_rng_state then core.set_rng_state(state.rng) end
end

return M
