-- xsa.state_files: a training run's saved state on disk (xsa.checkpoint
-- says what a state is and resumes from it): beside the run's cache entry,
-- its JSON and its models with their AdamW, written in two slots in turn,
-- so that a process killed at any moment leaves a complete state; loading
-- it back checks it first (a damaged or foreign state is removed and said,
-- and the run starts over); the -atN files of a run that stopped on a NaN.
--
--   local saved = xsa.state_files.load_group(f.base, key, 2, 300, say)
--   if saved then print(saved.resume.completed_steps) end
--
-- Non-goals: what a state holds (xsa.checkpoint), data-parallel runs (they
-- do not resume).
local checkpoint = require "xsa.checkpoint"
local sys = require "xsa.sys"
local cache = require "xsa.cache"

local M = {}

local core = require "xsa.core" -- the C functions and libraries

----------------------------------------------------------------------------
-- the state on disk
--
-- `f` names the files of one run (xsa.experiment.files): f.state, the JSON
-- NAME-HASH.resume.json next to the cache entry, holds the key and the
-- configuration (as the entry does), the state xsa.train hands to its save
-- hook (xsa.checkpoint.state) and the names of the model files, f.state_model(kind,
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

-- The JSON of a saved state, text, for the run keyed `key`: decoded and
-- its shape checked (n models when n is given), or nil and why not.
local function state_json(text, key, n)
  local ok, j = pcall(core.json.decode, text)
  if not ok or type(j) ~= "table" then return nil, "is not valid JSON" end
  if j.key ~= cache.key(key) then return nil, "is for another configuration" end
  local st = j.state
  if type(st) ~= "table" or type(j.result) ~= "table" or type(j.models) ~= "table" or (n and #j.models ~= n) or
    type(st.model_steps) ~= "table" then
    return nil, "is incomplete"
  end
  return j
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
  local j, bad = state_json(text, config)
  if not j then return unusable(bad) end
  local st = j.state
  local out = {}
  for _, k in ipairs(M.KINDS) do
    local good, m, opt = pcall(core.gpt.load, tostring(j.models[k]))
    if not good then return unusable("names a model that cannot be loaded (" .. tostring(m) .. ")") end
    if not opt or opt.step_count ~= st.model_steps[k] then return unusable("does not match its " .. k .. " model") end
    out[k], out[k .. "_opt"] = m, opt
  end
  out.resume = {completed_steps = st.completed_steps, model_steps = st.model_steps, loader = st.loader, rng = st.rng,
    result = j.result}
  local good, why = checkpoint.check(out.resume, steps)
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
  local j, bad = state_json(text, key, n)
  if not j then return unusable(bad) end
  local st = j.state
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
  local good, why = checkpoint.check(out.resume, steps)
  if not good then return unusable("is damaged (" .. why .. ")") end
  return out
end

return M
