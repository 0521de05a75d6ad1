-- run_all.lua: every part of the study in order (the registry,
-- scripts/parts.lua), then the report.
--
--   xsa scripts/run_all.lua              # the full study (long: parts 4 and 6 train 16 models)
--   xsa scripts/run_all.lua --quick      # everything small, in seconds
--   xsa scripts/run_all.lua --seeds 5    # parts 3-6 over seeds 0..4, each verdict with a 95% interval
--   make run-all ARGS="--quick"
--
-- Each part runs as its own xsa process (the same executable), with the
-- shared flags passed on; a failing part is reported and the others still
-- run. Ends with the wall time of each part and the report's path.
--
-- Under mpirun (mpirun -np K xsa scripts/run_all.lua --seeds 4) the parts
-- run inside every rank, one after the other (a child process of a rank is
-- not part of the MPI job): parts 3, 4 and 6 hand their runs to the ranks,
-- parts 1, 2 and 5 and the report are rank 0's, and a failing part ends the
-- whole job (the other ranks may be waiting for it).
local xsa = xsa or require "xsa"
local study = xsa.study
local registry = dofile(arg[0]:match("^(.-)[^/]*$") .. "parts.lua") -- the study's parts, beside this script
local PARTS = registry.load()
local NAMES = {}
for i, p in ipairs(PARTS) do NAMES[i] = p.name end
NAMES[#NAMES + 1] = "report"

-- Every name of a --skip/--only list is a part (else: which one, and the parts).
local function parts_ok(list)
  local known = {}
  for _, p in ipairs(NAMES) do known[p] = true end
  for p in list:gmatch("[^,%s]+") do
    if not known[p] then
      return false, string.format("unknown part '%s' (the parts: %s)", p, table.concat(NAMES, ", "))
    end
  end
  return true
end

local spec = {
  name = "run_all.lua",
  summary = "Runs the study's parts (scripts/parts.lua) in order, then report.lua.",
  writes = "what each part writes (their --help), into --out and --plots (cache/ and plots/; for --quick or\n" ..
    "a flag that changes what is computed, runs/LABEL/cache and runs/LABEL/plots for every part), then\n" ..
    "PLOTS/report.html. Prints each part's output and a table of wall times.",
  options = {
    {"quick", "bool", false, "pass --quick to every part (a fast small run)"},
    {"out", "string", "cache", "results folder"},
    {"plots", "string", "plots", "figures folder"},
    {"threads", "int", 0, "BLAS/engine threads for every part (0: leave as is)", min = 0, max = 1024},
    {"seed", "int", 0, "seed for every training part", min = 0},
    {"seeds", "string", nil, "seeds for parts 3-6 (N: seeds 0..N-1, or a list 3,7,11); part 1 uses --seed",
      check = function(v) return study.parse_seeds(v) ~= nil, select(2, study.parse_seeds(v)) end},
    {"data-seed", "int", nil, "passed to parts 3-6: hold the batch order at this seed", min = 0},
    {"init-seed", "int", nil, "passed to parts 3-6: hold the initial weights at this seed", min = 0},
    {"jobs", "int", 1, "passed to parts 3-6: seeds trained side by side in child processes (with --seeds)", min = 1},
    {"data-parallel", "bool", false, "passed to parts 3-6: under mpirun every rank trains each pair on its rows of every batch"},
    {"no-cache", "bool", false, "recompute cached results (and train past records: new records land beside)"},
    {"results", "string", "results", "passed to parts 1 and 3-6: the study's record"},
    {"from-records", "bool", false, "passed to parts 1 and 3-6: train nothing, use the runs that have records"},
    {"resume", "bool", true, "let unfinished training runs continue from their saved state (--no-resume: start over)"},
    {"format", "string", "png", "figure format: png or svg", one_of = {"png", "svg"}},
    {"skip", "string", "", "comma-separated parts to skip, e.g. part4,part6", check = function(v) return parts_ok(v) end},
    {"only", "string", "", "comma-separated parts to run, the others skipped, e.g. part3,report",
      check = function(v) return parts_ok(v) end,
      after = function(o) return o.only == "" or o.skip == "" or o.skip == nil, "give --skip or --only, not both" end},
  },
}

local shq = xsa.sys.shell_quote
local exe = xsa.experiment.exe -- $XSA_EXE, else the xsa running us (arg[-1])

-- The flags of this run a part takes, as an argv list: the shared ones
-- (folders, format, --quick, --no-cache, --threads) it has; the seed selection, records and training flags when
-- its options have them (a part with --seeds but no --seed gets --seed S as
-- the one-seed list "S,"); then the part's own run_all arguments.
local function part_argv(p, opts, common)
  local argv, has = {}, function(name) return registry.has(p, name) end
  local function add(...) for _, a in ipairs{...} do argv[#argv + 1] = a end end
  for _, c in ipairs(common) do if has(c[1]:sub(3)) then add(table.unpack(c)) end end -- the shared flags it has
  if opts.seeds and has("seeds") then add("--seeds", opts.seeds)
  elseif has("seed") then add("--seed", tostring(opts.seed))
  elseif has("seeds") then add("--seeds", tostring(opts.seed) .. ",") end
  if opts.given.results and has("results") then add("--results", xsa.sys.abspath(opts.results)) end
  if opts.from_records and has("from-records") then add("--from-records") end
  for _, k in ipairs{"data_seed", "init_seed", "jobs"} do
    local flag = k:gsub("_", "-")
    if opts.given[k] and has(flag) then add("--" .. flag, tostring(opts[k])) end
  end
  if not opts.resume and has("save-every") then add("--no-resume") end -- the parts that train
  if opts.data_parallel and has("jobs") then add("--data-parallel") end
  for _, a in ipairs(p.run_all or {}) do add(a) end
  return argv
end

-- Runs one step (a part or the report): in this process under mpirun (a
-- child of a rank is not part of the job), else as a child process.
-- Returns the wall-time text and whether it failed.
local function run_step(name, script, argv, size, rank)
  local t0 = xsa.progress.now()
  if size > 1 then
    if rank == 0 then io.stdout:write("\n=== ", name, ": ", script, " ", table.concat(argv, " "), " (in each of ", size, " ranks)\n") end
    io.stdout:flush()
    if name ~= "report" or rank == 0 then xsa.experiment.run_script(script, argv) end
    return string.format("%.1f s", xsa.progress.now() - t0), false
  end
  local cmd = {shq(exe()), shq(script)}
  for _, a in ipairs(argv) do cmd[#cmd + 1] = shq(a) end
  io.stdout:write("\n=== ", name, ": ", table.concat(cmd, " "), "\n")
  io.stdout:flush()
  local ok, how, code = os.execute(table.concat(cmd, " "))
  if how == "signal" or code == 130 then
    io.stderr:write("run_all: interrupted during ", name, "\n")
    os.exit(130)
  end
  return string.format("%.1f s", xsa.progress.now() - t0) .. (ok and "" or string.format(" (FAILED, status %s)", tostring(code))), not ok
end

study.main(function()
  local opts = study.setup(xsa.args.parse(arg, spec))
  local skip = {}
  for p in opts.skip:gmatch("[^,%s]+") do skip[p] = true end
  if opts.only ~= "" then
    local keep = {}
    for p in opts.only:gmatch("[^,%s]+") do keep[p] = true end
    for _, p in ipairs(NAMES) do skip[p] = not keep[p] end
  end
  local common = {{"--out", opts.out}, {"--plots", opts.plots}, {"--format", opts.format}}
  if opts.quick then common[#common + 1] = {"--quick"} end
  if opts.no_cache then common[#common + 1] = {"--no-cache"} end
  if opts.threads > 0 then common[#common + 1] = {"--threads", tostring(opts.threads)} end
  local size, rank = xsa.mpi.size(), xsa.mpi.rank()
  local steps = {}
  for i, p in ipairs(PARTS) do steps[i] = {p.name, p.path, part_argv(p, opts, common)} end
  steps[#steps + 1] = {"report", registry.dir .. "report.lua", {"--out", opts.out, "--plots", opts.plots}}
  local times, failed = {}, {}
  for _, s in ipairs(steps) do
    if skip[s[1]] then
      times[#times + 1] = {s[1], "skipped"}
    else
      local t, bad = run_step(s[1], s[2], s[3], size, rank)
      times[#times + 1] = {s[1], t}
      if bad then failed[#failed + 1] = s[1] end
    end
  end
  if rank == 0 then io.stdout:write("\n", study.md_table({"step", "wall time"}, times)) end
  if #failed > 0 then
    io.stderr:write("run_all: failed: ", table.concat(failed, ", "), "\n")
    os.exit(1)
  end
end)
