-- xsa.executor: where the units of an experiment run (xsa.schedule's units:
-- {key=, seed=, after=, run=}): in this process, side by side in --jobs
-- child processes of the same script, or over the ranks of an MPI job.
--
--   local results, gone = xsa.executor.run(ex, units)   -- in unit order
--
-- Every rank of an MPI job enters run() with the same list; each unit is
-- computed once somewhere and stored (its run writes a cache entry or a
-- record), then every unit is run again here in order, which reads what was
-- stored. So the caller sees one process's results whatever ran where; under
-- mpirun only rank 0 gets them (the outputs are rank 0's).
-- The experiment `ex` gives opts (jobs, worker, unit, from_records,
-- data_parallel, threads, given), spec (its flags, to start children),
-- name (messages) and computed (the entries computed in this command).
-- A run that fails on a rank ends the whole job (MPI_Abort) with the rank,
-- the run and the error named; finished runs stay cached.
-- Non-goals: storing results, retrying, load balancing beyond round-robin.
local sys = require "xsa.sys"
local args = require "xsa.args"
local schedule = require "xsa.schedule"

local M = {}

local core = require "xsa.core" -- the C functions and libraries

-- The number of ranks of an mpirun job (1 otherwise) and this one's rank.
function M.ranks()
  local m = core.mpi
  if not m then return 1, 0 end
  return m.size(), m.rank()
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

-- The flags of this run as an argv list for a child process: those given,
-- minus --jobs (and the seed selection when the child gets its own), plus
-- --threads 1 unless given.
local function child_argv(ex, own_seed)
  local given = {}
  for k, v in pairs(ex.opts.given or {}) do given[k] = v end
  given.jobs, given.worker, given.unit = nil, nil, nil
  if own_seed then given.seeds, given.seed = nil, nil end
  local argv = args.to_argv(setmetatable({given = given}, {__index = ex.opts}), ex.spec, true)
  if not (ex.opts.given and ex.opts.given.threads) then
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

local SIGNALS = {[2] = "SIGINT", [6] = "SIGABRT", [7] = "SIGBUS", [8] = "SIGFPE",
  [9] = "SIGKILL: killed from outside, e.g. by the kernel's out-of-memory killer", [11] = "SIGSEGV", [15] = "SIGTERM"}

-- What a --jobs worker's exit status (xsa._proc.pool's code) means: "ok";
-- "interrupted" (130: Ctrl-C or SIGTERM, which the worker turns into a
-- saved state and status 130; nil: it never started, the whole job was
-- stopped first); "crashed" (128 + N: killed by signal N, not Ctrl-C) or
-- "failed" (an error), each with words for the message.
function M.worker_status(code)
  if code == 0 then return "ok" end
  if code == nil or code == 130 then return "interrupted" end
  if code > 128 and code < 128 + 65 then
    local n = code - 128
    return "crashed", string.format("crashed: killed by signal %d (%s)", n, SIGNALS[n] or "see kill -l")
  end
  return "failed", string.format("failed (exit status %d)", code)
end

-- Runs the units of one wave (indices into `units`) as `--worker --unit J`
-- children of this script (with --seeds S, when the units have seeds),
-- --jobs at a time, and waits. A child runs its unit (the units it needs
-- are stored already: reads); its progress lines (XSA_PROGRESS=log unless
-- set) name the run. A child stopped by Ctrl-C ends the run as
-- interrupted; one that failed is reported with its status.
-- The children run through xsa._proc.pool (argv lists, no shell, each in
-- its own process group): a Ctrl-C, a kill -INT of this process or a
-- Jupyter interrupt reaches every running child, which saves its state, no
-- other child starts, and then this process is interrupted once they have
-- exited.
local function run_workers(ex, units, wave)
  local jobs = math.min(ex.opts.jobs, #wave)
  local tokens, by_seed = worker_tokens(units, wave)
  local base = {M.exe(), sys.abspath(arg and arg[0] or ex.spec.name)}
  for _, a in ipairs(child_argv(ex, by_seed)) do base[#base + 1] = a end
  local commands, mine = {}, {}
  for j, i in ipairs(wave) do
    mine[j] = units[i]
    local s, u = tokens[j]:match("^(.-):(%d+)$")
    local c = table.move(base, 1, #base, 1, {})
    if s ~= "" then table.move({"--seeds", s .. ","}, 1, 2, #c + 1, c) end
    table.move({"--worker", "--unit", u}, 1, 3, #c + 1, c)
    commands[j] = c
  end
  io.stdout:write(string.format("jobs: %s in %d processes side by side (%s each)\n", units_words(mine), jobs,
    ex.opts.given and ex.opts.given.threads and ("--threads " .. ex.opts.threads) or "1 BLAS thread"))
  io.stdout:flush()
  local codes = core._proc.pool(commands, jobs, {XSA_PROGRESS = sys.env("XSA_PROGRESS") or "log"})
  local failed, interrupted = {}, false
  for j, i in ipairs(wave) do
    local kind, why = M.worker_status(codes[j])
    if kind == "interrupted" then interrupted = true
    elseif kind ~= "ok" then failed[#failed + 1] = string.format("%s %s", units[i].key, why) end
  end
  ex.shared_out = true -- the workers computed the runs: the read-back is a hit (ex:refresh)
  if #failed > 0 then
    error(string.format("%s: the worker of %s; its messages are above, and the other finished runs are kept",
      ex.name, table.concat(failed, ", and of ")), 0)
  end
  if interrupted then error("interrupted!", 0) end
end

-- Under mpirun: every unit once on some rank, wave by wave (xsa.schedule.ranks);
-- an error ends the job naming the rank, the run and the error; Ctrl-C is
-- passed on. After each wave the ranks share which entries they computed
-- (--no-cache: computed once per command, ex:refresh).
local function spread(ex, units)
  local m = core.mpi
  schedule.ranks(units, m, {handler = sys.traceback_unless_interrupted,
    fail = function(i, err)
      if sys.interrupted(err) then error(err, 0) end
      m.abort(string.format("%s: run %s failed: %s", ex.name, units[i].key, tostring(err)))
    end,
    after_wave = function()
      local mine = {}
      for p in pairs(ex.computed or {}) do mine[#mine + 1] = p end
      ex.computed = ex.computed or {}
      for _, list in ipairs(m.allgather(mine)) do
        for _, p in ipairs(list) do ex.computed[p] = true end
      end
    end})
end

-- The results of `units` by index, each unit computed once: in this
-- process; with --jobs J, wave by wave in J child processes first (each
-- stores its run), then read back here; under mpirun over the ranks first,
-- then read back (every rank reads; the caller keeps rank 0's);
-- --data-parallel: every rank takes every unit together. A --worker child
-- runs its --unit and exits. o.skip(i, err): true to leave unit i out
-- (with every unit needing it) instead of raising err; o.handler: the
-- message handler around each unit. Returns the results by index and the
-- list of indices left out.
function M.run(ex, units, o)
  local opts, size = ex.opts, M.ranks()
  if opts.worker then
    schedule.one(units, assert(opts.unit, "--worker needs --unit"), {handler = o.handler})
    io.stdout:flush()
    os.exit(0)
  end
  if size > 1 and not opts.data_parallel then
    spread(ex, units)
  elseif (opts.jobs or 1) > 1 and #units > 1 and not opts.from_records then
    schedule.processes(units, function(wave) run_workers(ex, units, wave) end)
  end
  return schedule.serial(units, o)
end

return M
