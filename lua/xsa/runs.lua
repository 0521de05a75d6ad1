-- xsa.runs: a group of training runs that share initial weights and
-- batches (xsa.train.runs), one per attention arm, as a cache entry of an
-- experiment: cached, recorded (one record, each run under its own key:
-- xsa.group), resumable, with its checkpoints. An arm is a built-in
-- variant's name or a registered Lua variant's (xsa.attention), so a
-- variant written in Lua runs in an experiment like a built-in one.
--
--   xsa.attention.register("gated", gated)
--   local r, status, entry = ex:group{seed = 0, arms = {"sa", "gated"}}
--   print(r.runs[1].final_val, r.runs[2].final_val)  -- in arm order
--
-- The method (M.methods: ex:group) is an experiment's; xsa.experiment
-- installs it. Its files are xsa.store's (the entry NAME-HASH.json, the
-- checkpoints NAME-ARM-...-HASH.safetensors), its saved state
-- xsa.checkpoint's group state.
--
-- M.run is the one path every group of runs takes, ex:group's and ex:pair's
-- (a pair is a group of two in the pair layout, xsa.pair): the record
-- first, then the cache entry, else training through xsa.train.runs
-- (resuming a saved state; under mpirun with --data-parallel every rank
-- trains the group together), the entry and its record written. What
-- differs between a pair and another group (its files, its saved state,
-- its checkpoints) is the `p` it is given.
-- Non-goals: the runs' own numbers (xsa.train), where records go (xsa.store).
local study = require "xsa.study"
local options = require "xsa.options"
local numbers = require "xsa.numbers"
local store = require "xsa.store"
local state_files = require "xsa.state_files"
local group = require "xsa.group"
local train = require "xsa.train"
local variants = require "xsa.attention"
local sys = require "xsa.sys"
local cache = require "xsa.cache"
local record = require "xsa.record"
local executor = require "xsa.executor"
local reuse = require "xsa.reuse"

local M = {}

local core = require "xsa.core" -- the C functions and libraries

-- The arm's variant name (an arm is a name or {attention =, lambda =}).
local function arm_name(arm) return type(arm) == "table" and arm.attention or arm end

-- The arm's label (progress, checkpoint file names): its name, and its
-- own lambda when it has one ("xsa-l0.5").
local function arm_label(arm)
  local l = type(arm) == "table" and arm.lambda
  return type(l) == "number" and string.format("%s-l%g", arm_name(arm), l) or arm_name(arm)
end

-- The configuration of the group: o.config (default ex:pair_config{seed =
-- o.seed}) with its arms, each a known variant, none twice.
local function group_config(ex, o)
  local c = {}
  for k, v in pairs(o.config or ex:pair_config{seed = o.seed}) do c[k] = v end
  c.arms = o.arms or c.arms or {"sa", "xsa"}
  if type(c.arms) ~= "table" or #c.arms < 1 or #c.arms > group.MAX_RUNS then
    error(string.format("ex:group: arms must be a list of 1 to %d variants", group.MAX_RUNS), 0)
  end
  local seen = {}
  for i, arm in ipairs(c.arms) do
    local name = arm_name(arm)
    variants.get(name) -- raises for an unknown name, naming the known ones
    if type(arm) == "table" and arm.lambda ~= nil and not numbers.finite(arm.lambda) then
      error(string.format("ex:group: arm %d's lambda must be a finite number (got %s)", i, tostring(arm.lambda)), 0)
    end
    if type(arm) == "table" and arm.lambda ~= nil and variants.registered(name) then
      error(string.format("ex:group: arm %d, %s, is written in Lua and takes no lambda (f holds its own)", i, name), 0)
    end
    if seen[arm_label(arm)] then error(string.format("ex:group: arm %d, %s, is in the group twice", i, arm_label(arm)), 0) end
    seen[arm_label(arm)] = true
  end
  if not group.runs(c) then error("ex:group: config is not a group's (data, model and train tables: xsa.group)", 0) end
  return c
end

-- The runs of a group ({label=, model=, optimizer=} for xsa.train.runs):
-- from its saved state beside the cache entry f (said so), else new (the
-- arms of one initial model, each with its lambda as its key has it), and
-- the saved state. label(arm) names a run (default: the arm's name and
-- lambda; the grid's records say "SA", "XSA"); fresh: never resume.
function M.start(config, f, key, say, label, fresh)
  local runs, fns, keys = {}, {}, group.runs(config)
  for i, arm in ipairs(config.arms) do
    local att = variants.get(arm_name(arm))
    fns[i] = type(att) == "function" and att or nil
    runs[i] = {label = (label or arm_label)(arm)}
  end
  local saved = not fresh and state_files.load_group(f.base, key, #runs, config.train.steps, say, fns)
  if saved then
    say("resume: %s from step %d of %d (%s.resume.json)", f.base:match("[^/]+$"), saved.resume.completed_steps,
      config.train.steps, f.base)
    for i = 1, #runs do runs[i].model, runs[i].optimizer = saved.models[i], saved.optimizers[i] end
    return runs, saved
  end
  local base = study.new_model(config.model)
  for i, arm in ipairs(config.arms) do runs[i].model = variants.clone(base, arm_name(arm), keys[i].key.run.model.lambda) end
  base:free()
  return runs
end

-- Trains the group p (xsa.train.runs): its runs from p.start (resumed or
-- fresh; dp: data-parallel, follower: a rank other than 0, which writes
-- nothing), p.on_start, the training, then p.finish (checkpoints, p.after,
-- the models freed). The result, with its provenance.
local function train_group(ex, p, dp, follower)
  local tl, vl = study.loaders(p.config.data)
  local runs, saved = p.start(p, dp, follower)
  for i, hit in pairs(p.found or {}) do runs[i].baseline = hit.result end -- not trained: its record's numbers
  if p.on_start then p.on_start(runs[1].model, tl, vl) end
  local r = train.runs(runs, tl, vl, study.pair_options(p.config.train, {label = p.label, layout = p.layout,
    save_every = ex.opts.save_every or 0, on_point = p.on_point, data_parallel = dp or nil,
    resume = saved and saved.resume, save = not follower and p.save(p, #runs) or nil}))
  p.finish(p, r, runs, tl, vl, follower)
  r.provenance = record.provenance()
  return r
end

-- --data-parallel under mpirun: every rank trains this group together and
-- rank 0 decides hit or miss for all. On the other ranks: what rank 0 has,
-- or the training without writing anything (result, status, entry); on
-- rank 0 nil (it goes on as one process would).
local function data_parallel_share(ex, p, no_cache)
  local opts, rank = ex.opts, select(2, executor.ranks())
  local flag = core.tensor{0}
  if rank == 0 and not no_cache and cache.load(opts.out, p.name, p.keyed, p.check) then flag = core.tensor{1} end
  core.mpi.bcast(flag, 0)
  local hit = flag:item() == 1
  flag:free()
  if rank == 0 then return nil end
  if hit then return cache.load(opts.out, p.name, p.keyed), "hit", p.f.entry end
  return train_group(ex, p, true, true), "miss", p.f.entry
end

-- The runs of group p that records of other groups hold (xsa.reuse: a
-- run is found by its own key, whichever part trained it), {[arm index] =
-- hit}, and how many: none for a pair (looked up by its own record only),
-- under --no-cache (unless --from-records) or without a records folder. A
-- hit serves when its group asked what this one asks of its runs beyond
-- training (the key's `with`: a probe set), or this one asks nothing;
-- p.accept(i, hit, with, key) -> hit | nil decides instead when given (it
-- may add what the hit lacks, a probe recorded elsewhere). When some runs
-- still train, a hit serves only with its step losses (xsa.train.runs'
-- baseline needs them).
local function found_runs(ex, p)
  local opts, found, n = ex.opts, {}, 0
  if not p.reuse or not opts.results or (opts.no_cache and not opts.from_records) then return found, 0 end
  local with = group.with_key(p.config)
  for i, run in ipairs(group.runs(p.config, record.data_identity())) do
    local key = group.run_key(run)
    local hit = reuse.find(opts.results, key)
    if hit and p.accept then hit = p.accept(i, hit, with, key)
    elseif hit and with and hit.with ~= with then hit = nil end
    if hit then found[i], n = hit, n + 1 end
  end
  if n < #p.config.arms then -- the others train: a run beside them needs its step losses (a baseline)
    for i, hit in pairs(found) do
      local sl = hit.result.step_loss
      if type(sl) ~= "table" or #sl < p.config.train.steps then found[i], n = nil, n - 1 end
    end
  end
  return found, n
end

-- A group every run of which other records hold, as the trainer would have
-- returned it (list layout; its evaluation steps and tokens its runs'
-- groups', which the equal keys make equal): nothing trained now, so no
-- time. nil when those groups disagree (one was edited).
local function assembled(found)
  local runs, models, probes = {}, {}, {}
  local first = found[1].record.result
  for i, hit in ipairs(found) do
    local g = hit.record.result
    if not numbers.same(g.steps, first.steps) or g.tokens ~= first.tokens then return nil end
    local r = {}
    for k, v in pairs(hit.result) do r[k] = v end
    r.reused = true
    runs[i], models[i], probes[i] = r, hit.model, hit.probe
  end
  return {status = "done", steps = first.steps, completed_steps = first.completed_steps, tokens = first.tokens,
    runs = runs, config = {models = models}, probes = #probes == #runs and probes or nil, elapsed_s = 0, train_s = 0,
    eval_s = 0}
end

-- The group p as a cache entry of ex: its record, else its entry, else
-- trained (train_group) and stored, its saved state removed, its record
-- written. p: name, config, keyed (store.cache_config), f (store.files),
-- label, what (messages), layout, check (the entry's), record_check,
-- start, save, finish, remove_state, decorate(p, r, status) (what the
-- caller sees: checkpoints of this machine), on_start, on_point. Returns
-- result, status, entry path.
function M.run(ex, p)
  local rec = ex:recorded(p.name, p.config, p.record_check, p.what, true)
  if rec then return p.decorate(p, rec.result, "record"), "record", rec.path end
  local found, n = found_runs(ex, p)
  if n > 0 and n == #p.config.arms then
    local r = assembled(found)
    if r and p.check(r) then
      for _, hit in ipairs(found) do ex:note_reused(hit) end
      io.stderr:write(string.format("record: %s, every run from the records of others (%s)\n", p.what, found[1].record.file))
      return p.decorate(p, r, "record"), "record", found[1].record.path
    end
    found, n = {}, 0
  end
  if ex.opts.from_records then ex:no_record(p.what) end
  for _, hit in pairs(found) do ex:note_reused(hit) end
  p.found = n > 0 and found or nil
  local no_cache = ex:refresh(p.name, p.config)
  local dp = ex.opts.data_parallel and executor.ranks() > 1 and not ex.alone
  if dp then
    local r, status, entry = data_parallel_share(ex, p, no_cache)
    if r then return p.decorate(p, r, status), status, entry end
  end
  local r, status, entry = cache.fetch(ex.opts.out, p.name, p.keyed, function() return train_group(ex, p, dp) end,
    {no_cache = no_cache, check = p.check, label = p.what})
  p.remove_state(p)
  ex:record(p.name, p.config, r, status)
  return p.decorate(p, r, status), status, entry
end

----------------------------------------------------------------------------
-- a group of arms (ex:group)

local function say(fmt, ...) io.stderr:write(string.format(fmt, ...), "\n") end

-- Its runs: resumed or new (M.start); dp does not resume.
local function group_start(p, dp, follower)
  if dp and not follower and sys.exists(p.f.base .. ".resume.json") then
    say("resume: --data-parallel does not resume; starting %s over", p.what)
  end
  return M.start(p.config, p.f, p.key, say, nil, dp)
end

-- The save hook: the group's saved state.
local function group_save(p, n)
  return function(_, status, ctx)
    if status == "checkpoint" or status == "interrupted" then return state_files.write_group(p.f.base, p.key, ctx) end
    if status == "nan" then state_files.remove_group(p.f.base, n) end -- resuming would diverge again
  end
end

-- After training: the models described by their variants' names, the
-- checkpoints (rank 0's to write), p.after(r, {models =, labels =, train =,
-- val =}), the models and optimizers freed.
local function group_finish(p, r, runs, tl, vl, follower)
  local models = type(r.config) == "table" and r.config.models
  local m, labels = {}, {}
  for i, e in ipairs(runs) do
    local lua = variants.registered(e.label)
    if lua and type(models) == "table" and type(models[i]) == "table" then
      models[i].attention, models[i].attention_code, models[i].attention_version = e.label, lua.code, lua.version
    end
    -- a run of another record was not trained here: its model is the initial one
    if p.checkpoints and not follower and not (p.found and p.found[i]) then e.model:save(p.f.checkpoint(e.label)) end
    m[i], labels[i] = e.model, e.label
  end
  if p.after then p.after(r, {models = m, labels = labels, train = tl, val = vl, reused = p.found or {}}) end
  for _, e in ipairs(runs) do
    e.model:free()
    if e.optimizer then e.optimizer:free() end
  end
end

local function group_remove_state(p) state_files.remove_group(p.f.base, #p.config.arms) end

-- What the caller sees: with o.checkpoints, the arms' files on this machine.
local function group_decorate(p, r)
  if not p.checkpoints then return r end
  local c = {}
  for _, arm in ipairs(p.config.arms) do
    local path = p.f.checkpoint(arm_label(arm))
    if sys.exists(path) then c[arm_label(arm)] = path end
  end
  local copy = {}
  for k, v in pairs(r) do copy[k] = v end
  copy.checkpoints = next(c) and c or nil
  return copy
end

-- Whether r is a finished group's result: true, or false and why. A
-- result that kept its evaluation steps has a train and a val point at each
-- of them in every run (readers index the curves by step).
function M.check(r)
  if r.status ~= "done" then return false, "run did not finish" end
  if type(r.runs) ~= "table" then return false, "no runs" end
  local steps = type(r.steps) == "table" and #r.steps or nil
  for i, x in ipairs(r.runs) do
    if not numbers.finite(x.final_val) then return false, "final val loss missing" end
    for _, k in ipairs(steps and {"train", "val"} or {}) do
      if type(x[k]) ~= "table" or #x[k] ~= steps then
        return false, string.format("run %d's %s curve has %s points for %d evaluation steps", i, k,
          type(x[k]) == "table" and tostring(#x[k]) or "no", steps)
      end
    end
  end
  return numbers.all_finite(r)
end

local Ex = {}
M.methods = Ex

-- A group of runs, one per arm, as a cache entry (M.run). o (all optional):
--   seed         one of ex.seeds (default the first): the configuration
--                ex:pair_config{seed = seed} when o.config is not given
--   config       a group configuration (xsa.group; its arms too)
--   arms         the variants, in order: built-in names or registered Lua
--                variants' (xsa.attention.register), or {attention =,
--                lambda =} for a built-in one; default {"sa", "xsa"}
--   name         the cache name (default NAME-<steps>steps-seedS)
--   label        progress label (default the name)
--   checkpoints  keep each trained model as NAME-ARM-...-HASH.safetensors
--                (r.checkpoints[ARM] when the file is on this machine; ARM
--                is the arm's name, with "-l<lambda>" when it has its own)
--   on_start(first_model, train_loader, val_loader)   before training
--   on_point(step, vals, trains, result)   at each evaluation point
--   after(r, {models =, labels =, train =, val =, reused =})   after
--                training, before the entry is stored (probes: r.probes in
--                arm order); reused[i]: run i's hit (found_runs), not trained
--   accept(i, hit, with, key) -> hit | nil   whether run i (key: its key
--                text), found in another group's record, serves here
--                (found_runs)
--   check(r)     an extra cache check
-- A run that another group's record holds (the same key: xsa.group) is
-- not trained again: with all of them there, nothing trains; with some,
-- the others train beside them on the same batches (xsa.train.runs'
-- baseline).
-- Under mpirun with --data-parallel every rank trains the group together.
-- Returns result (r.runs in arm order), status ("record", "hit", "miss",
-- ...), entry path.
function Ex:group(o)
  o = options.check("ex:group", o, {"seed", "config", "arms", "name", "label", "checkpoints", "on_start", "on_point",
    "after", "accept", "check"})
  local config = group_config(self, o)
  local name = o.name or string.format("%s-%dsteps-%s", self.name, config.train.steps, store.seed_tag(config))
  local key = store.cache_config(config)
  local check = M.check
  if o.check then
    check = function(r)
      local ok, why = M.check(r)
      if not ok then return false, why end
      return o.check(r)
    end
  end
  local label = o.label or name
  return M.run(self, {name = name, config = config, keyed = key, key = key, f = store.files(self.opts.out, name, key),
    label = label, what = label, checkpoints = o.checkpoints, check = check, record_check = check,
    on_start = o.on_start, on_point = o.on_point, after = o.after, accept = o.accept, reuse = true,
    start = group_start, save = group_save,
    finish = group_finish, remove_state = group_remove_state, decorate = group_decorate})
end

return M
