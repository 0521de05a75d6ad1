-- xsa.experiment: the plumbing of an experiment script in one object, so
-- that the script itself reads as the experiment: data, models, training,
-- figure, table, verdict.
--
--   local ex = xsa.experiment{name = "mine", title = "My experiment",
--     summary = "what --help says", options = xsa.study.options({steps = 100}),
--     quick = xsa.experiment.pair_quick()}
--   ex:main(function()
--     local r, status, entry = ex:pair{}        -- cached, resumable SA/XSA training
--     local fig = xsa.plot.figure{...}; ex:save_figure(fig, "mine")
--     local tbl = ex:table({"model", "val loss"}, {{"SA", r.sa.final_val}, {"XSA", r.xsa.final_val}})
--     ex:summary{cache = status, entry = entry, result = r, table = tbl}
--   end)
--
-- The object owns:
--   flags      parsed from `arg` when it is made (xsa.args: --help, errors,
--              --quick), folders settled (xsa.study.setup): ex.opts;
--   the configuration   ex.config (spec.config: a table or function(opts));
--              for paired runs ex:pair_config{seq_len=, lambda=, ...};
--   cache entries   ex:cached(compute, {name=, config=, check=, label=}) and
--              ex:pair{...} (xsa.cache: OUT/NAME-HASH.json);
--   checkpoints     ex:pair{checkpoints = true}: NAME-{init,sa,xsa}-...-HASH.safetensors;
--   resuming        a paired run saves its state next to the entry every
--              --save-every steps and on Ctrl-C/SIGTERM, and continues from
--              it when run again (--no-resume: start over); see below;
--   partial saves   what a run stopped by a NaN loss or an error leaves for
--              inspection: both models and the curves so far, as -atN files;
--   the summary     ex:summary{...} (OUT/summary/NAME.json, for the report);
--   figures         ex:save_figure(fig, "name") (--plots, --format);
--   Ctrl-C          ex:main(fn): exit status 130 without a traceback.
-- Results of another experiment: xsa.experiment.results("part3", opts)
-- loads them from the cache, or (train = true) runs that script first.
-- Under mpirun/srun (xsa.mpi.size() > 1): an experiment made with
-- spec.ranks = true runs its main function on every rank, and ex:spread /
-- ex:each_seed hand its independent runs to the ranks round-robin; each rank
-- writes the cache entries (and checkpoints) of its own runs, atomically, on
-- the shared filesystem, then after a barrier rank 0 alone goes on: it reads
-- every run back from the cache (hits) and writes the figures, tables and
-- summary, as a --jobs parent does (the other ranks get nil from ex:run and
-- stop there). Other experiments run on rank 0 alone.
-- A run that fails on a rank ends the whole job (MPI_Abort) with the rank,
-- the run and the error named; finished runs stay cached.
-- Non-goals: experiments other than "probe something" and "train SA/XSA pairs"
-- get only ex:cached; several processes writing the same entry.
local sys = require "xsa.sys"
local study = require "xsa.study"
local args = require "xsa.args"
local cache = require "xsa.cache"
local record = require "xsa.record"
local options = require "xsa.options"
local numbers = require "xsa.numbers"
local schedule = require "xsa.schedule"

local M = {}

local core = require "xsa.core" -- the C functions and libraries
local train = require "xsa.train"

local Ex = {}
Ex.__index = Ex

-- The number of ranks of an mpirun job (1 otherwise) and this one's rank.
local function ranks()
  local m = core.mpi
  if not m then return 1, 0 end
  return m.size(), m.rank()
end
M.ranks = ranks

-- The --quick settings of a paired run (part 3's; part 5 probes that run,
-- so it uses the same), plus `extra`.
function M.pair_quick(extra)
  local q = {steps = 10, max_tokens = 10000, batch = 4, eval_every = 5, eval_batches = 2}
  for k, v in pairs(extra or {}) do q[k] = v end
  return q
end

-- The configuration of a paired run of experiment `name` given the flags:
-- what defines the data, the initial weights and the training (the cache
-- key). over: seed (one of opts.seed_list; default the first: the batch
-- order follows it unless --data-seed holds it, the initial weights unless
-- --init-seed does), seq_len (part 4's lengths), lambda (part 6's),
-- probe_batches, probe (the probe set's data configuration).
function M.pair_config(opts, name, over)
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

-- The seed part of a cache name: "seed3" (weights and batch order from
-- seed 3), or "init3-data0" when they differ (--data-seed, --init-seed).
function M.seed_tag(config)
  local d, m = config.data and config.data.seed, config.model and config.model.seed
  if d == m then return string.format("seed%d", m or 0) end
  return string.format("init%d-data%d", m or 0, d or 0)
end

-- The cache name of a paired run: NAME-<steps>steps-<seed tag>.
function M.pair_name(name, config)
  return string.format("%s-%dsteps-%s", name, config.train.steps, M.seed_tag(config))
end

-- What a cache entry, its checkpoints and its saved state are keyed by:
-- the configuration and the data files by content (xsa.record's identity:
-- CRC-64 and size of the corpus and the tokenizer files), so that another
-- corpus or tokenizer at the same path is a miss, never a stale hit. An
-- entry written before the data was part of the key has another name: a
-- miss, computed again.
function M.cache_config(config)
  return {config = config, data = record.data_identity()}
end

-- Files of a cached paired run: the entry DIR/NAME-HASH.json; checkpoints
-- DIR/PREFIX-KIND-REST-HASH<suffix>.safetensors where NAME = PREFIX-REST
-- ("part3-300steps" -> part3-sa-300steps-HASH.safetensors).
local function files_of(dir, name, config)
  local base = cache.path(dir, name, config, "")
  local hash = base:match("%-(%x+)$")
  local prefix, rest = name:match("^([^-]+)%-(.+)$")
  local function ck(kind, suffix)
    local stem = prefix and string.format("%s-%s-%s", prefix, kind, rest) or string.format("%s-%s", name, kind)
    return string.format("%s/%s-%s%s.safetensors", dir, stem, hash, suffix or "")
  end
  local function state_model(kind, slot) return string.format("%s.resume-%s-%s.safetensors", base, kind, slot) end
  return {base = base, entry = base .. ".json", checkpoint = ck,
    checkpoints = {init = ck("init"), sa = ck("sa"), xsa = ck("xsa")},
    state = base .. ".resume.json", state_model = state_model,
    state_files = {base .. ".resume.json", state_model("sa", "a"), state_model("xsa", "a"),
      state_model("sa", "b"), state_model("xsa", "b")}}
end
M.files = files_of

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

-- The xsa executable running this script: arg[-1] when it is a path (the
-- interpreter, as Lua's lua.c puts it there), else $XSA_EXE, else "xsa".
function M.exe()
  local a = arg and arg[-1]
  if a and a:find("/", 1, true) then return sys.abspath(a) end
  local e = sys.env("XSA_EXE")
  if e then return sys.abspath(e) end
  return a or "xsa"
end

-- The finished paired run of experiment `name` for the flags `opts` (its
-- training flags select it; o.seed one of the seeds, default the first),
-- with its checkpoints: from the cache, or, with o.train, computed first by
-- running its script (o.script, relative to the checkout; default
-- NAME.lua) with the same flags (all the seeds). Returns result, config; or nil and a message
-- naming the command to run. o.by names the asking script.
function M.results(name, opts, o)
  o = options.check("experiment.results", o, {"seed", "train", "script", "by"})
  local config = M.pair_config(opts, name, {seed = o.seed})
  local cname = M.pair_name(name, config)
  local check = pair_check(checkpoint_kinds(true))
  local r, why = cache.load(opts.out, cname, M.cache_config(config), check)
  if r then return r, config end
  local script = o.script or (name .. ".lua")
  local given = {}
  for k, v in pairs(opts.given or {}) do given[k] = v end
  -- the entry (with its checkpoints) is missing: train this one seed, past
  -- any record of it (a record holds no checkpoint; the new one lands beside)
  given.no_cache, given.seeds, given.jobs, given.from_records = true, nil, nil, nil
  local view = setmetatable({given = given}, {__index = opts})
  if o.seed then given.seed, view.seed = true, o.seed end -- the flag and its value (not opts.seed: the first seed)
  local argv = args.to_argv(view, {options = study.options({})}, true)
  local words = (name:gsub("^part(%d)", "part %1"))
  local by = o.by and (o.by .. ": ") or ""
  if not o.train then
    return nil, string.format("%sno finished %s run for this configuration (%s: %s).\n" ..
      "Run %s first with the same flags:\n  xsa %s %s\nor add --train to this command.\n",
      by, (words:gsub(" ", "-")), cname, why, words, script, table.concat(argv, " "))
  end
  print(string.format("%s%s has not been run with this configuration; running it now (--train)", by, words))
  io.stdout:flush()
  local cmd = {sys.shell_quote(M.exe()), sys.shell_quote(sys.root() .. "/" .. script)}
  for _, a in ipairs(argv) do cmd[#cmd + 1] = sys.shell_quote(a) end
  local ok, how, code = core._proc.run(table.concat(cmd, " "))
  if not ok then
    if (how == "exit" and code == 130) or how == "signal" then error("interrupted!", 0) end
    error(string.format("%s failed (%s %s): %s", script, how, tostring(code), table.concat(cmd, " ")), 0)
  end
  r, why = cache.load(opts.out, cname, M.cache_config(config), check)
  if not r then error(string.format("%s ran but left no result for this configuration (%s)", script, why), 0) end
  return r, config
end

-- Runs the script at `path` in this process with `argv` as its arg (arg[0]
-- = path, arg[-1] the executable), as `xsa path argv...` would in a child.
-- run_all uses it under mpirun: a child process of a rank is not part of the
-- job (core/comm.h), so the parts must run inside the ranks themselves.
function M.run_script(path, argv)
  local saved = arg
  local a = {[0] = path, [-1] = saved and saved[-1]}
  for i, v in ipairs(argv) do a[i] = v end
  arg = a
  local ok, err = pcall(dofile, path)
  arg = saved
  if not ok then error(err, 0) end
end

-- A new experiment: parses the flags (spec.argv, default the global arg).
-- spec: name (required: cache names, summary/NAME.json), title (the
-- report's heading), script (the usage line; default arg[0]'s file name),
-- summary / description / epilog / writes (--help; writes defaults to
-- M.writes(name)), options, quick (xsa.args),
-- config (a table, or function(opts, ex) -> table).
function M.new(spec)
  assert(type(spec) == "table" and type(spec.name) == "string", "xsa.experiment: a spec with a name is needed")
  options.check("xsa.experiment", spec, {"name", "script", "title", "summary", "description", "epilog", "options",
    "quick", "argv", "ranks", "config", "writes"})
  local script = spec.script or ((arg and arg[0] or spec.name):match("([^/]+)$"))
  local self = setmetatable({name = spec.name, title = spec.title or spec.name, figures = {}, t0 = os.time(),
    spec = {name = script, summary = spec.summary, description = spec.description, epilog = spec.epilog,
      options = spec.options or study.options({}), quick = spec.quick, writes = spec.writes or M.writes(spec.name)}}, Ex)
  self.opts = study.setup(args.parse(spec.argv or arg or {}, self.spec))
  self.seeds = self.opts.seed_list or {self.opts.seed or 0}
  self.spread_ranks = spec.ranks == true
  self.shared_out = ranks() > 1 -- see Ex:refresh
  if ranks() > 1 and (self.opts.jobs or 1) > 1 then
    io.stderr:write("--jobs starts child processes; under mpirun the ranks take the runs instead: drop --jobs\n")
    os.exit(2)
  end
  -- one of several seeds (labels name the seed): --seeds, or a --jobs child
  self.replicated = #self.seeds > 1 or self.opts.worker == true
  local c = spec.config
  if type(c) == "function" then c = c(self.opts, self) end
  self.config = c
  return self
end

-- What an experiment writes, for its --help.
function M.writes(name)
  return string.format("its figures (%s*.png or .svg, each with its .dat and .gp) in --plots (plots/), its\n" ..
    "summary (summary/%s.json), cache entries and checkpoints in --out (cache/), and one record per finished\n" ..
    "training run in --results (results/; a --quick run's go to OUT/records); the folders are the checkout's\n" ..
    "for the study's scripts, else beside the script. A study script's --quick run, or one given a flag that\n" ..
    "changes what it computes, writes to runs/LABEL/cache and runs/LABEL/plots instead (LABEL names those\n" ..
    "flags: runs/quick/, runs/steps-100/), never over the default run's. Prints its table and statistics.", name, name)
end

setmetatable(M, {__call = function(_, spec) return M.new(spec) end})

-- A part of a study, declared in one table and run by the study's tools.
-- decl: what M.new takes (name, title, options, quick, config, ranks, ...),
-- plus units(ex) -> the runs (xsa.schedule units; Ex:run computes them,
-- serially, with --jobs or over the ranks) and main(ex, results, by_key)
-- -> the outputs (figure, table, summary), which runs on rank 0 alone with
-- the results in unit order; without units, main(ex). Any other field
-- (report, publish, run_all, ...) is the study's own, kept for its
-- registry. The script's last line is `return xsa.experiment.part(decl, ...)`:
-- run as a script, the part runs; loaded by M.declaration, it only
-- returns decl.
local DECLARE = setmetatable({}, {__tostring = function() return "xsa.experiment.declaration" end})
local SPEC = {"name", "script", "title", "summary", "description", "epilog", "options", "quick", "argv", "ranks", "config",
  "writes"}

function M.part(decl, ...)
  if select("#", ...) > 0 and (...) == DECLARE then return decl end
  local spec = {}
  for _, k in ipairs(SPEC) do spec[k] = decl[k] end
  local ex = M.new(spec)
  ex:main(function()
    if not decl.units then return decl.main(ex) end
    local results, by = ex:run(decl.units(ex))
    if results then decl.main(ex, results, by) end
  end)
  return decl
end

-- The declaration of the part in the script at `path` (M.part), without running it.
function M.declaration(path)
  local chunk, err = loadfile(path)
  if not chunk then error(err, 0) end
  local decl = chunk(DECLARE)
  if type(decl) ~= "table" or type(decl.name) ~= "string" then
    error(path .. " declares no part (its last line: return xsa.experiment.part(decl, ...))", 0)
  end
  return decl
end

-- Runs fn(ex): Ctrl-C (or SIGTERM) ends with status 130, a diverging loss
-- with status 1, both without a traceback (xsa.study.main).
-- Under mpirun, fn runs on every rank when the experiment spreads its runs
-- (spec.ranks), else on rank 0 alone.
function Ex:main(fn)
  local size, rank = ranks()
  if size > 1 and not self.spread_ranks then
    if rank ~= 0 then return end
    self.alone = true -- the other ranks have left: Ex:run spreads nothing over them
  end
  study.main(function() return fn(self) end)
end

-- Prints msg on stderr and exits (status 1 unless given).
function Ex:fail(msg, status)
  io.stderr:write(msg, msg:sub(-1) == "\n" and "" or "\n")
  os.exit(status or 1)
end

-- Another experiment's finished paired run for these flags (M.results);
-- when it is missing (and o.train is not set) prints what to run and exits 1.
function Ex:results(name, o)
  o = options.check("ex:results", o, {"train", "script", "seed"})
  local r, config = M.results(name, self.opts, {train = o.train, script = o.script, by = self.name, seed = o.seed})
  if not r then self:fail(config) end
  return r, config
end

-- Whether --no-cache means "recompute" for this entry. In one process:
-- always. When the runs are shared out, each run once per command: under
-- mpirun an entry any rank computed in this command (Ex:spread shares the
-- list) is a hit; after --jobs workers, one written since the command
-- started. (saved_at has whole seconds: there, an entry of an earlier
-- command finished in the second this one started would count as fresh.)
function Ex:refresh(name, config)
  if not self.opts.no_cache then return false end
  if not self.shared_out then return true end
  local path = cache.path(self.opts.out, name, M.cache_config(config))
  self.computed = self.computed or {}
  if self.computed[path] then return false end
  self.computed[path] = true -- the caller computes it now
  if ranks() > 1 then return true end
  local j = core.json.read_file(path)
  local since = os.date("!%Y-%m-%dT%H:%M:%SZ", self.t0)
  return not (type(j) == "table" and type(j.saved_at) == "string" and j.saved_at >= since)
end

function Ex:pair_config(over)
  return M.pair_config(self.opts, self.name, over)
end

-- A cached result: compute(config) on a miss (--no-cache: always). o: name
-- (default NAME), config (default ex.config), check(r), label (messages).
-- Returns result, status ("hit", "miss", "refresh", "corrupt"), entry path.
function Ex:cached(compute, o)
  o = options.check("ex:cached", o, {"name", "config", "check", "label"})
  local name = o.name or self.name
  local config = o.config or self.config
  local rec = self:recorded(name, config, o.check, o.label or name)
  if rec then return rec.result, "record", rec.path end
  local r, status, path = cache.fetch(self.opts.out, name, M.cache_config(config), function()
    local res = compute(config)
    if type(res) == "table" then res.provenance = record.provenance() end
    return res
  end, {no_cache = self:refresh(name, config), check = o.check, label = o.label or name})
  self:record(name, config, r, status)
  return r, status, path
end

----------------------------------------------------------------------------
-- the record (xsa.record): a finished run is looked up there before the
-- cache, and every finished run gets a record unless it has one

-- Raised (Ex:each_seed catches it) under --from-records for a run that has
-- no record: that seed is left out and named.
local NO_RECORD = setmetatable({}, {__tostring = function()
  return "xsa.experiment: --from-records: no runs of this configuration have records (train them first)"
end})

-- The folder of a run's records: the experiment its configuration names
-- (part 7's constant-lr runs are part 3's), else this one.
local function record_part(self, config)
  return type(config) == "table" and type(config.part) == "string" and config.part or self.name
end

-- The chosen record of a run, or nil (none; --no-cache: not looked at).
function Ex:recorded(name, config, check, label)
  local opts = self.opts
  if not opts.results or (opts.no_cache and not opts.from_records) then return nil end
  local recs = record.find(opts.results, record_part(self, config), name, config, check)
  local rec = recs[1]
  if rec then
    self:note_record(name, recs)
    self:measured_with(rec.provenance)
    self.record_provenance = self.record_provenance or {}
    self.record_provenance[rec.path] = rec.provenance
    io.stderr:write(string.format("record: %s (%s, %s on %s)\n", label or name, rec.file, rec.provenance.date,
      tostring(rec.provenance.cpu)))
    return rec
  end
  if opts.from_records then
    self.missing = self.missing or {}
    self.missing[#self.missing + 1] = label or name
    error(NO_RECORD, 0)
  end
end

-- Part 3's pair of `seed` at this experiment's flags and part 5's probes of
-- its models (probe_batches batches of probe_data), from their records:
-- {pair = <part 3's result>, probes = <part 5's>}, or nil when either is
-- missing or --no-cache. Part 6 takes its lambda 1 and 0 runs from them
-- (a run is never trained twice for two parts).
function Ex:part3_with_probes(seed, probe_batches, probe_data)
  local opts = self.opts
  if not opts.results or (opts.no_cache and not opts.from_records) then return nil end
  local c3 = M.pair_config(opts, "part3", {seed = seed, lambda = 1.0})
  local c5 = {part = "part5", part3 = c3, probe_batches = probe_batches, probe = probe_data}
  local n3, n5 = M.pair_name("part3", c3), "part5-" .. M.seed_tag(c3)
  local r3 = record.find(opts.results, "part3", n3, c3, function(r) return type(r.sa.step_loss) == "table", "no step_loss" end)
  local r5 = record.find(opts.results, "part5", n5, c5, function(r)
    return type(r.models.sa) == "table" and type(r.models.xsa) == "table", "no probes" end)
  if not (r3[1] and r5[1]) then return nil end
  self:note_record(n3, r3)
  self:note_record(n5, r5)
  return {pair = r3[1].result, probes = r5[1].result}
end

-- The units of a lambda sweep: per seed, one per lambda, whose run is
-- run(seed, lambda, first, reuse). With part 3's pair and part 5's probes
-- of the seed recorded (reuse, ex:part3_with_probes) they are independent;
-- else the others need the first lambda's (first: its result).
function Ex:lambda_units(lambdas, probe_batches, probe_data, run)
  local units = {}
  for _, seed in ipairs(self.seeds) do
    local first = string.format("seed %d lambda %g", seed, lambdas[1])
    self.unit_seed = seed -- the records it reads are this seed's (Ex:note_record)
    local reuse = self:part3_with_probes(seed, probe_batches, probe_data)
    self.unit_seed = nil
    for i, lam in ipairs(lambdas) do
      local dep = not reuse and i > 1 and {first} or nil
      units[#units + 1] = {key = string.format("seed %d lambda %g", seed, lam), seed = seed, after = dep,
        run = function(d) return run(seed, lam, dep and d[first], reuse) end}
    end
  end
  return units
end

-- What the summary says of the records a run came from (the published
-- files name them): the chosen one, and how the others of its key differ.
function Ex:note_record(name, recs)
  local rec = recs[1]
  local diffs = {}
  for _, d in ipairs(record.differences(recs)) do
    if not d.field:match("_s$") and not d.field:match("^provenance") then diffs[#diffs + 1] = d end
  end
  self.records_used = self.records_used or {}
  local kernels = {}
  for i, r in ipairs(recs) do kernels[i] = string.format("%s, %s", record.blas_text(r.provenance), r.provenance.threads) end
  self.records_used[#self.records_used + 1] = {name = name, file = rec.file, provenance = rec.provenance,
    elapsed_s = rec.result.elapsed_s, cpu_s = rec.result.cpu_s, others = #recs - 1, differences = diffs, kernels = kernels,
    seed = self.unit_seed}
end

-- Writes the record of a finished run unless this run was read from one or
-- another record of its key exists. status: the cache's ("hit": an entry
-- trained earlier; otherwise trained now, which always gets a record of its
-- own, beside any other: --no-cache).
function Ex:record(name, config, r, status)
  local opts = self.opts
  if type(r) == "table" then self:measured_with(r.provenance or record.provenance()) end
  if not opts.results or type(r) ~= "table" then return end
  local part = record_part(self, config)
  if status == "hit" and #record.find(opts.results, part, name, config) > 0 then return end
  local prov = r.provenance
  if type(prov) ~= "table" then -- a cache entry from before records: what is known
    prov = record.provenance()
    prov.commit, prov.source = "unknown", "a cache entry of this machine written before records existed"
  end
  local copy = {}
  for k, v in pairs(r) do copy[k] = v end
  copy.provenance = nil
  local path = record.write(opts.results, part, name, config, copy, prov)
  io.stderr:write("record written: ", path, "\n")
end

-- Where the training time of runs ({r = result, cache = status, entry =},
-- as the units return them) was spent, in words: a run read from a record
-- or the cache was trained earlier, maybe elsewhere, and says so ("recorded
-- 2026-12-01 on AMD EPYC: 1820 s of training"); one trained now, "trained
-- now: 12.3 s". `what` names a run ("paired run").
function Ex:timing(runs, what)
  local groups, order = {}, {"record", "hit", "now"}
  for _, x in ipairs(runs) do
    local kind = (x.cache == "record" or x.cache == "hit") and x.cache or "now"
    local prov = kind == "record" and (self.record_provenance or {})[x.entry] or (x.r and x.r.provenance)
    local g = groups[kind] or {n = 0, s = 0, dates = {}, cpus = {}}
    groups[kind] = g
    g.n = g.n + 1
    g.s = g.s + (numbers.finite(x.r and x.r.elapsed_s) and x.r.elapsed_s or 0)
    if type(prov) == "table" then
      local day = tostring(prov.date or "?"):match("^(%d+%-%d+%-%d+)") or "?"
      g.dates[day], g.cpus[tostring(prov.cpu or "?")] = true, true
    end
  end
  local function list(set, sep)
    local t = {}
    for k in pairs(set) do t[#t + 1] = k end
    table.sort(t)
    if sep then return #t > 1 and (t[1] .. sep .. t[#t]) or t[1] or "?" end
    return #t > 0 and table.concat(t, ", ") or "?"
  end
  local out = {}
  for _, kind in ipairs(order) do
    local g = groups[kind]
    if g then
      local runs_text = g.n > 1 and string.format(" over %d %ss", g.n, what or "run") or ""
      out[#out + 1] = kind == "now" and string.format("trained now: %.1f s%s", g.s, runs_text) or
        string.format("%s %s on %s: %.0f s of training%s", kind == "record" and "recorded" or "cached",
          list(g.dates, " to "), list(g.cpus), g.s, runs_text)
    end
  end
  return table.concat(out, "; ")
end

-- The OpenBLAS kernel and thread count of every run this experiment's
-- numbers come from (a record's provenance, or this machine for a run
-- computed here): the figures name them (Ex:save_figure).
function Ex:measured_with(prov)
  if type(prov) ~= "table" then return end
  local k = string.format("%s, %s thread%s", tostring(prov.blas), tostring(prov.threads), prov.threads == 1 and "" or "s")
  self.blas_seen = self.blas_seen or {}
  self.blas_seen[k] = (self.blas_seen[k] or 0) + 1
end

-- "Measured with the OpenBLAS Haswell kernel, 1 thread" (with each one's
-- share of the runs when they differ); nil when nothing was measured.
function Ex:measured_text()
  local keys, seen = {}, self.blas_seen or {}
  for k in pairs(seen) do keys[#keys + 1] = k end
  if #keys == 0 then return nil end
  table.sort(keys)
  if #keys == 1 then return "Measured with the OpenBLAS " .. keys[1]:gsub(",", " kernel,", 1) end
  for i, k in ipairs(keys) do keys[i] = string.format("%s (%d run%s)", k, seen[k], seen[k] == 1 and "" or "s") end
  return "Measured with the OpenBLAS kernels " .. table.concat(keys, "; ")
end

-- What an unfinished run leaves for inspection: both models (with AdamW)
-- and the result so far, as -atN files. Returns the paths as text.
local function partial_save(f, config, res, ctx)
  local at = string.format("-at%d", res.completed_steps)
  local files = {}
  if res.completed_steps > 0 then
    for _, k in ipairs{"sa", "xsa"} do
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
-- saved states of a paired run (resuming)
--
-- NAME-HASH.resume.json next to the cache entry holds the key and the
-- configuration (as the entry does), the state xsa.train.pair hands to its
-- save hook (ctx.state: steps done by each model, the train loader's epoch
-- and position, the global generator, the result so far) and the names of
-- the two model files, NAME-HASH.resume-{sa,xsa}-{a,b}.safetensors (weights
-- with AdamW moments and step counts). A save writes both models into the
-- slot the JSON does not name, then replaces the JSON (atomically), then
-- removes the other slot's files, so a process killed at any moment leaves a
-- complete state: the previous one or the new one.

-- Also the temporary files of an atomic write that a SIGKILL interrupted
-- (NAME.tmp.PID, see core/fileio.h): nothing else will ever rename them.
-- Only from another process, so this runs before training and after it,
-- never from the save hook; through sys.execute, not os.execute (C's
-- system(), which ignores SIGINT while the shell runs: a Ctrl-C that came
-- then would be lost).
local function remove_stale_temps(f)
  sys.execute("rm -f -- " .. sys.shell_quote(f.base) .. ".resume*.tmp.* 2>/dev/null")
end

local function remove_state(f)
  for _, p in ipairs(f.state_files) do os.remove(p) end
  remove_stale_temps(f)
end

-- The slot the state on disk names (nil when there is none).
local function slot_on_disk(f)
  local j = core.json.read_file(f.state)
  return type(j) == "table" and (j.slot == "a" or j.slot == "b") and j.slot or nil
end

local function write_state(f, config, ctx)
  local st = ctx.state
  if not st then return nil end
  local slot = slot_on_disk(f) == "a" and "b" or "a"
  local models = {}
  for _, k in ipairs{"sa", "xsa"} do
    models[k] = f.state_model(k, slot)
    ctx[k]:save(models[k], {optimizer = ctx[k .. "_opt"]})
  end
  core.json.write_file(f.state, {key = cache.key(config), config = config, slot = slot, models = models,
    state = {completed_steps = st.completed_steps, model_steps = st.model_steps, loader = st.loader, rng = st.rng},
    result = st.result, saved_at = os.date("!%Y-%m-%dT%H:%M:%SZ")})
  local other = slot == "a" and "b" or "a" -- the previous state's models, no longer named
  os.remove(f.state_model("sa", other))
  os.remove(f.state_model("xsa", other))
  return string.format("%s, %s, %s (the same command resumes from step %d; --no-resume starts over)",
    models.sa, models.xsa, f.state, st.completed_steps)
end

-- The saved state for config (M.cache_config of the run's configuration:
-- another corpus is another state): {resume = <xsa.train.pair's opts.resume>,
-- sa, xsa (models), sa_opt, xsa_opt}, or nil (none, or unusable: said so
-- and removed, the run starts over).
local function load_state(f, config, say)
  local text = core.read_file(f.state)
  if not text then return nil, "none" end
  local function unusable(why)
    say("warning: saved state %s %s; starting over", f.state, why)
    remove_state(f)
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
  for _, k in ipairs{"sa", "xsa"} do
    local good, m, opt = pcall(core.gpt.load, tostring(j.models[k]))
    if not good then return unusable("names a model that cannot be loaded (" .. tostring(m) .. ")") end
    if not opt or opt.step_count ~= st.model_steps[k] then return unusable("does not match its " .. k .. " model") end
    out[k], out[k .. "_opt"] = m, opt
  end
  out.resume = {completed_steps = st.completed_steps, model_steps = st.model_steps, loader = st.loader, rng = st.rng,
    result = j.result}
  local good, why = train.check_resume(out.resume, config.config.train.steps)
  if not good then return unusable("is damaged (" .. why .. ")") end
  return out
end

-- A paired SA/XSA run (xsa.train.pair) as a cache entry. o (all optional):
--   name         the cache name (default NAME-<steps>steps)
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
local function pair_run(self, o)
  local config = o.config or (o.seed == nil and self.config) or self:pair_config{seed = o.seed}
  local name = o.name or M.pair_name(self.name, config)
  local keyed = M.cache_config(config)
  local p = {o = o, config = config, name = name, keyed = keyed, f = files_of(self.opts.out, name, keyed),
    kinds = checkpoint_kinds(o.checkpoints), keep = {}, label = o.label or self.name}
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
local function data_parallel_share(self, p, no_cache)
  local opts, rank = self.opts, select(2, ranks())
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
local function resume_state(self, p, dp)
  local f, opts, say = p.f, self.opts, p.say
  remove_stale_temps(f)
  if dp then
    if sys.exists(f.state) then say("resume: --data-parallel does not resume; starting %s over", p.what) end
  elseif opts.resume ~= false then
    local saved, why = load_state(f, p.keyed, say)
    if saved then
      say("resume: %s from step %d of %d (%s; --no-resume starts over)", p.what, saved.resume.completed_steps,
        p.config.train.steps, f.state)
    elseif why == "none" and opts.given and opts.given.resume then
      say("resume: no saved state for %s (%s); starting from step 0", p.what, f.state)
    end
    return saved
  elseif sys.exists(f.state) then
    say("resume: --no-resume, starting %s over (discarding %s)", p.what, f.state)
    remove_state(f)
  end
end

-- xsa.train.pair's save hook: saved states, partial saves, the checkpoints.
local function save_hook(p)
  local f = p.f
  return function(res, st, ctx)
    if st == "checkpoint" or st == "interrupted" then return write_state(f, p.keyed, ctx) end
    if st == "nan" then remove_state(f) end -- resuming would diverge again
    if st ~= "done" then return partial_save(f, p.config, res, ctx) end
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
local function train_pair(self, p, dp)
  local config, o = p.config, p.o
  local tl, vl = study.loaders(config.data)
  local saved = resume_state(self, p, dp)
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
    label = p.label, baseline = o.baseline, save_every = self.opts.save_every or 0, on_point = o.on_point,
    data_parallel = dp or nil, resume = saved and saved.resume, optimizers = saved and {saved.sa_opt, saved.xsa_opt},
    save = save_hook(p)}))
  finish(p, r, sa_model, xsa_model, tl, vl)
  return r
end

function Ex:pair(o)
  o = options.check("ex:pair", o, {"name", "config", "label", "what", "seed", "checkpoints", "optimizer", "baseline",
    "on_start", "on_point", "after", "check"})
  local p = pair_run(self, o)
  local rec = self:recorded(p.name, p.config, pair_check(nil, o.check), p.what)
  if rec then return with_checkpoints(rec.result, p.kinds, p.f), "record", rec.path end
  local no_cache = self:refresh(p.name, p.config)
  local dp = self.opts.data_parallel and ranks() > 1 and self.spread_ranks
  if dp then
    local r, status, entry = data_parallel_share(self, p, no_cache)
    if r then return r, status, entry end
  end
  local result, status, entry = cache.fetch(self.opts.out, p.name, p.keyed, function() return train_pair(self, p, dp) end,
    {no_cache = no_cache, check = pair_check(p.kinds, o.check), label = p.what})
  remove_state(p.f) -- the finished entry replaces any saved state
  self:record(p.name, p.config, result, status)
  return result, status, entry
end

----------------------------------------------------------------------------
-- units: the runs of an experiment, one after the other, side by side in
-- child processes (--jobs), or over the ranks of an MPI job (xsa.schedule)

-- The flags of this run as an argv list for a child process: those given,
-- minus --jobs (and the seed selection when the child gets its own), plus
-- --threads 1 unless given.
local function child_argv(self, own_seed)
  local given = {}
  for k, v in pairs(self.opts.given or {}) do given[k] = v end
  given.jobs, given.worker, given.unit = nil, nil, nil
  if own_seed then given.seeds, given.seed = nil, nil end
  local argv = args.to_argv(setmetatable({given = given}, {__index = self.opts}), self.spec, true)
  if not (self.opts.given and self.opts.given.threads) then
    argv[#argv + 1] = "--threads"
    argv[#argv + 1] = "1"
  end
  return argv
end

-- What the units are, for messages: "seeds 0,1" when each unit is one seed,
-- else "N runs of seeds 0,1".
local function units_words(units)
  local seeds, seen = {}, {}
  for _, u in ipairs(units) do
    local s = tostring(u.seed)
    if not seen[s] then seen[s], seeds[#seeds + 1] = true, s end
  end
  local list = "seeds " .. table.concat(seeds, ",")
  return #seeds == #units and list or string.format("%d runs of %s", #units, list)
end

-- How a child finds unit i: "S:J" when every unit has a seed (the child
-- runs with --seeds S, and J is the unit's place among that seed's units,
-- which are the units the child makes), else ":I" (the child has every
-- seed and I is the place in the whole list).
local function worker_tokens(units, wave)
  local by_seed, place, tokens = true, {}, {}
  for _, u in ipairs(units) do by_seed = by_seed and u.seed ~= nil end
  for i, u in ipairs(units) do
    if by_seed then
      local s = tostring(u.seed)
      place[s] = (place[s] or 0) + 1
      place[i] = s .. ":" .. place[s]
    else
      place[i] = ":" .. i
    end
  end
  for j, i in ipairs(wave) do tokens[j] = place[i] end
  return tokens, by_seed
end

-- Runs the units of one wave (indices into `units`) as `--worker --unit J`
-- children of this script (with --seeds S, when the units have seeds),
-- --jobs at a time (xargs -P), and waits. A child runs its unit (the units
-- it needs are stored already: reads); its progress lines
-- (XSA_PROGRESS=log unless set) name the run. A child stopped by Ctrl-C
-- ends the run as interrupted; one that failed is reported with its status.
-- The workers run through xsa._proc.run, not os.execute (C's system(),
-- which ignores SIGINT while it waits): a Ctrl-C, a kill -INT of this
-- process or a Jupyter interrupt reaches the workers, which save their
-- state, and then this process, once they have exited.
function Ex:run_workers(units, wave)
  local jobs = math.min(self.opts.jobs, #wave)
  local tokens, by_seed = worker_tokens(units, wave)
  local cmd = {sys.shell_quote(M.exe()), sys.shell_quote(sys.abspath(arg and arg[0] or self.spec.name))}
  for _, a in ipairs(child_argv(self, by_seed)) do cmd[#cmd + 1] = sys.shell_quote(a) end
  local dir = os.tmpname()
  os.remove(dir)
  sys.mkdir(dir)
  local mine = {}
  for j, i in ipairs(wave) do mine[j] = units[i] end
  io.stdout:write(string.format("jobs: %s in %d processes side by side (%s each)\n", units_words(mine), jobs,
    self.opts.given and self.opts.given.threads and ("--threads " .. self.opts.threads) or "1 BLAS thread"))
  io.stdout:flush()
  local child = 't=$1; s=${t%%:*}; u=${t##*:}; if [ -n "$s" ]; then set -- --seeds "$s,"; else set --; fi; ' ..
    table.concat(cmd, " ") .. ' "$@" --worker --unit "$u"; echo $? >' .. sys.shell_quote(dir) .. '/"$t"'
  core._proc.run(string.format("printf '%%s\\n' %s | XSA_PROGRESS=${XSA_PROGRESS:-log} xargs -P %d -I{} sh -c %s sh {}",
    table.concat(tokens, " "), jobs, sys.shell_quote(child)))
  local failed, interrupted = {}, false
  for j, i in ipairs(wave) do
    local f = io.open(dir .. "/" .. tokens[j])
    local code = f and tonumber(f:read("a"))
    if f then f:close() end
    os.remove(dir .. "/" .. tokens[j])
    local kind, why = M.worker_status(code)
    if kind == "interrupted" then interrupted = true
    elseif kind ~= "ok" then failed[#failed + 1] = string.format("%s %s", units[i].key, why) end
  end
  os.remove(dir)
  self.shared_out = true -- the workers computed the runs: the read-back is a hit (Ex:refresh)
  if #failed > 0 then
    error(string.format("%s: the worker of %s; its messages are above, and the other finished runs are kept",
      self.name, table.concat(failed, ", and of ")), 0)
  end
  if interrupted then error("interrupted!", 0) end
end

local SIGNALS = {[2] = "SIGINT", [6] = "SIGABRT", [7] = "SIGBUS", [8] = "SIGFPE",
  [9] = "SIGKILL: killed from outside, e.g. by the kernel's out-of-memory killer", [11] = "SIGSEGV", [15] = "SIGTERM"}

-- What a --jobs worker's exit status (as its shell saw it) means: "ok";
-- "interrupted" (130: Ctrl-C or SIGTERM, which the worker turns into a
-- saved state and status 130; nil: the shell that records it never ran,
-- the whole job was stopped); "crashed" (128 + N: killed by signal N, not
-- Ctrl-C) or "failed" (an error), each with words for the message.
function M.worker_status(code)
  if code == 0 then return "ok" end
  if code == nil or code == 130 then return "interrupted" end
  if code > 128 and code < 128 + 65 then
    local n = code - 128
    return "crashed", string.format("crashed: killed by signal %d (%s)", n, SIGNALS[n] or "see kill -l")
  end
  return "failed", string.format("failed (exit status %d)", code)
end

-- Under mpirun: every unit once on some rank, wave by wave (xsa.schedule.ranks);
-- an error ends the job naming the rank, the run and the error; Ctrl-C is
-- passed on. After each wave the ranks share which entries they computed
-- (--no-cache: computed once per command, Ex:refresh).
function Ex:spread(units)
  local m = core.mpi
  schedule.ranks(units, m, {handler = sys.traceback_unless_interrupted,
    fail = function(i, err)
      if sys.interrupted(err) then error(err, 0) end
      m.abort(string.format("%s: run %s failed: %s", self.name, units[i].key, tostring(err)))
    end,
    after_wave = function()
      local mine = {}
      for p in pairs(self.computed or {}) do mine[#mine + 1] = p end
      self.computed = self.computed or {}
      for _, list in ipairs(m.allgather(mine)) do
        for _, p in ipairs(list) do self.computed[p] = true end
      end
    end})
end

-- The results of `units` (xsa.schedule: {key=, seed=, after=, run=}), in
-- unit order, each unit computed once: in this process; with --jobs J, wave
-- by wave in J child processes first (each stores its run), then read back
-- here; under mpirun over the ranks first, then rank 0 reads them back and
-- the other ranks get nil (the outputs are rank 0's); --data-parallel: every
-- rank takes every unit together. A --worker child runs its --unit and
-- exits. --from-records: a unit without a record leaves its seed out (every
-- unit of that seed; said so, Ex:left_out). Returns the list of results and
-- a table of them by key.
function Ex:run(units)
  local opts, size, rank = self.opts, ranks()
  local skip = {handler = function(e) return e == NO_RECORD and e or sys.traceback_unless_interrupted(e) end,
    skip = function(_, e) return e == NO_RECORD end}
  if opts.worker then
    schedule.one(units, assert(opts.unit, "--worker needs --unit"), {handler = skip.handler})
    io.stdout:flush()
    os.exit(0)
  end
  -- when Ex:main let the other ranks go (a part without spec.ranks), rank 0
  -- runs every unit itself, never waiting in a collective for ranks that are gone
  if size > 1 and not self.alone and not opts.data_parallel then
    self:spread(units)
  elseif (opts.jobs or 1) > 1 and #units > 1 and not opts.from_records then
    schedule.processes(units, function(wave) self:run_workers(units, wave) end)
  end
  local res, gone = schedule.serial(self:seeded(units), skip)
  self.unit_seed = nil -- a unit that raised left its seed
  if size > 1 and rank ~= 0 then return nil end
  local out, by, drop = {}, {}, {}
  for _, i in ipairs(gone) do drop[tostring(units[i].seed)] = true end
  -- records of seeds left out are not the statistics' and are not counted
  local used = {}
  for _, r in ipairs(self.records_used or {}) do
    if r.seed == nil or not drop[tostring(r.seed)] then used[#used + 1] = r end
  end
  self.records_used = self.records_used and used
  for i, u in ipairs(units) do
    if not drop[tostring(u.seed)] then out[#out + 1], by[u.key] = res[i], res[i] end
  end
  if next(drop) then
    local kept = {}
    for _, s in ipairs(self.seeds) do if not drop[tostring(s)] then kept[#kept + 1] = s end end
    self:left_out(kept)
  end
  return out, by
end

-- units whose runs set ex.unit_seed while they run: the records a unit
-- reads are its seed's (Ex:note_record)
function Ex:seeded(units)
  local out = {}
  for i, u in ipairs(units) do
    out[i] = setmetatable({run = function(...)
      self.unit_seed = u.seed
      local r = table.pack(u.run(...))
      self.unit_seed = nil
      return table.unpack(r, 1, r.n)
    end}, {__index = u})
  end
  return out
end

-- One unit per seed of ex.seeds (Ex:run): fn(seed, i) is its run.
function Ex:seed_units(fn)
  local units = {}
  for i, s in ipairs(self.seeds) do
    units[i] = {key = "seed " .. s, seed = s, run = function() return fn(s, i) end}
  end
  return units
end

-- fn(seed, i) for every seed of ex.seeds, in order, as units of Ex:run;
-- returns the results as a list. For scripts that are not parts
-- (xsa.experiment.part): under mpirun, ranks other than 0 get nil once
-- their share is done (the outputs are rank 0's), as from Ex:run.
function Ex:each_seed(fn)
  return self:run(self:seed_units(fn))
end

-- --from-records: the seeds without a complete set of records are left
-- out of ex.seeds, and said so (Ex:summary keeps the list).
function Ex:left_out(kept)
  local have = {}
  for _, s in ipairs(kept) do have[s] = true end
  local gone = {}
  for _, s in ipairs(self.seeds) do if not have[s] then gone[#gone + 1] = tostring(s) end end
  io.stderr:write(string.format("%s: no record for seed%s %s (%s); using seed%s %s\n", self.name, #gone > 1 and "s" or "",
    table.concat(gone, ", "), table.concat(self.missing or {}, "; "), #kept == 1 and "" or "s", table.concat(kept, ", ")))
  if #kept == 0 then error(string.format("%s: no runs of this configuration have records in %s", self.name,
    self.opts.results), 0) end
  self.seeds, self.seeds_missing = kept, gone
end

-- Saves a figure under --plots in --format; returns its summary record.
-- `caption`: what the report writes under the figure (optional). Unless the
-- figure has a footer, it gets Ex:measured_text() (none when the part
-- measured nothing, as part 2).
function Ex:save_figure(fig, name, caption)
  -- a figure of measured numbers says what they were measured with
  if fig.footer == nil then fig:set_footer(self:measured_text()) end
  local info = study.save_figure(fig, self.opts, name, caption)
  self.figures[#self.figures + 1] = info
  return info
end

-- Prints a markdown table after a blank line; returns its text.
function Ex:table(headers, rows)
  local tbl = study.md_table(headers, rows)
  io.stdout:write("\n", tbl)
  return tbl
end

-- Writes OUT/summary/NAME.json for the report. Defaults: title, config
-- (ex.config), wall_s (since the experiment was made), figures (saved so far).
function Ex:summary(s)
  if s.title == nil then s.title = self.title end
  if s.config == nil then s.config = self.config end
  if s.wall_s == nil then s.wall_s = os.time() - self.t0 end
  if s.figures == nil then s.figures = self.figures end
  if s.records == nil then s.records = self.records_used end
  if s.seeds_missing == nil then s.seeds_missing = self.seeds_missing end
  return study.write_summary(self.opts, self.name, s)
end

return M
