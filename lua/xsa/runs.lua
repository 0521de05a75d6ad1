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
-- Non-goals: --data-parallel (each run takes one process), probes.
local study = require "xsa.study"
local options = require "xsa.options"
local numbers = require "xsa.numbers"
local store = require "xsa.store"
local checkpoint = require "xsa.checkpoint"
local group = require "xsa.group"
local train = require "xsa.train"
local variants = require "xsa.attention"
local sys = require "xsa.sys"

local M = {}

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
-- lambda; the grid's records say "SA", "XSA").
function M.start(config, f, key, say, label)
  local runs, fns, keys = {}, {}, group.runs(config)
  for i, arm in ipairs(config.arms) do
    local att = variants.get(arm_name(arm))
    fns[i] = type(att) == "function" and att or nil
    runs[i] = {label = (label or arm_label)(arm)}
  end
  local saved = checkpoint.load_group(f.base, key, #runs, config.train.steps, say, fns)
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

-- Trains the group of `config` (continuing its saved state): the result
-- of xsa.train.runs, its models described by their variants' names.
local function train_group(ex, config, p)
  local say = function(fmt, ...) io.stderr:write(string.format(fmt, ...), "\n") end
  local tl, vl = study.loaders(config.data)
  local runs, saved = M.start(config, p.f, p.key, say)
  local o = study.pair_options(config.train, {label = p.label, save_every = ex.opts.save_every or 0,
    resume = saved and saved.resume, save = function(_, status, ctx)
      if status == "checkpoint" or status == "interrupted" then return checkpoint.write_group(p.f.base, p.key, ctx) end
      if status == "nan" then checkpoint.remove_group(p.f.base, #runs) end -- resuming would diverge again
    end})
  local r = train.runs(runs, tl, vl, o)
  local models = type(r.config) == "table" and r.config.models
  for i, e in ipairs(runs) do
    local lua = variants.registered(e.label)
    if lua and type(models) == "table" and type(models[i]) == "table" then
      models[i].attention, models[i].attention_code, models[i].attention_version = e.label, lua.code, lua.version
    end
    if p.checkpoints then e.model:save(p.f.checkpoint(e.label)) end
    e.model:free()
    if e.optimizer then e.optimizer:free() end
  end
  return r
end

-- Whether r is a finished group's result: true, or false and why.
function M.check(r)
  if r.status ~= "done" then return false, "run did not finish" end
  if type(r.runs) ~= "table" then return false, "no runs" end
  for _, x in ipairs(r.runs) do
    if not numbers.finite(x.final_val) then return false, "final val loss missing" end
  end
  return numbers.all_finite(r)
end

local Ex = {}
M.methods = Ex

-- A group of runs, one per arm, as a cache entry. o (all optional):
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
-- Returns result (r.runs in arm order), status ("record", "hit", "miss",
-- ...), entry path.
function Ex:group(o)
  o = options.check("ex:group", o, {"seed", "config", "arms", "name", "label", "checkpoints"})
  local config = group_config(self, o)
  local name = o.name or string.format("%s-%dsteps-%s", self.name, config.train.steps, store.seed_tag(config))
  local key = store.cache_config(config)
  local p = {f = store.files(self.opts.out, name, key), key = key, label = o.label or name, checkpoints = o.checkpoints}
  local r, status, where = self:cached(function(c) return train_group(self, c, p) end,
    {name = name, config = config, check = M.check, label = p.label})
  if status ~= "record" then checkpoint.remove_group(p.f.base, #config.arms) end
  if o.checkpoints then
    local c = {}
    for _, arm in ipairs(config.arms) do
      local path = p.f.checkpoint(arm_label(arm))
      if sys.exists(path) then c[arm_label(arm)] = path end
    end
    local copy = {}
    for k, v in pairs(r) do copy[k] = v end
    copy.checkpoints = next(c) and c or nil
    r = copy
  end
  return r, status, where
end

return M
