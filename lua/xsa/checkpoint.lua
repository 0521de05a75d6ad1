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
-- On disk (M.write_files, M.load_files): the state of a run beside its
-- cache entry, in two slots written in turn, so that a process killed at
-- any moment leaves a complete state (see "the state on disk" below).
--
-- Non-goals: data-parallel runs (they do not resume).
local finite = require("xsa.numbers").finite
local sys = require "xsa.sys"
local cache = require "xsa.cache"

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

----------------------------------------------------------------------------
-- the state on disk
--
-- `f` names the files of one run (xsa.experiment.files): f.state, the JSON
-- NAME-HASH.resume.json next to the cache entry, holds the key and the
-- configuration (as the entry does), the state xsa.train hands to its save
-- hook (M.state) and the names of the model files, f.state_model(kind,
-- slot) = NAME-HASH.resume-KIND-SLOT.safetensors (weights with AdamW moments
-- and step counts), one per kind of model ("sa", "xsa"). A save writes every
-- model into the slot the JSON does not name, then replaces the JSON
-- (atomically), then removes the other slot's files, so a process killed at
-- any moment leaves a complete state: the previous one or the new one.

M.KINDS = {"sa", "xsa"}

-- Removes the temporary files of an atomic write that a SIGKILL interrupted
-- (NAME.tmp.PID, see core/fileio.h): nothing else will ever rename them.
-- Only from another process, so this runs before training and after it,
-- never from the save hook; through sys.execute, not os.execute (C's
-- system(), which ignores SIGINT while the shell runs: a Ctrl-C that came
-- then would be lost).
function M.remove_stale_temps(f)
  sys.execute("rm -f -- " .. sys.shell_quote(f.base) .. ".resume*.tmp.* 2>/dev/null")
end

-- Removes the saved state of f (the JSON, both slots' models, stale temporaries).
function M.remove_files(f)
  for _, p in ipairs(f.state_files) do os.remove(p) end
  M.remove_stale_temps(f)
end

-- The slot the state on disk names (nil when there is none).
local function slot_on_disk(f)
  local j = core.json.read_file(f.state)
  return type(j) == "table" and (j.slot == "a" or j.slot == "b") and j.slot or nil
end

-- Writes ctx.state (a save hook's ctx: ctx[kind] the models, ctx[kind ..
-- "_opt"] their AdamW) for config (the run's cache key). Returns what was
-- written, as words, or nil when the run has no state yet.
function M.write_files(f, config, ctx)
  local st = ctx.state
  if not st then return nil end
  local slot = slot_on_disk(f) == "a" and "b" or "a"
  local models = {}
  for _, k in ipairs(M.KINDS) do
    models[k] = f.state_model(k, slot)
    ctx[k]:save(models[k], {optimizer = ctx[k .. "_opt"]})
  end
  core.json.write_file(f.state, {key = cache.key(config), config = config, slot = slot, models = models,
    state = {completed_steps = st.completed_steps, model_steps = st.model_steps, loader = st.loader, rng = st.rng},
    result = st.result, saved_at = os.date("!%Y-%m-%dT%H:%M:%SZ")})
  local other = slot == "a" and "b" or "a" -- the previous state's models, no longer named
  for _, k in ipairs(M.KINDS) do os.remove(f.state_model(k, other)) end
  return string.format("%s, %s, %s (the same command resumes from step %d; --no-resume starts over)",
    models.sa, models.xsa, f.state, st.completed_steps)
end

-- The saved state for config (the run's cache key: another corpus is
-- another state) of a run of `steps` steps: {resume = <xsa.train's
-- opts.resume>, sa, xsa (models), sa_opt, xsa_opt}, or nil and "none", or
-- nil and why it is unusable (said through say(fmt, ...) and removed: the
-- run starts over).
function M.load_files(f, config, steps, say)
  local text = core.read_file(f.state)
  if not text then return nil, "none" end
  local function unusable(why)
    say("warning: saved state %s %s; starting over", f.state, why)
    M.remove_files(f)
    return nil, why
  end
  local ok, j = pcall(core.json.decode, text)
  if not ok or type(j) ~= "table" then return unusable("is not valid JSON") end
  if j.key ~= cache.key(config) then return unusable("is for another configuration") end
  local st = j.state
  if type(st) ~= "table" or type(j.result) ~= "table" or type(j.models) ~= "table" or type(st.model_steps) ~= "table" then
    return unusable("is incomplete")
  end
  local out = {}
  for _, k in ipairs(M.KINDS) do
    local good, m, opt = pcall(core.gpt.load, tostring(j.models[k]))
    if not good then return unusable("names a model that cannot be loaded (" .. tostring(m) .. ")") end
    if not opt or opt.step_count ~= st.model_steps[k] then return unusable("does not match its " .. k .. " model") end
    out[k], out[k .. "_opt"] = m, opt
  end
  out.resume = {completed_steps = st.completed_steps, model_steps = st.model_steps, loader = st.loader, rng = st.rng,
    result = j.result}
  local good, why = M.check(out.resume, steps)
  if not good then return unusable("is damaged (" .. why .. ")") end
  return out
end

-- What an unfinished run leaves for inspection: every model (with AdamW)
-- and the result so far, as -atN files (f.checkpoint(kind, "-atN"), f.base
-- .. "-atN.json"). Returns the paths as text.
function M.write_partial(f, config, res, ctx)
  local at = string.format("-at%d", res.completed_steps)
  local files = {}
  if res.completed_steps > 0 then
    for _, k in ipairs(M.KINDS) do
      local p = f.checkpoint(k, at)
      ctx[k]:save(p, {optimizer = ctx[k .. "_opt"]})
      files[#files + 1] = p
    end
  end
  local rp = f.base .. at .. ".json"
  core.json.write_file(rp, {config = config, result = res}, {indent = true})
  files[#files + 1] = rp
  return table.concat(files, ", ")
end

----------------------------------------------------------------------------
-- the state of a group of runs on disk (xsa.train.runs)
--
-- As for a pair, in two slots written in turn: BASE.resume.json names its
-- slot and holds the key, the state and `extra` (plain data the caller
-- keeps with it: the CPU seconds spent before the stop); run i's model with
-- its AdamW is BASE.resume-i-SLOT.safetensors. A process killed at any
-- moment leaves the previous state or the new one, complete.

local function group_model(base, i, slot) return string.format("%s.resume-%d-%s.safetensors", base, i, slot) end

-- Writes ctx.state of xsa.train.runs' save hook (ctx.models, ctx.optimizers)
-- for `key` (the run's cache configuration). Returns what was written, as
-- words, or nil when the run has no state yet.
function M.write_group(base, key, ctx, extra)
  local st = ctx.state
  if not st then return nil end
  local path = base .. ".resume.json"
  local j = core.json.read_file(path)
  local slot = (type(j) == "table" and j.slot == "a") and "b" or "a"
  local models = {}
  for i, m in ipairs(ctx.models) do
    models[i] = group_model(base, i, slot)
    m:save(models[i], ctx.optimizers[i] and {optimizer = ctx.optimizers[i]} or nil)
  end
  core.json.write_file(path, {key = cache.key(key), slot = slot, models = models, extra = extra,
    state = {completed_steps = st.completed_steps, model_steps = st.model_steps, loader = st.loader, rng = st.rng},
    result = st.result, saved_at = os.date("!%Y-%m-%dT%H:%M:%SZ")})
  local other = slot == "a" and "b" or "a"
  for i = 1, #models do os.remove(group_model(base, i, other)) end
  return string.format("%s (the same command resumes from step %d)", path, st.completed_steps)
end

-- Removes a group's saved state: the JSON, both slots of n models, stale temporaries.
function M.remove_group(base, n)
  os.remove(base .. ".resume.json")
  for i = 1, n do
    os.remove(group_model(base, i, "a"))
    os.remove(group_model(base, i, "b"))
  end
  sys.execute("rm -f -- " .. sys.shell_quote(base) .. ".resume*.tmp.* 2>/dev/null")
end

-- The saved state of a group of n runs of `steps` steps for `key`: {resume =
-- <xsa.train's opts.resume>, models = {...}, optimizers = {...}, extra =},
-- or nil and "none", or nil and why it is unusable (said through say(fmt,
-- ...) and removed: the group starts over). attentions[i]: model i's
-- attention function when it is written in Lua (a checkpoint names its
-- registered variant, but one saved before checkpoints did needs it).
function M.load_group(base, key, n, steps, say, attentions)
  local path = base .. ".resume.json"
  local text = core.read_file(path)
  if not text then return nil, "none" end
  local out = {models = {}, optimizers = {}}
  local function unusable(why)
    say("warning: saved state %s %s; starting over", path, why)
    for i = 1, n do
      if out.models[i] then out.models[i]:free() end
      if out.optimizers[i] then out.optimizers[i]:free() end
    end
    M.remove_group(base, n)
    return nil, why
  end
  local ok, j = pcall(core.json.decode, text)
  if not ok or type(j) ~= "table" then return unusable("is not valid JSON") end
  if j.key ~= cache.key(key) then return unusable("is for another configuration") end
  local st = j.state
  if type(st) ~= "table" or type(j.result) ~= "table" or type(j.models) ~= "table" or #j.models ~= n or
    type(st.model_steps) ~= "table" then
    return unusable("is incomplete")
  end
  for i = 1, n do
    local f = attentions and attentions[i]
    local good, m, opt = pcall(core.gpt.load, tostring(j.models[i]), f and {attention = f} or nil)
    if not good then return unusable("names a model that cannot be loaded (" .. tostring(m) .. ")") end
    out.models[i], out.optimizers[i] = m, opt
    if not opt or opt.step_count ~= st.model_steps[i] then return unusable("does not match its model " .. i) end
  end
  out.resume = {completed_steps = st.completed_steps, model_steps = st.model_steps, loader = st.loader, rng = st.rng,
    result = j.result}
  out.extra = type(j.extra) == "table" and j.extra or {}
  local good, why = M.check(out.resume, steps)
  if not good then return unusable("is damaged (" .. why .. ")") end
  return out
end

return M
