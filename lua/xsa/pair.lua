-- xsa.pair: a paired SA/XSA training run as a cache entry of an
-- experiment: cached, recorded, resumable, with its checkpoints. A pair is
-- a group of two (xsa.runs.run, xsa.train.runs with layout "pair"): this
-- module keeps what is a pair's own, its cache name, its files (the
-- checkpoints init, sa, xsa and its saved state, xsa.checkpoint's
-- write_files), its record layout (result.sa, result.xsa).
--
--   local r, status, entry = ex:pair{seed = 0, checkpoints = true}
--   local c = xsa.pair.config(ex.opts, "mine", {seed = 1})
--   print(xsa.pair.name("mine", c))                   --> mine-300steps-seed1
--
-- The methods (M.methods: ex:pair, ex:pair_config, ex:results) are an
-- experiment's; xsa.experiment installs them and re-exports the functions.
-- A run's files are xsa.store's, its saved state xsa.checkpoint's.
-- Non-goals: groups of other arms (ex:group, xsa.runs).
local sys = require "xsa.sys"
local study = require "xsa.study"
local args = require "xsa.args"
local cache = require "xsa.cache"
local options = require "xsa.options"
local store = require "xsa.store"
local state_files = require "xsa.state_files"
local executor = require "xsa.executor"
local runs = require "xsa.runs"

local M = {}

local core = require "xsa.core" -- the C functions and libraries

-- The --quick settings of a paired run, plus `extra`.
function M.quick(extra)
  local q = {steps = 10, max_tokens = 10000, batch = 4, eval_every = 5, eval_batches = 2}
  for k, v in pairs(extra or {}) do q[k] = v end
  return q
end

-- The configuration of a paired run of experiment `name` given the flags:
-- what defines the data, the initial weights and the training (the cache
-- key). over: seed (one of opts.seed_list; default the first: the batch
-- order follows it unless --data-seed holds it, the initial weights unless
-- --init-seed does), seq_len, lambda, probe_batches, probe (the probe set's
-- data configuration).
function M.config(opts, name, over)
  over = over or {}
  local seed = over.seed or (opts.seed_list and opts.seed_list[1]) or opts.seed
  local data_seed, init_seed = study.seeds_of(opts, seed)
  return {
    part = name, data = study.data_config(opts, over.seq_len, nil, data_seed),
    model = study.model_config(opts, over.seq_len, init_seed),
    train = study.adam_config(opts), lambda = over.lambda or opts.lambda, probe_batches = over.probe_batches,
    probe = over.probe,
  }
end

-- The cache name of a paired run: NAME-<steps>steps-<seed tag>.
function M.name(name, config)
  return string.format("%s-%dsteps-%s", name, config.train.steps, store.seed_tag(config))
end

-- The kinds of checkpoints o.checkpoints asks for: true = init, sa, xsa;
-- or a list of some of them.
local function checkpoint_kinds(c)
  if c == true then return {"init", "sa", "xsa"} end
  if type(c) == "table" then return c end
  return {}
end

-- The cache check of a paired run: with its checkpoints (`kinds`, and any
-- other the result names) on disk.
local function pair_check(kinds, extra)
  return function(r)
    local ok, why = study.check_pair(r)
    if not ok then return false, why end
    for _, k in ipairs(kinds or {}) do
      local f = r.checkpoints and r.checkpoints[k]
      if not (f and sys.exists(f)) then return false, "checkpoint " .. tostring(f) .. " is missing" end
    end
    for k, f in pairs(type(r.checkpoints) == "table" and r.checkpoints or {}) do
      if not sys.exists(f) then return false, "checkpoint " .. tostring(k) .. " " .. tostring(f) .. " is missing" end
    end
    if extra then return extra(r) end
    return true
  end
end

-- The command that trains a missing run: xsa SCRIPT with the same flags
-- for this one seed, past any record of it (a record holds no checkpoint;
-- the new one lands beside). Returns the argv words and the command text.
local function train_command(opts, script, seed)
  local given = {}
  for k, v in pairs(opts.given or {}) do given[k] = v end
  given.no_cache, given.seeds, given.jobs, given.from_records = true, nil, nil, nil
  if seed then given.seed = seed end -- the value too: opts.seed is the first of --seeds
  local argv = args.to_argv(setmetatable({given = given, seed = seed}, {__index = opts}), {options = study.options({})}, true)
  local cmd = {sys.shell_quote(executor.exe()), sys.shell_quote(sys.root() .. "/" .. script)}
  for _, a in ipairs(argv) do cmd[#cmd + 1] = sys.shell_quote(a) end
  return argv, table.concat(cmd, " ")
end

-- The finished paired run of experiment `name` for the flags `opts` (its
-- training flags select it; o.seed one of the seeds, default the first),
-- with its checkpoints: from the cache, or, with o.train, computed first by
-- running its script (o.script, relative to the checkout; default
-- NAME.lua) with the same flags (that seed). Returns result, config; or nil
-- and a message naming the command to run. o.by names the asking script.
function M.results(name, opts, o)
  o = options.check("experiment.results", o, {"seed", "train", "script", "by"})
  local config = M.config(opts, name, {seed = o.seed})
  local cname = M.name(name, config)
  local check = pair_check(checkpoint_kinds(true))
  local r, why = cache.load(opts.out, cname, store.cache_config(config), check)
  if r then return r, config end
  local script = o.script or (name .. ".lua")
  local argv, cmd = train_command(opts, script, o.seed)
  local by = o.by and (o.by .. ": ") or ""
  if not o.train then
    return nil, string.format("%sno finished %s run for this configuration (%s: %s).\n" ..
      "Run %s first with the same flags:\n  xsa %s %s\nor add --train to this command.\n",
      by, name, cname, why, script, script, table.concat(argv, " "))
  end
  print(string.format("%s%s has not been run with this configuration; running it now (--train)", by, name))
  io.stdout:flush()
  local ok, how, code = core._proc.run(cmd)
  if not ok then
    if (how == "exit" and code == 130) or how == "signal" then error("interrupted!", 0) end
    error(string.format("%s failed (%s %s): %s", script, how, tostring(code), cmd), 0)
  end
  r, why = cache.load(opts.out, cname, store.cache_config(config), check)
  if not r then error(string.format("%s ran but left no result for this configuration (%s)", script, why), 0) end
  return r, config
end

-- A record holds no checkpoint: a run read from its record names the
-- checkpoints this machine's cache has of it, when all asked for are there.
local function with_checkpoints(r, kinds, f)
  if #kinds == 0 then return r end
  local c = {}
  for _, k in ipairs(kinds) do
    if not sys.exists(f.checkpoints[k]) then return r end
    c[k] = f.checkpoints[k]
  end
  local copy = {}
  for k, v in pairs(r) do copy[k] = v end
  copy.checkpoints = c
  return copy
end

-- What one paired run needs along the way: its configuration, cache name,
-- files, the checkpoints to keep, labels.
local function pair_run(ex, o)
  local config = o.config or (o.seed == nil and ex.config) or ex:pair_config{seed = o.seed}
  local name = o.name or M.name(ex.name, config)
  local keyed = store.cache_config(config)
  local p = {o = o, config = config, name = name, keyed = keyed, f = store.files(ex.opts.out, name, keyed),
    kinds = checkpoint_kinds(o.checkpoints), keep = {}, label = o.label or ex.name}
  for _, k in ipairs(p.kinds) do p.keep[k] = true end
  p.what = o.what or p.label
  p.say = function(fmt, ...) io.stderr:write(string.format(fmt, ...), "\n") end
  return p
end

-- The saved state to continue from (nil: start over), said so; --no-resume
-- discards it.
local function resume_state(ex, p, dp)
  local f, opts, say = p.f, ex.opts, p.say
  state_files.remove_stale_temps(f)
  if dp then
    if sys.exists(f.state) then say("resume: --data-parallel does not resume; starting %s over", p.what) end
  elseif opts.resume ~= false then
    local saved, why = state_files.load_files(f, p.keyed, p.config.train.steps, say)
    if saved then
      say("resume: %s from step %d of %d (%s; --no-resume starts over)", p.what, saved.resume.completed_steps,
        p.config.train.steps, f.state)
    elseif why == "none" and opts.given and opts.given.resume then
      say("resume: no saved state for %s (%s); starting from step 0", p.what, f.state)
    end
    return saved
  elseif sys.exists(f.state) then
    say("resume: --no-resume, starting %s over (discarding %s)", p.what, f.state)
    state_files.remove_files(f)
  end
end

-- The pair's save hook (xsa.train): saved states, partial saves, the checkpoints.
local function save_hook(p)
  local f = p.f
  return function(res, st, ctx)
    if st == "checkpoint" or st == "interrupted" then return state_files.write_files(f, p.keyed, ctx) end
    if st == "nan" then state_files.remove_files(f) end -- resuming would diverge again
    if st ~= "done" then return state_files.write_partial(f, p.config, res, ctx) end
    local written = {}
    for _, k in ipairs{"sa", "xsa"} do
      if p.keep[k] then
        ctx[k]:save(f.checkpoints[k], p.o.optimizer ~= false and {optimizer = ctx[k .. "_opt"]} or nil)
        written[#written + 1] = f.checkpoints[k]
      end
    end
    return #written > 0 and table.concat(written, ", ") or nil
  end
end

-- The pair's runs (xsa.train.runs, layout "pair"): the models of its saved
-- state (not under --data-parallel) or fresh ones (study.new_pair:
-- identical weights), the initial weights kept when asked for; a follower
-- (a rank other than 0) writes nothing. Returns runs, saved state.
local function pair_start(p, dp, follower)
  local config = p.config
  local saved = not follower and resume_state(p.ex, p, dp) or nil
  local sa_model, xsa_model
  if saved then
    sa_model, xsa_model = saved.sa, saved.xsa
  else
    sa_model, xsa_model = study.new_pair(config.model, config.lambda)
  end
  if not follower and p.keep.init and not (saved and sys.exists(p.f.checkpoints.init)) then
    (saved and study.new_model(config.model) or sa_model):save(p.f.checkpoints.init)
  end
  return {{model = sa_model, label = "SA", optimizer = saved and saved.sa_opt, baseline = p.o.baseline},
    {model = xsa_model, label = "XSA", optimizer = saved and saved.xsa_opt}}, saved
end

-- After training, on every path that trained: checkpoint paths, the
-- caller's after(), the models freed.
local function pair_finish(p, r, runs, tl, vl)
  local sa_model, xsa_model = runs[1].model, runs[2].model
  if #p.kinds > 0 then
    r.checkpoints = {}
    for _, k in ipairs(p.kinds) do r.checkpoints[k] = p.f.checkpoints[k] end
  end
  if p.o.after then p.o.after(r, {sa = sa_model, xsa = xsa_model, train = tl, val = vl}) end
  sa_model:free()
  xsa_model:free()
end

local function pair_remove_state(p) state_files.remove_files(p.f) end -- the finished entry replaces it

-- A record holds no checkpoint: one read from a record names this machine's.
local function pair_decorate(p, r, status)
  if status == "record" then return with_checkpoints(r, p.kinds, p.f) end
  return r
end

local Ex = {}
M.methods = Ex

-- A paired SA/XSA run as a cache entry (xsa.runs.run). o (all optional):
--   name         the cache name (default NAME-<steps>steps-<seed tag>)
--   config       default ex.config, else ex:pair_config()
--   label        progress label (default NAME); what: for cache messages
--   seed         one of ex.seeds (default the first): the configuration
--                ex:pair_config{seed = seed} when o.config is not given
--   checkpoints  keep the initial weights and both trained models (with
--                AdamW) as safetensors next to the entry: r.checkpoints;
--                or a list of the kinds to keep ({"xsa"}, {"sa", "xsa"})
--   optimizer    false: checkpoints of the trained models without AdamW
--   baseline     an earlier SA record to reuse (xsa.train.pair)
--   on_start(sa_model, train_loader, val_loader)   before training
--   on_point(step, vals, trains, result)   at each evaluation point (xsa.train.pair)
--   after(r, {sa=, xsa=, train=, val=})   after training, before the entry
--                is stored (probes, dropping step_loss, ...)
--   check(r)     an extra cache check
-- The models are fresh (study.new_pair: identical weights, XSA with
-- config.lambda), or, when a saved state of this configuration exists and
-- --no-resume was not given, those of the state: training continues where
-- it stopped (--save-every N steps and on Ctrl-C/SIGTERM a state is saved;
-- the finished entry replaces it). A NaN loss or an error leaves -atN files
-- for inspection. Returns result, status, entry path.
function Ex:pair(o)
  o = options.check("ex:pair", o, {"name", "config", "label", "what", "seed", "checkpoints", "optimizer", "baseline",
    "on_start", "on_point", "after", "check"})
  local p = pair_run(self, o)
  p.ex, p.layout, p.start, p.save, p.finish = self, "pair", pair_start, save_hook, pair_finish
  p.check, p.record_check = pair_check(p.kinds, o.check), pair_check(nil, o.check)
  p.remove_state, p.decorate, p.on_start, p.on_point = pair_remove_state, pair_decorate, o.on_start, o.on_point
  return runs.run(self, p)
end

function Ex:pair_config(over)
  return M.config(self.opts, self.name, over)
end

-- Another experiment's finished paired run for these flags (M.results);
-- when it is missing (and o.train is not set) prints what to run and exits 1.
function Ex:results(name, o)
  o = options.check("ex:results", o, {"train", "script", "seed"})
  local r, config = M.results(name, self.opts, {train = o.train, script = o.script, by = self.name, seed = o.seed})
  if not r then self:fail(config) end
  return r, config
end

return M
