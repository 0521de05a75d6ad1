-- run_all.lua: every part of the study in order (parts 1-7), then the report.
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

local PARTS = {"part1", "part2", "part3", "part4", "part5", "part6", "report"}

-- Every name of a --skip/--only list is a part (else: which one, and the parts).
local function parts_ok(list)
  local known = {}
  for _, p in ipairs(PARTS) do known[p] = true end
  for p in list:gmatch("[^,%s]+") do
    if not known[p] then
      return false, string.format("unknown part '%s' (the parts: %s)", p, table.concat(PARTS, ", "))
    end
  end
  return true
end

local spec = {
  name = "run_all.lua",
  summary = "Runs part1 ... part6 in order, then report.lua.",
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

study.main(function()
  local opts = study.setup(xsa.args.parse(arg, spec))
  local skip = {}
  for p in opts.skip:gmatch("[^,%s]+") do skip[p] = true end
  if opts.only ~= "" then
    local keep = {}
    for p in opts.only:gmatch("[^,%s]+") do keep[p] = true end
    for _, p in ipairs(PARTS) do skip[p] = not keep[p] end
  end
  local common = {"--out", opts.out, "--plots", opts.plots, "--format", opts.format}
  if opts.quick then common[#common + 1] = "--quick" end
  if opts.no_cache then common[#common + 1] = "--no-cache" end
  if opts.threads > 0 then
    common[#common + 1] = "--threads"
    common[#common + 1] = tostring(opts.threads)
  end
  local single = {"--seed", tostring(opts.seed)}
  local seeded = opts.seeds and {"--seeds", opts.seeds} or {"--seed", tostring(opts.seed)}
  for _, l in ipairs{single, seeded} do
    if opts.given.results then l[#l + 1] = "--results"; l[#l + 1] = xsa.sys.abspath(opts.results) end
    if opts.from_records then l[#l + 1] = "--from-records" end
  end
  for _, k in ipairs{"data_seed", "init_seed", "jobs"} do
    if opts.given[k] then
      seeded[#seeded + 1] = "--" .. k:gsub("_", "-")
      seeded[#seeded + 1] = tostring(opts[k])
    end
  end
  if not opts.resume then seeded[#seeded + 1] = "--no-resume" end
  if opts.data_parallel then seeded[#seeded + 1] = "--data-parallel" end
  -- part 7 has no --seed: one seed is the list "S,"
  local seeded7 = {table.unpack(seeded)}
  if not opts.seeds then seeded7[1], seeded7[2] = "--seeds", tostring(opts.seed) .. "," end
  local size, rank = xsa.mpi.size(), xsa.mpi.rank()
  local say = rank == 0 and function(...) io.stdout:write(...) end or function() end
  local steps = {
    {"part1", "part1_bias.lua", single},
    {"part2", "part2_geometry.lua", {"--animate"}},
    {"part3", "part3_train.lua", seeded},
    {"part4", "part4_seqlen.lua", seeded},
    {"part5", "part5_bias_trained.lua", seeded},
    {"part6", "part6_lambda_sweep.lua", seeded},
    {"part7", "part7_recipe.lua", seeded7},
    {"report", "report.lua", {}},
  }
  local x = exe()
  local times, failed = {}, {}
  for _, s in ipairs(steps) do
    if skip[s[1]] then
      times[#times + 1] = {s[1], "skipped"}
    elseif size > 1 then
      -- in this rank (see the top); the report reads what rank 0 wrote
      local argv = {}
      for _, a in ipairs(common) do argv[#argv + 1] = a end
      for _, a in ipairs(s[3]) do argv[#argv + 1] = a end
      say("\n=== ", s[1], ": ", s[2], " ", table.concat(argv, " "), " (in each of ", size, " ranks)\n")
      io.stdout:flush()
      local t0 = xsa.progress.now()
      if s[1] ~= "report" or rank == 0 then xsa.experiment.run_script(opts.root .. "/scripts/" .. s[2], argv) end
      times[#times + 1] = {s[1], string.format("%.1f s", xsa.progress.now() - t0)}
    else
      local argv = {shq(x), shq(opts.root .. "/scripts/" .. s[2])}
      for _, a in ipairs(common) do
        -- the report takes no --format/--quick semantics but accepts them
        argv[#argv + 1] = shq(a)
      end
      for _, a in ipairs(s[3]) do argv[#argv + 1] = shq(a) end
      local cmd = table.concat(argv, " ")
      io.stdout:write("\n=== ", s[1], ": ", cmd, "\n")
      io.stdout:flush()
      local t0 = xsa.progress.now()
      local ok, how, code = os.execute(cmd)
      local dt = xsa.progress.now() - t0
      if how == "signal" or code == 130 then
        io.stderr:write("run_all: interrupted during ", s[1], "\n")
        os.exit(130)
      end
      times[#times + 1] = {s[1], string.format("%.1f s", dt) .. (ok and "" or string.format(" (FAILED, status %s)", tostring(code)))}
      if not ok then failed[#failed + 1] = s[1] end
    end
  end
  say("\n", study.md_table({"step", "wall time"}, times))
  if #failed > 0 then
    io.stderr:write("run_all: failed: ", table.concat(failed, ", "), "\n")
    os.exit(1)
  end
end)
