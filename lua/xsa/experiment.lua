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
-- The object owns the flags (parsed from `arg` when it is made: xsa.args,
-- --help, errors, --quick; folders settled by xsa.study.setup): ex.opts,
-- ex.seeds; the configuration ex.config (spec.config: a table or
-- function(opts, ex)); the figures, tables and summary (OUT/summary/NAME.json,
-- for the report); Ctrl-C (ex:main: exit status 130 without a traceback).
-- The rest is in one module per job, whose methods an experiment has:
--   xsa.store      cache entries and records: ex:cached{...}, ex:record, ...
--   xsa.pair       paired SA/XSA runs: ex:pair{...}, ex:pair_config, ex:results
--   xsa.runs       a group of runs, one per attention arm (Lua variants too):
--                  ex:group{...}
--   xsa.checkpoint a run's saved state (resuming) and partial saves
--   xsa.executor   where units run: ex:run(units) in this process, in --jobs
--                  children, or over the ranks of an MPI job
-- Under mpirun every rank runs the script: ex:run shares out the units and
-- returns the results on rank 0 (nil on the others, which then stop); work
-- outside units runs on every rank. A part (M.part) is a declaration whose
-- runs are units, so a part runs unchanged under mpirun.
-- Non-goals: experiments other than "probe something" and "train groups
-- of runs" get only ex:cached; several processes writing the same entry.
local sys = require "xsa.sys"
local study = require "xsa.study"
local args = require "xsa.args"
local options = require "xsa.options"
local store = require "xsa.store"
local pair = require "xsa.pair"
local runs = require "xsa.runs"
local executor = require "xsa.executor"

local M = {}

local Ex = {}
Ex.__index = Ex
for _, mod in ipairs{store, pair, runs} do
  for k, f in pairs(mod.methods) do Ex[k] = f end
end

-- the functions of the modules an experiment is made of, by their old names
M.ranks, M.exe, M.worker_status = executor.ranks, executor.exe, executor.worker_status
M.cache_config, M.seed_tag, M.files = store.cache_config, store.seed_tag, store.files
M.pair_quick, M.pair_config, M.pair_name, M.results = pair.quick, pair.config, pair.name, pair.results

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

local SPEC = {"name", "script", "title", "summary", "description", "epilog", "options", "quick", "argv", "config",
  "writes"}

-- A new experiment: parses the flags (spec.argv, default the global arg).
-- spec: name (required: cache names, summary/NAME.json), title (the
-- report's heading), script (the usage line; default arg[0]'s file name),
-- summary / description / epilog / writes (--help; writes defaults to
-- M.writes(name)), options, quick (xsa.args), config (a table, or
-- function(opts, ex) -> table).
function M.new(spec)
  assert(type(spec) == "table" and type(spec.name) == "string", "xsa.experiment: a spec with a name is needed")
  options.check("xsa.experiment", spec, SPEC)
  local script = spec.script or ((arg and arg[0] or spec.name):match("([^/]+)$"))
  local self = setmetatable({name = spec.name, title = spec.title or spec.name, figures = {}, t0 = os.time(),
    spec = {name = script, summary = spec.summary, description = spec.description, epilog = spec.epilog,
      options = spec.options or study.options({}), quick = spec.quick, writes = spec.writes or M.writes(spec.name)}}, Ex)
  self.opts = study.setup(args.parse(spec.argv or arg or {}, self.spec))
  self.seeds = self.opts.seed_list or {self.opts.seed or 0}
  self.shared_out = executor.ranks() > 1 -- see ex:refresh
  if executor.ranks() > 1 and (self.opts.jobs or 1) > 1 then
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
-- decl: what M.new takes (name, title, options, quick, config, ...), plus
-- units(ex) -> the runs (xsa.schedule units; ex:run computes them,
-- serially, with --jobs or over the ranks) and main(ex, results, by_key)
-- -> the outputs (figure, table, summary), which runs on rank 0 alone with
-- the results in unit order; without units, main(ex) on rank 0 alone. Any
-- other field (report, publish, run_all, ...) is the study's own, kept for
-- its registry. The script's last line is `return xsa.experiment.part(decl,
-- ...)`: run as a script, the part runs; loaded by M.declaration, it only
-- returns decl.
local DECLARE = setmetatable({}, {__tostring = function() return "xsa.experiment.declaration" end})

function M.part(decl, ...)
  if select("#", ...) > 0 and (...) == DECLARE then return decl end
  local spec = {}
  for _, k in ipairs(SPEC) do spec[k] = decl[k] end
  local ex = M.new(spec)
  ex:main(function()
    if decl.units then
      local results, by = ex:run(decl.units(ex))
      if results then decl.main(ex, results, by) end
    elseif select(2, executor.ranks()) == 0 then
      ex.alone = true -- no other rank runs with it (--data-parallel has no partner)
      decl.main(ex)
    end
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

-- Runs fn(ex) (on every rank of an MPI job): Ctrl-C (or SIGTERM) ends with
-- status 130, a diverging loss with status 1, both without a traceback
-- (xsa.study.main).
function Ex:main(fn)
  study.main(function() return fn(self) end)
end

-- Prints msg on stderr and exits (status 1 unless given).
function Ex:fail(msg, status)
  io.stderr:write(msg, msg:sub(-1) == "\n" and "" or "\n")
  os.exit(status or 1)
end

-- The results of `units` (xsa.schedule: {key=, seed=, after=, run=}), in
-- unit order, each unit computed once wherever xsa.executor runs it; under
-- mpirun rank 0 gets them and the other ranks nil (the outputs are rank
-- 0's). --from-records: a unit without a record leaves its seed out (every
-- unit of that seed; said so, ex:left_out). Returns the list of results and
-- a table of them by key.
function Ex:run(units)
  local res, gone = executor.run(self, self:seeded(units), {
    handler = function(e) return e == store.NO_RECORD and e or sys.traceback_unless_interrupted(e) end,
    skip = function(_, e) return e == store.NO_RECORD end})
  self.unit_seed = nil -- a unit that raised left its seed
  if select(2, executor.ranks()) ~= 0 then return nil end
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
-- reads are its seed's (ex:note_record)
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

-- One unit per seed of ex.seeds (ex:run): fn(seed, i) is its run.
function Ex:seed_units(fn)
  local units = {}
  for i, s in ipairs(self.seeds) do
    units[i] = {key = "seed " .. s, seed = s, run = function() return fn(s, i) end}
  end
  return units
end

-- fn(seed, i) for every seed of ex.seeds, in order, as units of ex:run;
-- returns the results as a list (nil on ranks other than 0, as ex:run).
function Ex:each_seed(fn)
  return self:run(self:seed_units(fn))
end

-- --from-records: the seeds without a complete set of records are left
-- out of ex.seeds, and said so (ex:summary keeps the list; the runs
-- missing are named, the first 8 of them). With none left the part has no
-- numbers: an error, unless ex.partial_ok (a registered design still being
-- run: its main says how far it is).
function Ex:left_out(kept)
  local have = {}
  for _, s in ipairs(kept) do have[s] = true end
  local gone = {}
  for _, s in ipairs(self.seeds) do if not have[s] then gone[#gone + 1] = tostring(s) end end
  local missing = self.missing or {}
  local named = table.concat(missing, "; ", 1, math.min(#missing, 8))
  if #missing > 8 then named = string.format("%s; and %d more", named, #missing - 8) end
  io.stderr:write(string.format("%s: no complete record for seed%s %s (%d run%s missing: %s)%s\n", self.name,
    #gone > 1 and "s" or "", study.seed_ranges(gone), #missing, #missing == 1 and "" or "s", named,
    #kept > 0 and string.format("; using seed%s %s", #kept == 1 and "" or "s", table.concat(kept, ", ")) or ""))
  if #kept == 0 and not self.partial_ok then
    error(string.format("%s: no runs of this configuration have records in %s", self.name, self.opts.results), 0)
  end
  self.seeds, self.seeds_missing = kept, gone
end

-- Saves a figure under --plots in --format; returns its summary record.
-- `caption`: what the report writes under the figure (optional). Unless the
-- figure has a footer, it gets ex:measured_text() (none when the part
-- measured nothing, as a probe of formulas).
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
