-- xsa.pair: a paired SA/XSA training run (xsa.train.pair) as a cache entry
-- of an experiment: cached, recorded, resumable, with its checkpoints.
--
--   local r, status, entry = ex:pair{seed = 0, checkpoints = true}
--   local c = xsa.pair.config(ex.opts, "mine", {seed = 1})
--   print(xsa.pair.name("mine", c))                   --> mine-300steps-seed1
--
-- The methods (M.methods: ex:pair, ex:pair_config, ex:results) are an
-- experiment's; xsa.experiment installs them and re-exports the functions.
-- A run's files are xsa.store's, its saved state xsa.checkpoint's.
-- Non-goals: groups of more than two runs (xsa.train.runs through ex:cached).
local sys = require "xsa.sys"
local study = require "xsa.study"
local args = require "xsa.args"
local cache = require "xsa.cache"
local record = require "xsa.record"
local options = require "xsa.options"
local store = require "xsa.store"
local checkpoint = require "xsa.checkpoint"
local executor = require "xsa.executor"
local train = require "xsa.train"

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

-- After training, on every path that trained: checkpoint paths, the
-- caller's after(), the models freed.
local function finish(p, r, sa_model, xsa_model, tl, vl)
  if #p.kinds > 0 then
    r.checkpoints = {}
    for _, k in ipairs(p.kinds) do r.checkpoints[k] = p.f.checkpoints[k] end
  end
  if p.o.after then p.o.after(r, {sa = sa_model, xsa = xsa_model, train = tl, val = vl}) end
  r.provenance = record.provenance()
  sa_model:free()
  xsa_model:free()
end

-- --data-parallel under mpirun: every rank trains this pair together and
-- rank 0 decides hit or miss for all. On the other ranks: what rank 0 has,
-- or the training without writing anything (result, status, entry); on
-- rank 0 nil (it goes on as one process would).
local function data_parallel_share(ex, p, no_cache)
  local opts, rank = ex.opts, select(2, executor.ranks())
  local flag = core.tensor{0}
  if rank == 0 and not no_cache and cache.load(opts.out, p.name, p.keyed, pair_check(p.kinds, p.o.check)) then
    flag = core.tensor{1}
  end
  core.mpi.bcast(flag, 0)
  local hit = flag:item() == 1
  flag:free()
  if rank == 0 then return nil end
  if hit then return cache.load(opts.out, p.name, p.keyed), "hit", p.f.entry end
  local tl, vl = study.loaders(p.config.data)
  local sa_model, xsa_model = study.new_pair(p.config.model, p.config.lambda)
  if p.o.on_start then p.o.on_start(sa_model, tl, vl) end
  local r = train.pair(sa_model, xsa_model, tl, vl, study.pair_options(p.config.train, {
    label = p.label, baseline = p.o.baseline, on_point = p.o.on_point, data_parallel = true}))
  finish(p, r, sa_model, xsa_model, tl, vl)
  return r, "miss", p.f.entry
end

-- The saved state to continue from (nil: start over), said so; --no-resume
-- discards it.
local function resume_state(ex, p, dp)
  local f, opts, say = p.f, ex.opts, p.say
  checkpoint.remove_stale_temps(f)
  if dp then
    if sys.exists(f.state) then say("resume: --data-parallel does not resume; starting %s over", p.what) end
  elseif opts.resume ~= false then
    local saved, why = checkpoint.load_files(f, p.keyed, p.config.train.steps, say)
    if saved then
      say("resume: %s from step %d of %d (%s; --no-resume starts over)", p.what, saved.resume.completed_steps,
        p.config.train.steps, f.state)
    elseif why == "none" and opts.given and opts.given.resume then
      say("resume: no saved state for %s (%s); starting from step 0", p.what, f.state)
    end
    return saved
  elseif sys.exists(f.state) then
    say("resume: --no-resume, starting %s over (discarding %s)", p.what, f.state)
    checkpoint.remove_files(f)
  end
end

-- xsa.train.pair's save hook: saved states, partial saves, the checkpoints.
local function save_hook(p)
  local f = p.f
  return function(res, st, ctx)
    if st == "checkpoint" or st == "interrupted" then return checkpoint.write_files(f, p.keyed, ctx) end
    if st == "nan" then checkpoint.remove_files(f) end -- resuming would diverge again
    if st ~= "done" then return checkpoint.write_partial(f, p.config, res, ctx) end
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

-- Trains the pair (continuing a saved state when there is one): the result.
local function train_pair(ex, p, dp)
  local config, o = p.config, p.o
  local tl, vl = study.loaders(config.data)
  local saved = resume_state(ex, p, dp)
  local sa_model, xsa_model
  if saved then
    sa_model, xsa_model = saved.sa, saved.xsa
  else
    sa_model, xsa_model = study.new_pair(config.model, config.lambda)
  end
  if p.keep.init and not (saved and sys.exists(p.f.checkpoints.init)) then
    (saved and study.new_model(config.model) or sa_model):save(p.f.checkpoints.init)
  end
  if o.on_start then o.on_start(sa_model, tl, vl) end
  local r = train.pair(sa_model, xsa_model, tl, vl, study.pair_options(config.train, {
    label = p.label, baseline = o.baseline, save_every = ex.opts.save_every or 0, on_point = o.on_point,
    data_parallel = dp or nil, resume = saved and saved.resume, optimizers = saved and {saved.sa_opt, saved.xsa_opt},
    save = save_hook(p)}))
  finish(p, r, sa_model, xsa_model, tl, vl)
  return r
end

local Ex = {}
M.methods = Ex

-- A paired SA/XSA run (xsa.train.pair) as a cache entry. o (all optional):
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
  local rec = self:recorded(p.name, p.config, pair_check(nil, o.check), p.what)
  if rec then return with_checkpoints(rec.result, p.kinds, p.f), "record", rec.path end
  local no_cache = self:refresh(p.name, p.config)
  local dp = self.opts.data_parallel and executor.ranks() > 1 and not self.alone
  if dp then
    local r, status, entry = data_parallel_share(self, p, no_cache)
    if r then return r, status, entry end
  end
  local result, status, entry = cache.fetch(self.opts.out, p.name, p.keyed, function() return train_pair(self, p, dp) end,
    {no_cache = no_cache, check = pair_check(p.kinds, o.check), label = p.what})
  checkpoint.remove_files(p.f) -- the finished entry replaces any saved state
  self:record(p.name, p.config, result, status)
  return result, status, entry
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
