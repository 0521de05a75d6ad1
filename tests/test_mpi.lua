-- test_mpi.lua: xsa.mpi and what runs on it.
--
-- Always (one process, no mpirun): xsa.mpi is rank 0 of size 1 and every
-- collective returns its input; bad input is refused with clear errors.
-- With mpirun (and a build with MPI, not under the sanitizers), through
-- `mpirun --oversubscribe -np 2` (-np 3 once) with a timeout:
--   the API across ranks (values worked out by hand below),
--   a part 6 sweep whose cache entries and checkpoints equal, bit for bit,
--   those of one process with one BLAS thread (the thread count of a rank),
--   data-parallel training whose first 20 step losses equal the
--   one-process run's to 1e-5 relative (7 rows over 2 ranks: 3 + 4; 2 rows
--   over 3 ranks: one rank has none),
--   a failing rank: the job ends non-zero, naming the rank, the run and
--   the error, and the other rank's finished run stays cached.
-- Without mpirun these print one line saying why they are skipped.
local T = require "testing"
local xsa = xsa or require "xsa"

local mpi = xsa.mpi

-- Deep equality of plain data: nil when equal, else the first difference.
local function diff(a, b, path)
  path = path or "value"
  if type(a) ~= "table" or type(b) ~= "table" then
    if a == b then return nil end
    return string.format("%s: %s vs %s", path, tostring(a), tostring(b))
  end
  for k, v in pairs(a) do
    local d = diff(v, b[k], path .. "." .. tostring(k))
    if d then return d end
  end
  for k, v in pairs(b) do
    if a[k] == nil then return string.format("%s.%s: missing vs %s", path, tostring(k), tostring(v)) end
  end
  return nil
end
local function same(a, b, msg)
  local d = diff(a, b)
  if d then error((msg and (msg .. ": ") or "") .. d, 2) end
end
local shq = xsa.sys.shell_quote
local EXE = os.getenv("XSA_EXE") or "./xsa"
local ROOT = os.getenv("XSA_ROOT") or "."
if EXE:sub(1, 1) ~= "/" then EXE = ROOT .. "/" .. EXE end

----------------------------------------------------------------------------
-- one process

T.case("one process: rank 0 of 1, collectives return their input", function()
  T.eq(mpi.rank(), 0)
  T.eq(mpi.size(), 1)
  T.eq(mpi.local_size(), 1)
  T.eq(mpi.active(), false, "a plain xsa never starts MPI")
  T.ok(mpi.threads_per_rank() >= 1)
  local t = xsa.tensor{1.5, -2, 3}
  T.ok(rawequal(mpi.allreduce(t, "sum"), t), "in place: the same tensor back")
  same(t:tolist(), {1.5, -2, 3})
  mpi.allreduce(t, "mean")
  same(t:tolist(), {1.5, -2, 3}, "the mean of one rank is its value")
  mpi.allreduce(t) -- "sum" by default
  same(t:tolist(), {1.5, -2, 3})
  T.ok(rawequal(mpi.bcast(t, 0), t))
  same(t:tolist(), {1.5, -2, 3})
  T.ok(rawequal(mpi.bcast(t), t), "root 0 by default")
  mpi.barrier()
  same(mpi.sum({1, 2.5, -4}), {1, 2.5, -4})
  same(mpi.sum({}), {})
end)

T.case("allreduce and bcast write in place: the version counter moves", function()
  for _, f in ipairs{function(b) xsa.mpi.allreduce(b, "sum") end, function(b) xsa.mpi.allreduce(b, "mean") end} do
    local a = xsa.tensor({1, 2, 3}, {requires_grad = true})
    local b = xsa.tensor{4, 5, 6}
    local y = (a * b):sum()
    f(b)
    T.raises(function() y:backward() end, "modified by an inplace operation")
  end
  local a = xsa.tensor({1, 2, 3}, {requires_grad = true})
  T.raises(function() mpi.allreduce(a) end, "mpi.allreduce: in-place operation on a tensor that requires grad")
  xsa.no_grad(function() mpi.allreduce(a) end) -- allowed where in-place writes are
end)

T.case("one process: gather is a list of one JSON round trip", function()
  local g = mpi.gather({a = 1, b = {2, 3}, s = "x"})
  T.eq(#g, 1)
  T.eq(g[1].a, 1)
  same(g[1].b, {2, 3})
  T.eq(g[1].s, "x")
  same(mpi.gather(7), {7})
  same(mpi.gather("text"), {"text"})
  same(mpi.allgather({1, 2}), {{1, 2}}, "allgather: the same list of one")
end)

T.case("bad input is refused with a message", function()
  T.raises(function() mpi.allreduce(xsa.tensor{{1, 2}, {3, 4}}:T()) end, "contiguous")
  T.raises(function() mpi.allreduce(xsa.tensor({1, 2}, "int32")) end, "float32")
  T.raises(function() mpi.allreduce({1, 2}) end, "tensor")
  T.raises(function() mpi.allreduce(xsa.tensor{1}, "max") end, "invalid option 'max'")
  T.raises(function() mpi.bcast(xsa.tensor{1}, 1) end, "root")
  T.raises(function() mpi.bcast(xsa.tensor{1}, -1) end, "root")
  T.raises(function() mpi.bcast(xsa.tensor{1}, 0.5) end, "root")
  T.raises(function() mpi.gather(function() end) end, "json")
  T.raises(function() mpi.gather() end, "value expected")
  T.raises(function() mpi.sum({1, "x"}) end, "not a number")
  T.raises(function() mpi.sum(3) end, "table expected")
  local t = xsa.tensor{1}
  t:free()
  T.raises(function() mpi.allreduce(t) end, "freed")
  T.raises(function() mpi.allreduce_grads({}, 1) end, "list of 1 to 16 models")
  T.raises(function() mpi.allreduce_grads({xsa.tensor{1}}, 1) end, "models[1] is not a model")
  T.raises(function() mpi.abort(nil, 300) end, "code")
end)

T.case("allreduce_grads scales each model's gradient block by the weight", function()
  local m = xsa.gpt{vocab = 50, n_layer = 1, d_model = 8, n_head = 2, seq_len = 4, seed = 1}
  local x = xsa.tensor({{1, 2, 3, 4}, {5, 6, 7, 8}}, "int32")
  local loss = m:loss(x, x)
  loss:backward()
  local p = m:parameters()[1].tensor
  local before = p.grad:tolist()
  local vals = mpi.allreduce_grads({m}, 0.5, {4, 10})
  same(vals, {2, 5}, "the values times the weight (one rank: the sum is its own share)")
  local after = p.grad:tolist()
  local flat_b, flat_a = {}, {}
  local function flat(v, out) if type(v) == "table" then for _, e in ipairs(v) do flat(e, out) end else out[#out + 1] = v end end
  flat(before, flat_b)
  flat(after, flat_a)
  local nonzero = 0
  for i = 1, #flat_b do
    T.eq(flat_a[i], flat_b[i] * 0.5)
    if flat_b[i] ~= 0 then nonzero = nonzero + 1 end
  end
  T.ok(nonzero > 0, "the gradient was not all zero")
  same(mpi.allreduce_grads({m}, 1), {})
  T.raises(function() mpi.allreduce_grads({m}, -1) end, "weight")
  m:free()
end)

T.case("data-parallel rows: one process takes the whole batch", function()
  -- one process: the whole batch, weight 1
  local first, n, w = xsa.train.share(8)
  same({first, n, w}, {1, 8, 1})
end)

----------------------------------------------------------------------------
-- under mpirun

local why_not
if os.getenv("XSA_SANITIZED") then
  why_not = "the sanitizer build is made without MPI (make asan: MPI=0)"
elseif not mpi.built() then
  why_not = "this build has no MPI (install libopenmpi-dev openmpi-bin: sh mk/deps.sh --mpi; then make)"
elseif not os.execute("command -v mpirun >/dev/null 2>&1") then
  why_not = "mpirun is not installed (openmpi-bin: sh mk/deps.sh --mpi)"
elseif not os.execute("command -v timeout >/dev/null 2>&1") then
  why_not = "timeout (coreutils) is missing"
end
if why_not then
  print("test_mpi: the MPI tests are skipped: " .. why_not)
  T.done()
  return
end

local TMP = T.tmpdir()
-- root is allowed (CI runs as root); no single-copy (CMA) transfers between
-- ranks, which containers without ptrace rights refuse
local ENV = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 " ..
  "OMPI_MCA_btl_vader_single_copy_mechanism=none " ..
  "XSA_PROGRESS=log LUA_PATH=" .. shq(os.getenv("LUA_PATH") or "")

-- Runs `xsa args` under mpirun -np np (nil: without mpirun); returns the exit
-- status and the output (stdout and stderr). A hang is caught by CPU time,
-- which a loaded machine does not stretch: each process may use `cpu` seconds
-- (default 120; ulimit -t, soft: SIGXCPU, status 152), and a rank waiting for
-- another spins (Open MPI polls, yielding when oversubscribed), so a job stuck
-- in a collective reaches it. A hang that blocks is caught by the wall bound,
-- 10x that: at a load average of 14 on the Zen 3's 2 cores the -np 3 run took
-- 82 s of wall time, against the 120 s it was allowed before.
local function run(np, args, cpu)
  local log = TMP .. "/log"
  local launcher = np and string.format("mpirun --oversubscribe -np %d ", np) or ""
  cpu = cpu or 120
  local cmd = string.format("cd %s && ulimit -S -t %d; %s timeout %d %s%s %s >%s 2>&1", shq(TMP), cpu, ENV, cpu * 10,
    launcher, shq(EXE), args, shq(log))
  local t0 = os.time()
  local _, _, code = os.execute(cmd)
  local out = T.read(log) or ""
  io.stdout:write(string.format("  ran %s%s: status %s, %ds\n", launcher, args:sub(1, 80), tostring(code), os.time() - t0))
  return code, out
end

T.case("mpirun -np 2: rank, size, allreduce, bcast, gather, sum, errors", function()
  local script = TMP .. "/api.lua"
  T.writefile(script, [[
local m, r = xsa.mpi, xsa.mpi.rank()
local out = {rank = r, size = m.size(), active = m.active()}
local t = xsa.tensor{1, 2, 3} * (r + 1)          -- rank 0: 1 2 3, rank 1: 2 4 6
m.allreduce(t, "sum"); out.sum = t:tolist()
local u = xsa.tensor{1, -3} * (r + 1)
m.allreduce(u, "mean"); out.mean = u:tolist()
local b = xsa.tensor{r, 10 + r}
m.bcast(b, 1); out.bcast = b:tolist()
out.gather = m.gather({r = r, name = "rank" .. r})
out.allgather = m.allgather(r * 10)
out.total = m.sum({r + 0.5, 2})
out.bad_root = select(2, pcall(m.bcast, xsa.tensor{1}, 2))
out.bad_dtype = select(2, pcall(m.allreduce, xsa.tensor({1}, "int32")))
local ok, bad = pcall(m.gather, function() end)
out.bad_gather = bad
m.barrier()
xsa.json.write_file(arg[1] .. r .. ".json", out)
]])
  local code, log = run(2, shq(script) .. " " .. shq(TMP .. "/api-"), 60)
  T.eq(code, 0, log)
  local a, b = xsa.json.read_file(TMP .. "/api-0.json"), xsa.json.read_file(TMP .. "/api-1.json")
  T.ok(a and b, "both ranks wrote their results")
  if not (a and b) then return end
  same({a.rank, b.rank, a.size, b.size, a.active, b.active}, {0, 1, 2, 2, true, true})
  for _, x in ipairs{a, b} do
    same(x.sum, {3, 6, 9})
    same(x.mean, {1.5, -4.5})
    same(x.bcast, {1, 11}, "root 1's tensor everywhere")
    same(x.total, {2, 4})
    T.ok(tostring(x.bad_root):find("root", 1, true), tostring(x.bad_root))
    T.ok(tostring(x.bad_dtype):find("float32", 1, true), tostring(x.bad_dtype))
    T.ok(tostring(x.bad_gather):find("json", 1, true), tostring(x.bad_gather))
  end
  same(a.gather, {{r = 0, name = "rank0"}, {r = 1, name = "rank1"}}, "rank 0 gets a list by rank + 1")
  T.eq(b.gather, nil, "the other ranks get nil")
  same(a.allgather, {0, 10}, "allgather: every rank's value on rank 0")
  same(b.allgather, {0, 10}, "and on rank 1")
end)

-- The cache entries of a folder as {file name = entry}, without what
-- differs between any two runs (wall and CPU times, the time of saving, where and
-- when it ran) and with the folder itself in paths replaced by "OUT".
local TIMES = {elapsed_s = true, train_s = true, eval_s = true, tokens_per_s = true, saved_at = true, provenance = true,
  cpu_s = true}
local function strip(v, dir)
  if type(v) == "string" then return (v:gsub(dir:gsub("%p", "%%%0"), "OUT")) end
  if type(v) ~= "table" then return v end
  local o = {}
  for k, x in pairs(v) do if not TIMES[k] then o[k] = strip(x, dir) end end
  return o
end
local function entries(dir)
  local out, n = {}, 0
  local p = io.popen("ls " .. shq(dir))
  for f in p:lines() do
    if f:match("%.json$") then
      out[f] = strip(xsa.json.read_file(dir .. "/" .. f), dir)
      n = n + 1
    end
  end
  p:close()
  return out, n
end

T.case("mpirun -np 2: a part 6 sweep equals one process's, bit for bit", function()
  local flags = "--quick --seeds 2 --lambdas 0,1 --threads 1"
  local one, two = TMP .. "/one", TMP .. "/two"
  local c1, l1 = run(nil, shq(ROOT .. "/scripts/part6_lambda_sweep.lua") .. " " .. flags ..
    " --out " .. shq(one .. "/cache") .. " --results " .. shq(one .. "/records") .. " --plots " .. shq(one .. "/plots"), 180)
  T.eq(c1, 0, l1)
  local c2, l2 = run(2, shq(ROOT .. "/scripts/part6_lambda_sweep.lua") .. " " .. flags ..
    " --out " .. shq(two .. "/cache") .. " --results " .. shq(two .. "/records") .. " --plots " .. shq(two .. "/plots"), 180)
  T.eq(c2, 0, l2)
  local e1, n1 = entries(one .. "/cache")
  local e2, n2 = entries(two .. "/cache")
  T.eq(n1, 2, "2 seeds, one group each (SA, XSA(1))")
  T.eq(n2, n1)
  for f, e in pairs(e1) do same(e2[f], e, f) end
  -- the checkpoints, byte for byte
  local p = io.popen("cd " .. shq(one .. "/cache") .. " && ls *.safetensors")
  local k = 0
  for f in p:lines() do
    k = k + 1
    T.ok(os.execute("cmp -s " .. shq(one .. "/cache/" .. f) .. " " .. shq(two .. "/cache/" .. f)), f .. " differs")
  end
  p:close()
  T.eq(k, 4, "each seed's SA and XSA(1)")
  -- the work was shared: each rank trained some runs (its progress lines)
  T.ok(select(2, l2:gsub("cache miss", "")) == 2, "every group computed once:\n" .. l2)
  T.ok(T.read(two .. "/plots/part6_lambda_sweep.png") ~= nil or not os.execute("command -v gnuplot >/dev/null"),
    "rank 0 drew the figure")
  -- run again: every run is a hit, on every rank
  local c3, l3 = run(2, shq(ROOT .. "/scripts/part6_lambda_sweep.lua") .. " " .. flags ..
    " --out " .. shq(two .. "/cache") .. " --results " .. shq(two .. "/records") .. " --plots " .. shq(two .. "/plots"), 120)
  T.eq(c3, 0, l3)
  T.ok(not l3:find("cache miss", 1, true), "nothing recomputed:\n" .. l3)
  -- --no-cache: every run recomputed once, by one rank; the read-back hits
  local c4, l4 = run(2, shq(ROOT .. "/scripts/part6_lambda_sweep.lua") .. " " .. flags .. " --no-cache" ..
    " --out " .. shq(two .. "/cache") .. " --results " .. shq(two .. "/records") .. " --plots " .. shq(two .. "/plots"), 180)
  T.eq(c4, 0, l4)
  T.eq(select(2, l4:gsub("%-%-no%-cache, recomputing", "")), 2, "each group once:\n" .. l4)
  local e4 = entries(two .. "/cache")
  for f, e in pairs(e1) do same(e4[f], e, f .. " after --no-cache") end
  -- another machine: the records alone, no cache entry and no checkpoint
  local c5, l5 = run(2, shq(ROOT .. "/scripts/part6_lambda_sweep.lua") .. " " .. flags .. " --from-records" ..
    " --out " .. shq(two .. "/fresh") .. " --results " .. shq(two .. "/records") .. " --plots " .. shq(two .. "/plots"), 120)
  T.eq(c5, 0, l5)
  T.ok(not l5:find("cache miss", 1, true) and select(2, l5:gsub("record: part6", "")) >= 2,
    "every run read from its record:\n" .. l5)
end)

-- Every part of the study's registry, in its order, in one process and
-- under mpirun -np 2, each into its own folders (a later part reads an
-- earlier one's runs there): the cache entries and the summary's numbers
-- are the same, bit for bit. Small settings (--quick, a 1-layer model of
-- width 32, 4 steps: part 7's --quick warms up over 3) with 2 seeds where a part has seeds, so that both
-- ranks get runs. A summary's cache status ("miss" here, "hit" or "record"
-- where rank 0 read back another rank's run; also in its table), the entry
-- it names (the cache's or the record's) and the checkpoints (a record
-- holds none), its records and times differ.
local SMALL = {quick = true, ["n-layer"] = 1, ["d-model"] = 32, ["n-head"] = 2, steps = 4, ["eval-every"] = 2,
  ["eval-batches"] = 1, ["probe-batches"] = 1, seeds = 2, threads = 1}
local NOT_NUMBERS = {cache = true, records = true, wall_s = true, figures = true, reused = true, finished_at = true,
  entry = true, table = true, checkpoints = true, timing = true}
local function summary(dir, name)
  local j = xsa.json.read_file(dir .. "/cache/summary/" .. name .. ".json")
  local function drop(v)
    if type(v) ~= "table" then return v end
    local o = {}
    for k, x in pairs(v) do if not NOT_NUMBERS[k] then o[k] = drop(x) end end
    return o
  end
  return j and drop(strip(j, dir))
end
local PARTS = dofile(ROOT .. "/scripts/parts.lua")
for _, d in ipairs(PARTS.load()) do
  T.case("mpirun -np 2: " .. d.name .. " gives what one process gives", function()
    -- a part whose plan fixes its models (no --n-layer: parts 8 and 9) runs
    -- its own --quick; the others are made small and given 2 seeds
    local shrink = PARTS.has(d, "n-layer")
    local function flags(dir)
      local f = {}
      local small = setmetatable({out = dir .. "/cache", results = dir .. "/records", plots = dir .. "/plots"}, {__index = SMALL})
      for _, k in ipairs(shrink and {"quick", "n-layer", "d-model", "n-head", "steps", "eval-every", "eval-batches",
        "probe-batches", "seeds", "threads", "out", "results", "plots"} or {"quick", "threads", "out", "results", "plots"}) do
        local v = small[k]
        if PARTS.has(d, k) then f[#f + 1] = "--" .. k .. (v == true and "" or " " .. shq(tostring(v))) end
      end
      return table.concat(f, " ")
    end
    for _, np in ipairs{false, 2} do
      local code, log = run(np or nil, shq(d.path) .. " " .. flags(TMP .. (np and "/parts2" or "/parts1")), 900)
      T.eq(code, 0, log)
    end
    local one, two = TMP .. "/parts1", TMP .. "/parts2"
    local e1, n1 = entries(one .. "/cache")
    local e2, n2 = entries(two .. "/cache")
    T.eq(n2, n1, "as many cache entries")
    for f, e in pairs(e1) do same(strip(e2[f] or {}, two), strip(e, one), f) end
    local s1, s2 = summary(one, d.name), summary(two, d.name)
    T.ok(s1 ~= nil, "one process wrote the summary")
    same(s2, s1, d.name .. "'s summary")
  end)
end

T.case("data-parallel: 20 step losses within 1e-5 of one process, a pair and a group of three (batch 7 over 2 ranks, 2 over 3)", function()
  local script = TMP .. "/dp.lua"
  T.writefile(script, [[
local out, batch = arg[1], tonumber(arg[2])
local train, val = xsa.data.tinystories{seq_len = 16, max_tokens = 12000, batch = batch, seed = 0}
local sa = xsa.gpt{seed = 0, n_layer = 1, d_model = 32, n_head = 2, seq_len = 16}
local xm = sa:clone{attention = "xsa", lambda = 1}
local r = xsa.train.pair(sa, xm, train, val, {steps = 20, eval_every = 10, eval_batches = 2,
  data_parallel = true, progress = false})
-- a group of three (SA, XSA at 0.5 and 1) through train.runs, as the grid trains them
local t2, v2 = xsa.data.tinystories{seq_len = 16, max_tokens = 12000, batch = batch, seed = 1}
local base = xsa.gpt{seed = 1, n_layer = 1, d_model = 32, n_head = 2, seq_len = 16}
local ms = {base, base:clone{attention = "xsa", lambda = 0.5}, base:clone{attention = "xsa", lambda = 1}}
local g = xsa.train.runs({{model = ms[1], label = "SA"}, {model = ms[2], label = "XSA 0.5"}, {model = ms[3], label = "XSA 1"}},
  t2, v2, {steps = 20, eval_every = 10, eval_batches = 2, data_parallel = true, progress = false})
local p = 0
for _, m in ipairs{sa, xm, ms[1], ms[2], ms[3]} do for _, e in ipairs(m:parameters()) do p = p + e.tensor:sum():item() end end
local all = xsa.mpi.gather(p)
if xsa.mpi.rank() == 0 then
  xsa.json.write_file(out, {sa = r.sa.step_loss, xsa = r.xsa.step_loss, sa_val = r.sa.val, xsa_val = r.xsa.val,
    final = {r.sa.final_val, r.xsa.final_val}, g1 = g.runs[1].step_loss, g2 = g.runs[2].step_loss,
    g3 = g.runs[3].step_loss, gfinal = {g.runs[1].final_val, g.runs[2].final_val, g.runs[3].final_val}, sums = all})
end
]])
  -- 7 rows over 2 ranks: 3 + 4; 2 over 3: 0 + 1 + 1 (one rank has none)
  for _, case in ipairs{{2, 7}, {3, 2}} do
    local np, batch = case[1], case[2]
    local f1, f2 = TMP .. "/dp1-" .. batch .. ".json", TMP .. "/dp" .. np .. "-" .. batch .. ".json"
    local c1, l1 = run(nil, shq(script) .. " " .. shq(f1) .. " " .. batch, 120)
    T.eq(c1, 0, l1)
    local c2, l2 = run(np, shq(script) .. " " .. shq(f2) .. " " .. batch, 120)
    T.eq(c2, 0, l2)
    local a, b = xsa.json.read_file(f1), xsa.json.read_file(f2)
    T.ok(a and b, "both wrote results")
    if not (a and b) then return end
    T.eq(#a.sa, 20)
    T.eq(#b.sa, 20)
    local worst = 0
    T.eq(#b.g3, 20, "the group's third run")
    for _, k in ipairs{"sa", "xsa", "sa_val", "xsa_val", "final", "g1", "g2", "g3", "gfinal"} do
      for i, v in ipairs(a[k]) do
        local rel = math.abs(b[k][i] - v) / math.abs(v)
        worst = math.max(worst, rel)
        T.ok(rel <= 1e-5, string.format("%s[%d]: %.9g vs %.9g (relative %.2e)", k, i, v, b[k][i], rel))
      end
    end
    io.stdout:write(string.format("  data-parallel over %d ranks, batch %d: max relative difference %.2e\n", np, batch, worst))
    T.eq(#b.sums, np)
    for r = 2, np do T.eq(b.sums[r], b.sums[1], "every rank holds the same weights") end
  end
end)

T.case("a failing rank ends the job, naming the rank, the run and the error", function()
  local script = TMP .. "/fail.lua"
  T.writefile(script, [[
local ex = xsa.experiment{name = "failing", script = "fail.lua",
  options = xsa.study.options({}), argv = {"--out", arg[1], "--plots", arg[1] .. "/plots"}}
ex:main(function()
  local res = ex:run({{key = "fine", run = function()
      return ex:cached(function() return {value = 42} end, {name = "failing-fine", config = {run = "fine"}})
    end},
    {key = "broken", run = function()
      os.execute("sleep 1") -- the other rank's run finishes first
      error("deliberate failure in broken")
    end}})
  if res then print("rank 0 went on") end
end)
]])
  local code, log = run(2, shq(script) .. " " .. shq(TMP .. "/fail"), 60)
  T.ok(code ~= 0 and code ~= 124 and code ~= 128 + 24, "the job ended with a failure, not a time bound: status " ..
    tostring(code))
  T.ok(not log:find("on signal", 1, true), "no rank was killed (SIGXCPU: a rank left waiting):\n" .. log)
  T.ok(log:find("rank 1 of 2", 1, true), "names the rank:\n" .. log)
  T.ok(log:find("run broken failed", 1, true), "names the run:\n" .. log)
  T.ok(log:find("deliberate failure in broken", 1, true), "names the error:\n" .. log)
  T.ok(not log:find("rank 0 went on", 1, true), "rank 0 did not go on as if all was well")
  local _, n = entries(TMP .. "/fail")
  T.eq(n, 1, "the finished run stayed cached")
end)

-- Part 5 under mpirun with --train: its seeds go to the ranks, each of which
-- trains part 3 for its seed in a child process. Once part 5 (units, but no
-- `ranks` flag) waited in the first wave's allgather forever, and with
-- --train part 3 was trained for its first seed only (the --seed flag of the
-- child had the first seed's value).
T.case("mpirun -np 2 part5 --train: no hang, each seed's part 3 trained", function()
  local out = TMP .. "/p5"
  local code, log = run(2, string.format("%s --quick --seeds 2 --train --steps 4 --out %s --plots %s",
    shq(ROOT .. "/scripts/part5_bias_trained.lua"), shq(out), shq(out .. "/plots")))
  -- (it used 15 s of CPU in all, 85 s of wall time at a load average of 14)
  T.eq(code, 0, "status (124, 152: a time bound, a hang):\n" .. log:sub(-3000))
  local s = xsa.json.read_file(out .. "/summary/part5.json")
  T.ok(s, "part 5's summary")
  for seed = 0, 1 do
    T.ok(log:find("cache miss: part3 paired training (seed " .. seed .. ")", 1, true), "part 3 of seed " .. seed .. ":\n" .. log)
    T.ok(log:find("seed " .. seed .. ": ", 1, true), log)
  end
end)

T.done()
