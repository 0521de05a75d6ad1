-- test_scripts.lua: every script of scripts/ run end to end through the xsa
-- executable ($XSA_EXE) with --quick on the real TinyStories data, results
-- and figures in a temporary folder. Checks the files, the JSON fields, that
-- numbers are finite, cache hits / misses / --no-cache / a corrupt entry,
-- part 5's "run part 3 first", Ctrl-C during training, run_all and the report.
-- Needs the data (the checkout's data/ or $XSA_DATA; missing data fails) and
-- gnuplot (without it the figure checks say "skip").
local T = require "testing"
local xsa = xsa or require "xsa"

local EXE = os.getenv("XSA_EXE")
local ROOT = os.getenv("XSA_ROOT") or "."
if EXE and EXE:sub(1, 1) ~= "/" then EXE = ROOT .. "/" .. EXE end

local shq = xsa.sys.shell_quote

local read = T.read

local function exists(p) return read(p) ~= nil end

local TMP = os.tmpname()
os.remove(TMP)
xsa.sys.mkdir(TMP)
local OUT, PLOTS = TMP .. "/out", TMP .. "/plots"

-- Runs a script; returns exit code, stdout, stderr. Every run records into
-- a folder of its own ($XSA_RESULTS), so what is tested here is the cache
-- (the record comes before it: test_record.lua).
local runs = 0
local function run(script, flags, env)
  local o, e = TMP .. "/stdout", TMP .. "/stderr"
  runs = runs + 1
  env = string.format("XSA_RESULTS=%s %s", shq(TMP .. "/records" .. runs), env or "")
  local cmd = string.format("cd %s && %s %s %s %s >%s 2>%s", shq(TMP), env, shq(EXE),
    shq(ROOT .. "/scripts/" .. script), flags, shq(o), shq(e))
  local t0 = os.time()
  local ok, how, code = os.execute(cmd)
  local out, err = read(o) or "", read(e) or ""
  io.stdout:write(string.format("  ran %s %s: status %s, %ds\n", script, flags, tostring(code), os.time() - t0))
  return code, out, err
end

local function q(extra) return "--quick --out " .. shq(OUT) .. " --plots " .. shq(PLOTS) .. " " .. (extra or "") end

local function summary(part) return assert(xsa.json.read_file(OUT .. "/summary/" .. part .. ".json")) end
local function summary_path(dir) return dir .. "/summary/part3.json" end

local finite = xsa.numbers.finite

local function all_finite(t, path)
  local ok, why = xsa.numbers.all_finite(t, path)
  T.ok(ok, why)
end

local function count(s, needle)
  local n, i = 0, 1
  while true do
    local a, b = s:find(needle, i, true)
    if not a then return n end
    n, i = n + 1, b + 1
  end
end

local function have_data() return xsa.data.find(xsa.data.TEXT_NAMES) ~= nil end

if not EXE then
  print("skip: XSA_EXE not set")
  T.done()
end
local DATA = have_data()
-- under the sanitizers everything runs ~10x slower: the long cases are left out
local SANITIZED = os.getenv("XSA_SANITIZED") ~= nil
local function long_case(name, fn)
  if SANITIZED then
    print("skip under sanitizers: " .. name)
    return
  end
  T.case(name, fn)
end
local GNUPLOT = xsa.plot.gnuplot() ~= nil

local function figure_ok(name, ext)
  ext = ext or "png"
  T.ok(exists(PLOTS .. "/" .. name .. ".dat"), name .. ".dat missing")
  T.ok(exists(PLOTS .. "/" .. name .. ".gp"), name .. ".gp missing")
  if GNUPLOT then
    local img = read(PLOTS .. "/" .. name .. "." .. ext)
    T.ok(img and #img > 1000, name .. "." .. ext .. " missing or empty")
  end
end

T.case("every file in scripts/ runs or says what it is; --help says what it writes (issue 39)", function()
  local p = io.popen("cd " .. shq(ROOT) .. " && find scripts -name '*.lua' | LC_ALL=C sort")
  local files = {}
  for f in p:lines() do files[#files + 1] = f end
  p:close()
  T.ok(#files >= 20, "the scripts: " .. #files)
  for _, f in ipairs(files) do
    local code, out, err = run(f:sub(#"scripts/" + 1), "--help")
    T.eq(code, 0, f .. " --help: " .. err)
    if out:find("^usage: ") then
      T.ok(out:find("^usage: xsa " .. ROOT:gsub("%p", "%%%0") .. "/" .. f:gsub("%p", "%%%0")), f .. ": the path it was run as: " .. out)
      T.ok(out:find("Writes") or out:find("writes"), f .. " --help says what it writes: " .. out)
      T.ok(not out:find("unused"), f .. " lists a flag it does not use: " .. out)
    else -- a library kept among the scripts: its leading comment, and that it does nothing alone
      T.ok(out:find("is loaded by other scripts; run alone it does nothing", 1, true), f .. ": " .. out)
      T.ok(#out > 200, f .. " says what it is: " .. out)
      code = run(f:sub(#"scripts/" + 1), "")
      T.eq(code, 2, f .. " run alone: nothing ran, status 2")
    end
  end
  -- a user's own experiment, elsewhere under another name: its usage names it as run
  local mine = TMP .. "/elsewhere/my_lambda.lua"
  os.execute("mkdir -p " .. shq(TMP .. "/elsewhere") .. " && cp " .. shq(ROOT .. "/scripts/part1_bias.lua") .. " " .. shq(mine))
  local o = io.popen(string.format("cd %s && %s elsewhere/my_lambda.lua --help 2>&1", shq(TMP), shq(EXE)))
  local out = o:read("a")
  o:close()
  T.ok(out:find("^usage: xsa elsewhere/my_lambda.lua %[options%]"), out)
end)

T.case("quick and non-default runs write apart, in runs/LABEL/, never over the default run's figures", function()
  -- a checkout of its own (XSA_ROOT, its script inside it: the study's defaults are under the checkout)
  local root = TMP .. "/root"
  local env = "XSA_ROOT=" .. shq(root) .. " XSA_DATA=" .. shq(ROOT .. "/data")
  -- (part 2 with geometry.lua, the drawing it loads from beside itself)
  os.execute("mkdir -p " .. shq(root .. "/scripts") .. " && cp " .. shq(ROOT .. "/scripts/part2_geometry.lua") .. " " ..
    shq(ROOT .. "/scripts/geometry.lua") .. " " .. shq(root .. "/scripts/") .. " && ln -s " .. shq(ROOT .. "/lua") .. " " ..
    shq(root .. "/lua")) -- a checkout, not an install
  local function run(_, flags, e)
    local p = io.popen(string.format("cd %s && %s %s %s %s 2>&1", shq(TMP), e, shq(EXE), shq(root .. "/scripts/part2_geometry.lua"), flags))
    local out = p:read("a")
    return select(3, p:close()), out, out
  end
  local code, _, err = run("part2_geometry.lua", "", env)
  T.eq(code, 0, err)
  local png = read(root .. "/plots/part2_geometry.png")
  T.ok(png and #png > 1000, "the default run's figure in plots/")
  code, _, err = run("part2_geometry.lua", "--quick", env)
  T.eq(code, 0, err)
  code, _, err = run("part2_geometry.lua", "--lambda 0.5 --format png", env)
  T.eq(code, 0, err)
  T.eq(read(root .. "/plots/part2_geometry.png"), png, "plots/ untouched by the other runs")
  T.ok(read(root .. "/runs/quick/plots/part2_geometry.png"), "--quick: runs/quick/plots")
  T.ok(read(root .. "/runs/lambda-0.5/plots/part2_geometry.png"), "--lambda 0.5 (--format is housekeeping): runs/lambda-0.5/plots")
  T.ok(read(root .. "/runs/lambda-0.5/cache/summary/part2.json"), "and its summary in runs/lambda-0.5/cache")
  T.eq(xsa.study.run_label({given = {quick = true, seeds = true, threads = true, out = true}, quick = true, seeds = "2"}),
    "quick_seeds-2")
  T.eq(xsa.study.run_label({given = {threads = true, no_cache = true, format = true}, threads = 2}), nil, "housekeeping only")
  T.eq(xsa.study.run_label({given = {seq_lens = true, lr = true}, seq_lens = {64, 128}, lr = 0.003}), "lr-0.003_seq-lens-64,128")
  local long = xsa.study.run_label({given = {v = true}, v = string.rep("x/y ", 40)})
  T.ok(#long <= 80 and not long:find("[/ ]"), long)
end)

T.case("--help of every script", function()
  local scripts = {"run_all.lua", "report.lua"}
  for i, d in ipairs(dofile(ROOT .. "/scripts/parts.lua").load()) do table.insert(scripts, i, d.script) end
  for _, s in ipairs(scripts) do
    local code, out = run(s, "--help")
    T.eq(code, 0, s .. " --help status")
    T.ok(out:find("usage: xsa " .. ROOT .. "/scripts/" .. s .. " ", 1, true), "the path it was run as: " .. s .. ": " .. out)
    if s:match("^part[134567]_") then -- the notebook's parts (parts 8-10 take the plan's flags)
      for _, flag in ipairs{"--steps", "--batch", "--lr", "--max-tokens", "--eval-every", "--seed", "--threads",
        "--out", "--no-cache", "--quick"} do
        if not (s:match("^part1_") and (flag == "--steps" or flag == "--lr" or flag == "--eval-every")) then
          T.ok(out:find(flag, 1, true), s .. " lacks " .. flag)
        end
      end
    end
  end
  local function default_of(out, flag) return out:match("%-%-" .. flag .. " [%u,%.]+%s+[^\n]-%(default ([^)]+)%)") end
  local _, out = run("part1_bias.lua", "--help")
  T.eq(default_of(out, "max%-tokens"), "80000")
  T.eq(default_of(out, "probe%-batches"), "8")
  T.eq(default_of(out, "batch"), "16")
  _, out = run("part5_bias_trained.lua", "--help")
  T.eq(default_of(out, "probe%-batches"), "8", "part 5 probes 8 batches")
  T.eq(default_of(out, "probe%-tokens"), "80000", "of an 80k-token set")
  T.eq(default_of(out, "probe%-batch"), "16")
  _, out = run("part6_lambda_sweep.lua", "--help")
  T.eq(default_of(out, "probe%-batches"), "8", "part 6 probes as part 5 does (it reuses part 5's probes)")
  T.eq(default_of(out, "probe%-tokens"), "80000")
  for _, sc in ipairs{"part3_train.lua", "part4_seqlen.lua", "part5_bias_trained.lua", "part6_lambda_sweep.lua", "run_all.lua"} do
    _, out = run(sc, "--help")
    T.ok(out:find("--seeds", 1, true) and out:find("--data-seed", 1, true) and out:find("--init-seed", 1, true), sc .. " seeds flags")
  end
  local code, _, err = run("part3_train.lua", "--stepz 3")
  T.eq(code, 2)
  T.ok(err:find("unknown option '--stepz'", 1, true), err)
end)

T.case("part2: geometry figure and animation", function()
  local code, out, err = run("part2_geometry.lua", q("--animate --lambda 1"))
  T.eq(code, 0, err)
  figure_ok("part2_geometry")
  if GNUPLOT then
    local gif = read(PLOTS .. "/part2_geometry_sweep.gif")
    T.ok(gif and gif:sub(1, 3) == "GIF", "animated GIF")
    T.eq(count(gif, "\33\249\4"), 5) -- --quick: 5 frames
    -- the PNG's colours in every frame that draws them (gnuplot's "optimize"
    -- gave every frame the first one's palette: the removed part and Z black)
    local pal = require("images").gif_palettes(gif)
    for i = 2, 5 do
      T.ok(pal[i][dofile(ROOT .. "/scripts/geometry.lua").colors.removed] and pal[i][xsa.plot.colors.xsa], "frame " .. i .. ": removed and Z in colour")
    end
  end
  local s = summary("part2")
  T.near(s.result.cos_zv, 0, 1e-12) -- lambda = 1: Z is orthogonal to V
  T.ok(out:find("cos(Z,V) = 0.0000", 1, true), out)
end)

-- the data ships with the checkout, so its absence is a failure, not a skip
T.case("the TinyStories corpus is found", function() T.ok(DATA, "xsa.data.find(TEXT_NAMES)") end)
if not DATA then T.done() end

T.case("part1: probe, figure, cache hit / miss / --no-cache / corrupt", function()
  local code, out, err = run("part1_bias.lua", q())
  T.eq(code, 0, err)
  T.ok(err:find("cache miss:", 1, true), err)
  figure_ok("part1_bias")
  local s = summary("part1")
  T.eq(#s.result.layers, 2)
  for _, l in ipairs(s.result.layers) do
    for _, k in ipairs{"value_cos", "self_attn", "pre_cos", "pre_cos_pos1"} do T.ok(finite(l[k]), k) end
    T.ok(l.self_attn > 0 and l.self_attn <= 1, "a_ii is a probability")
    -- position 0 (y = v, cos 1) is left out of the reported value
    T.ok(l.pre_cos > l.pre_cos_pos1, "all positions above positions >= 1")
  end
  -- the protocol: the validation loader of the --max-tokens set (80k by default)
  T.eq(s.result.split, "val")
  T.eq(s.config.split, "val")
  T.eq(s.result.probe_batches, 2)
  T.ok(s.result.tokens <= s.result.val_windows * 64, "only validation windows")
  T.ok(out:find("| layer |", 1, true) and out:find("positions ≥ 1", 1, true), out)
  T.ok(s.figures[1].caption:find("position 0", 1, true), "the figure's caption explains positions >= 1")
  code, _, err = run("part1_bias.lua", q())
  T.eq(code, 0)
  T.ok(err:find("cache hit:", 1, true), "second run: " .. err)
  code, _, err = run("part1_bias.lua", q("--seed 1"))
  T.ok(code == 0 and err:find("cache miss:", 1, true), "changed flag: " .. err)
  code, _, err = run("part1_bias.lua", q("--no-cache"))
  T.ok(code == 0 and err:find("--no-cache, recomputing", 1, true), "--no-cache: " .. err)
  local f = assert(io.open(s.entry, "w"))
  f:write('{"key": "truncated')
  f:close()
  code, _, err = run("part1_bias.lua", q())
  T.eq(code, 0)
  T.ok(err:find("warning: cache entry", 1, true) and err:find("recomputing", 1, true), "corrupt: " .. err)
  T.ok(xsa.json.read_file(s.entry), "entry rewritten")
  code, _, err = run("part1_bias.lua", q())
  T.ok(err:find("cache hit:", 1, true), "after repair: " .. err)
end)

T.case("part3: paired training, checkpoints, result JSON, cache", function()
  local code, out, err = run("part3_train.lua", q())
  T.eq(code, 0, err)
  figure_ok("part3_loss")
  local s = summary("part3")
  local r = s.result
  T.eq(r.status, "done")
  T.eq(r.config.steps, 10)
  T.eq(table.concat(r.steps, ","), "0,5,10")
  T.eq(#r.sa.val, 3)
  T.eq(#r.xsa.train, 3)
  all_finite(r, "result")
  T.ok(finite(r.sa.final_val) and finite(r.xsa.final_val) and finite(r.improvement_pct))
  T.ok(r.sa.val[3] < r.sa.val[1] and r.xsa.val[3] < r.xsa.val[1], "training lowers the val loss")
  -- the table's final value is the end of the validation curve (over all val batches)
  T.eq(r.sa.val[3], r.sa.final_val)
  T.eq(r.xsa.val[3], r.xsa.final_val)
  T.eq(r.config.final_point, "all")
  T.ok(s.figures[1].caption:find("last point of each validation curve is the loss over the whole validation set", 1, true))
  -- one seed: a verdict without an interval, and how to get one
  T.eq(s.stats.n, 1)
  T.eq(s.stats.t_lo, nil)
  T.ok(out:find("one seed cannot give an interval", 1, true) and out:find("run with --seeds 5", 1, true), out)
  T.ok(r.tokens_per_s > 0 and r.elapsed_s > 0)
  for _, k in ipairs{"init", "sa", "xsa"} do
    local p = r.checkpoints[k]
    T.ok(p:find("10steps-seed0", 1, true), p)
    T.ok(exists(p), p .. " missing")
  end
  -- the checkpoints load, and the trained SA reproduces the final val loss
  local m = xsa.gpt.load(r.checkpoints.sa)
  T.eq(m:config().attention, "sa")
  local entry = assert(xsa.json.read_file(s.entry))
  T.eq(entry.result.sa.final_val, r.sa.final_val)
  T.ok(out:find("| seed | SA final val loss |", 1, true) and out:find("| 0 | ", 1, true) and out:find("verdict", 1, true), out)
  code, _, err = run("part3_train.lua", q())
  T.ok(code == 0 and err:find("cache hit:", 1, true), "second run: " .. err)
end)

T.case("part3 --seeds: one cache entry per seed, more seeds train only the new ones", function()
  local dir = TMP .. "/seeds"
  local flags = "--quick --out " .. shq(dir) .. " --plots " .. shq(dir)
  local code, out, err = run("part3_train.lua", flags .. " --seeds 2")
  T.eq(code, 0, err)
  T.eq(count(err, "cache miss:"), 2, err)
  T.ok(err:find("part3-10steps-seed0-", 1, true) and err:find("part3-10steps-seed1-", 1, true), err)
  code, out, err = run("part3_train.lua", flags .. " --seeds 3")
  T.eq(code, 0, err)
  T.eq(count(err, "cache hit:"), 2, err)
  T.eq(count(err, "cache miss:"), 1, err)
  T.ok(err:find("cache miss: part3 paired training (seed 2)", 1, true), err)
  local s = assert(xsa.json.read_file(dir .. "/summary/part3.json"))
  T.eq(#s.runs, 3)
  T.eq(table.concat(s.seeds, ","), "0,1,2")
  -- the statistics are those of the per-seed final val losses
  local sa, xs = {}, {}
  for i, x in ipairs(s.runs) do
    sa[i], xs[i] = x.sa_val, x.xsa_val
    T.eq(x.seed, i - 1)
    T.eq(x.sa.val[#x.sa.val], x.sa_val, "curve end = table value")
  end
  local want = xsa.stats.paired_summary(sa, xs, {seed = 0})
  for _, k in ipairs{"mean", "sd", "t_lo", "t_hi", "boot_lo", "boot_hi", "p_t", "k_xsa_lower", "verdict"} do
    T.eq(s.stats[k], want[k], "stats." .. k)
  end
  T.ok(out:find(want.verdict, 1, true), out)
  T.ok(out:find("XSA lower in " .. want.k_xsa_lower .. " of 3 seeds", 1, true), out)
  -- seeds differ in both the weights and the batch order
  T.ok(s.runs[1].sa_val ~= s.runs[2].sa_val, "independent runs")
  -- a list of seeds, and --data-seed (the order held, the weights vary)
  code, _, err = run("part3_train.lua", flags .. " --seeds 2,0")
  T.eq(code, 0, err)
  T.eq(count(err, "cache hit:"), 2, err)
  code, _, err = run("part3_train.lua", flags .. " --seeds 2 --data-seed 0")
  T.eq(code, 0, err)
  T.ok(err:find("cache hit: part3 paired training (seed 0)", 1, true), "seed 0 with its own order is the same run: " .. err)
  T.ok(err:find("part3-10steps-init1-data0-", 1, true), err)
  if GNUPLOT then
    local img = read(dir .. "/part3_loss.png")
    T.ok(img and #img > 1000, "figure")
    local gp = read(dir .. "/part3_loss.gp")
    T.ok(gp:find("filledcurves", 1, true) and gp:find("yerrorbars", 1, true), "band and error bar")
  end
end)

long_case("part3 --seeds --jobs 2: seeds side by side in child processes, each its own entry", function()
  local dir = TMP .. "/jobs"
  local flags = "--quick --out " .. shq(dir) .. " --plots " .. shq(dir) .. " --seeds 2"
  local code, out, err = run("part3_train.lua", flags .. " --jobs 2")
  T.eq(code, 0, err)
  T.ok(out:find("jobs: seeds 0,1 in 2 processes side by side (1 BLAS thread each)", 1, true), out)
  -- each child computed its seed (cache miss) and recorded it, then the parent
  -- read both records
  T.eq(count(err, "cache miss:"), 2, err)
  T.eq(count(err, "record written:"), 2, err)
  T.eq(count(err, "record: part3 paired training"), 2, err)
  T.ok(err:find("part3 seed 1 step 10/10", 1, true), "a child's progress names its seed: " .. err)
  local s = assert(xsa.json.read_file(dir .. "/summary/part3.json"))
  T.eq(#s.runs, 2)
  T.eq(s.stats.n, 2)
  code, _, err = run("part3_train.lua", flags)
  T.eq(count(err, "cache hit:"), 2, "the same entries without --jobs: " .. err)
  code, _, err = run("part3_train.lua", "--quick --out " .. shq(dir) .. " --plots " .. shq(dir) .. " --seeds 3 --jobs 2")
  T.eq(code, 0, err)
  T.eq(count(err, "cache miss:"), 1, "only the new seed trains: " .. err)
end)

T.case("part3 --seeds: the statistics of stand-in results of known values", function()
  -- the entries of three seeds rewritten with known final val losses: the
  -- script reads them (cache hits) and reports what they give
  local dir = TMP .. "/seeds"
  local flags = "--quick --out " .. shq(dir) .. " --plots " .. shq(dir) .. " --seeds 3"
  T.eq(run("part3_train.lua", flags), 0) -- cached: the summary of seeds 0..2
  local s = assert(xsa.json.read_file(dir .. "/summary/part3.json"))
  local xsa_vals = {3.96, 3.98, 4.012}
  for i, x in ipairs(s.runs) do
    local e = assert(xsa.json.read_file(x.entry))
    local r = e.result
    r.sa.final_val, r.xsa.final_val = 4, xsa_vals[i]
    r.sa.val[#r.sa.val], r.xsa.val[#r.xsa.val] = 4, xsa_vals[i]
    r.improvement_pct = 100 * (4 - xsa_vals[i]) / 4
    xsa.json.write_file(x.entry, e)
  end
  local code, out, err = run("part3_train.lua", flags)
  T.eq(code, 0, err)
  T.eq(count(err, "cache hit:"), 3, err)
  local st = assert(xsa.json.read_file(dir .. "/summary/part3.json")).stats
  -- d = 1, 0.5, -0.3 %: mean 0.4, sd sqrt(0.43) = 0.655744, t(0.975, 2) = 4.302653
  T.near(st.mean, 0.4, 1e-9)
  T.near(st.sd, 0.65574385243020, 1e-9)
  T.near(st.t_lo, -1.22895803313155, 1e-9)
  T.near(st.t_hi, 2.02895803313155, 1e-9)
  T.near(st.p_t, 0.40149439833541, 1e-9) -- df 2: p = 1 - t / sqrt(2 + t^2), t = 1.056541
  T.near(st.p_wilcoxon, 0.5, 1e-12)       -- ranks 3, 2, 1 (the last negative): W+ = 5, P(W+ >= 5) = 2/8
  T.eq(st.k_xsa_lower, 2)
  T.ok(st.boot_lo < st.mean and st.mean < st.boot_hi, "bootstrap interval around the mean")
  T.eq(st.verdict, "inconclusive at N=3 seeds (mean 0.40%, 95% CI -1.23 to 2.03)")
  T.ok(out:find("verdict (final val loss, improvement = 100 (SA - XSA) / SA per seed): inconclusive at N=3 seeds", 1, true), out)
  T.ok(out:find("XSA lower in 2 of 3 seeds", 1, true), out)
  T.ok(out:find("| 2 | 4.0000 | 4.0120 | -0.30% |", 1, true), out)
  -- sd 0.656: +-1 point needs 5 seeds (n = 4: t(0.975, 3) 0.656 / 2 = 3.182 * 0.328 = 1.04), +-0.5 needs 10
  -- (n = 9: 2.306 * 0.656 / 3 = 0.504; n = 10: 2.262 * 0.656 / 3.162 = 0.469)
  T.ok(out:find("seeds needed for a 95% t interval of ±1 point: 5, of ±0.5 points: 10, at this spread (sd 0.66 points; this comparison has 3)", 1, true), out)
  -- the report states the verdict with its interval
  code, _, err = run("report.lua", "--out " .. shq(dir) .. " --plots " .. shq(dir))
  T.eq(code, 0, err)
  local html = read(dir .. "/report.html")
  T.ok(html:find("inconclusive at N=3 seeds (mean 0.40%, 95% CI -1.23 to 2.03)", 1, true), "report verdict")
  T.ok(html:find("95% t interval -1.23 to +2.03", 1, true), "report interval")
end)

T.case("part3: a diverging run stops naming step and model, keeping what was saved", function()
  local dir = TMP .. "/nan"
  local code, _, err = run("part3_train.lua", "--quick --lr 1e30 --out " .. shq(dir) .. " --plots " .. shq(dir))
  T.eq(code, 1)
  local model, step = err:match("the (X?SA) loss became [%+%-]?%a+ at step (%d+)")
  T.ok(model and step, err)
  T.ok(not err:find("stack traceback", 1, true), "no traceback for a diverging loss")
  local partial = err:match("what was saved: .-([^%s,]+%-at%d+%.json)")
  local d = partial and xsa.json.read_file(partial)
  T.ok(d, err)
  T.eq(d.result.status, "nan")
  T.eq(d.result.failure.model, model)
  T.eq(d.result.failure.step, tonumber(step))
  -- the failed run is no cache entry: the next run trains again
  code, _, err = run("part3_train.lua", "--quick --lr 1e30 --out " .. shq(dir) .. " --plots " .. shq(dir))
  T.ok(err:find("cache miss:", 1, true), err)
end)

T.case("part7: two recipes over seeds, every endpoint; the constant one is part 3's entry", function()
  local dir = TMP .. "/part7"
  local flags = "--quick --out " .. shq(dir) .. " --plots " .. shq(dir)
  T.eq(run("part3_train.lua", flags .. " --seeds 2"), 0)
  local code, out, err = run("part7_recipe.lua", flags) -- --quick: seeds 0 and 1, warmup 3 of 10 steps
  T.eq(code, 0, err)
  T.eq(count(err, "cache hit:"), 2, "part 3's two runs are read, not retrained: " .. err)
  T.eq(count(err, "cache miss:"), 2, err)
  local s = assert(xsa.json.read_file(dir .. "/summary/part7.json"))
  T.eq(table.concat(s.seeds, ","), "0,1")
  T.eq(s.warmup, 3)
  local p3 = assert(xsa.json.read_file(summary_path(dir)))
  for _, key in ipairs{"constant", "cosine"} do
    local eps = s.recipes[key].endpoints
    T.eq(#eps, 5, key)
    T.eq(eps[1].key .. eps[2].key .. eps[3].key .. eps[4].key .. eps[5].key, "finalmeanescapecross5.5cross5")
    T.eq(eps[1].stats.n, 2)
    -- 10 steps end near loss 9.5: no step endpoint is reached, said so, not made up
    T.eq(eps[3].stats, nil)
    T.eq(eps[3].censored.both, 2)
    T.ok(out:find("| " .. key .. " | step at which val loss reaches 5 | n/a | n/a | neither model reached it in any of the 2 seeds", 1, true), out)
  end
  -- the constant recipe's final losses are part 3's; the cosine runs are other runs with their schedule
  local const, cos = s.recipes.constant.endpoints[1], s.recipes.cosine.endpoints[1]
  for i = 1, 2 do
    T.eq(const.sa[i], p3.runs[i].sa_val)
    T.eq(const.xsa[i], p3.runs[i].xsa_val)
    T.ok(cos.sa[i] ~= const.sa[i], "the schedule changes the run")
  end
  local want = xsa.stats.paired_summary(cos.sa, cos.xsa, {seed = 0})
  T.eq(cos.stats.verdict, want.verdict)
  local entry = io.popen("ls " .. shq(dir) .. "/part7-cosine-10steps-seed1-*.json"):read("l")
  local r = assert(xsa.json.read_file(entry)).result
  T.eq(r.config.schedule, "cosine")
  T.eq(r.config.warmup, 3)
  T.eq(r.config.min_lr_frac, 0.1)
  T.eq(r.sa.final_val, cos.sa[2])
  T.ok(out:find("seeds needed for a 95% t interval of ±1 point: ", 1, true), out)
  T.ok(out:find("verdict (cosine: mean val loss (evaluation points after step 0), improvement = 100 (SA - XSA) / SA per seed)", 1, true), out)
  if GNUPLOT then
    local img = read(dir .. "/part7_recipe.png")
    T.ok(img and #img > 1000, "figure")
    T.ok(read(dir .. "/part7_recipe.gp"):find("filledcurves", 1, true), "bands")
  end
  code, _, err = run("part7_recipe.lua", flags)
  T.eq(count(err, "cache hit:"), 4, "a second run reads everything: " .. err)
  local _, help = run("part7_recipe.lua", "--help")
  T.ok(help:find("(3,7,11; one seed: 3,) (default 10) [--quick: 2]", 1, true), "ten seeds unless told: " .. help)
end)

T.case("part5: needs part 3, then probes trained and untrained models", function()
  local code, _, err = run("part5_bias_trained.lua", "--quick --out " .. shq(TMP .. "/empty") .. " --plots " .. shq(PLOTS))
  T.eq(code, 1)
  T.ok(err:find("Run scripts/part3_train.lua first", 1, true), err)
  code, _, err = run("part5_bias_trained.lua", q())
  T.eq(code, 0, err)
  figure_ok("part5_bias_trained")
  local s = summary("part5")
  all_finite(s.result, "part5")
  for _, key in ipairs{"untrained", "sa", "xsa"} do T.eq(#s.result.models[key], 2, key) end
  -- XSA with lambda 1 removes the self-value component: post ~ 0; SA: post == pre
  for _, l in ipairs(s.result.models.xsa) do T.ok(math.abs(l.post_cos) < 0.05, "XSA post " .. l.post_cos) end
  for _, l in ipairs(s.result.models.sa) do T.near(l.post_cos, l.pre_cos, 1e-6) end
  -- positions >= 1: full XSA leaves only rounding (position 0 is y = v, where z is residue)
  for _, l in ipairs(s.result.models.xsa) do T.ok(math.abs(l.post_cos_pos1) < 1e-3, "XSA post (pos >= 1) " .. l.post_cos_pos1) end
  T.eq(#s.means, 3)
  for _, m in ipairs(s.means) do
    T.eq(m.positions, ">= 1")
    local probe = s.result.models[m.model]
    T.near(m.pre, (probe[1].pre_cos_pos1 + probe[2].pre_cos_pos1) / 2, 1e-12, "summary mean is over positions >= 1")
    T.ok(finite(m.pre_all) and finite(m.post_all), "all-positions values kept")
  end
  -- the protocol: 2 (--quick; default 8) validation batches of a separate probe set
  T.eq(s.result.probe_batches, 2)
  T.eq(s.config.probe.split, "val")
  T.eq(s.config.probe.max_tokens, 20000)
  T.eq(s.config.probe.batch_size, 4)
  T.ok(s.figures[1].caption:find("positions ≥ 1", 1, true))
end)

T.case("part5 --seeds: the probes of every seed of part 3, with intervals", function()
  local dir = TMP .. "/seeds"
  local code, out, err = run("part5_bias_trained.lua", "--quick --seeds 3 --out " .. shq(dir) .. " --plots " .. shq(dir))
  T.eq(code, 0, err)
  T.eq(count(err, "cache miss: part5 probes (seed"), 3, err)
  local s = assert(xsa.json.read_file(dir .. "/summary/part5.json"))
  T.eq(#s.runs, 3)
  for _, m in ipairs(s.means) do
    local vals = {}
    for i, x in ipairs(s.runs) do vals[i] = xsa.study.layer_mean(x.result.models[m.model], "pre_cos_pos1") end
    local lo, hi = xsa.stats.t_interval(vals)
    T.near(m.pre, xsa.stats.mean(vals), 1e-12)
    T.near(m.pre_ci[1], lo, 1e-12)
    T.near(m.pre_ci[2], hi, 1e-12)
  end
  T.ok(out:find("mean over 3 seeds", 1, true), out)
  if GNUPLOT then T.ok(read(dir .. "/part5_bias_trained.gp"):find("yerrorbars", 1, true), "error bars") end
end)

long_case("part5 --train: trains part 3 itself when its checkpoints are missing", function()
  local dir = TMP .. "/p5train"
  local code, out, err = run("part5_bias_trained.lua", "--quick --train --out " .. shq(dir) .. " --plots " .. shq(dir))
  T.eq(code, 0, err)
  T.ok(out:find("running it now", 1, true), out)
  T.ok(exists(dir .. "/summary/part3.json") and exists(dir .. "/part3_loss.png"), "part 3's summary and figure")
  local s = assert(xsa.json.read_file(dir .. "/summary/part5.json"))
  T.eq(#s.result.models.xsa, 2)
  T.ok(exists(s.result.checkpoints.xsa), "part 3 checkpoint written")
end)

long_case("part4: one cached pair per sequence length", function()
  local code, out, err = run("part4_seqlen.lua", q())
  T.eq(code, 0, err)
  T.eq(count(err, "cache miss:"), 2)
  figure_ok("part4_seqlen")
  local runs = summary("part4").result.runs
  T.eq(#runs, 2)
  T.eq(runs[1].seq_len, 16)
  T.eq(runs[2].seq_len, 32)
  all_finite(runs, "part4")
  code, _, err = run("part4_seqlen.lua", q("--seq-lens 16,32,48"))
  T.eq(code, 0, err)
  T.eq(count(err, "cache hit:"), 2, err)
  T.eq(count(err, "cache miss:"), 1, err)
  T.eq(#summary("part4").result.runs, 3)
  T.ok(out:find("| seq_len |", 1, true))
  code, out, err = run("part4_seqlen.lua", q("--seq-lens 16,32 --seeds 2"))
  T.eq(code, 0, err)
  T.eq(count(err, "cache hit:"), 2, err)
  T.eq(count(err, "cache miss:"), 2, err)
  runs = summary("part4").result.runs
  T.eq(runs[1].stats.n, 2)
  T.eq(#runs[1].seeds, 2)
  T.near(runs[1].improvement_pct, (runs[1].seeds[1].improvement_pct + runs[1].seeds[2].improvement_pct) / 2, 1e-9)
  T.ok(out:find("| 16 |", 1, true) and out:find("95% CI", 1, true), out)
  if GNUPLOT then T.ok(read(PLOTS .. "/part4_seqlen.gp"):find("yerrorbars", 1, true), "error bars") end
end)

long_case("part6: lambda sweep from one init", function()
  local code, _, err = run("part6_lambda_sweep.lua", q())
  T.eq(code, 0, err)
  figure_ok("part6_lambda_sweep")
  local runs = summary("part6").result.runs
  T.eq(#runs, 2)
  all_finite(runs, "part6")
  -- lambda 0 is SA (XSA(0) computes what SA computes, test_train): no gain
  T.eq(runs[1].lambda, 0)
  T.ok(math.abs(runs[1].improvement_pct) < 1e-3, "lambda 0 improvement " .. runs[1].improvement_pct)
  T.near(runs[1].xsa_val, runs[1].sa_val, 1e-5)
  -- both SA baselines come from the same init and batches
  T.near(runs[1].sa_val, runs[2].sa_val, 1e-5)
  T.ok(math.abs(runs[2].xsa_post_cos) < 1e-3, "lambda 1 post cos (positions >= 1) " .. runs[2].xsa_post_cos)
  -- the checkpoints: each lambda's XSA model, and the seed's SA baseline once
  local c1, c2 = runs[1].seeds[1].checkpoints, runs[2].seeds[1].checkpoints
  T.ok(exists(c1.xsa) and exists(c2.xsa) and c1.xsa ~= c2.xsa, "one XSA checkpoint per lambda")
  T.ok(exists(c1.sa) and c1.sa == c2.sa, "the shared SA baseline")
  T.eq(xsa.gpt.load(c2.xsa):config().lambda, 1)
  local s = summary("part6")
  T.eq(s.config.probe_batches, 2)
  T.eq(s.config.probe.split, "val")
  code, _, err = run("part6_lambda_sweep.lua", q())
  T.eq(count(err, "cache hit:"), 1, "one group per seed: " .. err)
  code, _, err = run("part6_lambda_sweep.lua", q("--seeds 2"))
  T.eq(code, 0, err)
  T.eq(count(err, "cache hit:"), 1, "seed 0's group: " .. err)
  T.eq(count(err, "cache miss:"), 1, "seed 1's group: " .. err)
  runs = summary("part6").result.runs
  T.eq(runs[2].stats.n, 2)
  T.ok(runs[2].seeds[2].checkpoints.sa ~= runs[2].seeds[1].checkpoints.sa, "each seed its own SA baseline")
end)

T.case("report: one page with every part", function()
  local code, out, err = run("report.lua", "--out " .. shq(OUT) .. " --plots " .. shq(PLOTS))
  T.eq(code, 0, err)
  T.ok(not err:find("warning", 1, true), "report warnings: " .. err)
  local html = read(PLOTS .. "/report.html")
  T.ok(html, "report.html")
  local parts = SANITIZED and {1, 2, 3, 5} or {1, 2, 3, 4, 5, 6}
  if GNUPLOT then T.eq(count(html, "<svg"), #parts) end
  -- part 7 (ten seeds of two recipes) is not run here: the only part missing
  T.ok(out:find("missing: " .. (SANITIZED and "part4, part6, part7, part8, part9" or "part7, part8, part9"), 1, true),
    "missing parts listed: " .. out)
  for _, i in ipairs(parts) do T.ok(html:find('id="part' .. i .. '"', 1, true), "part " .. i) end
  T.ok(html:find("final validation loss", 1, true))
  -- each part's explanation, the paper figure it reproduces, the two lines, why it works
  T.ok(html:find("Reproduces: the diagnostic of the paper&#39;s Figure 1", 1, true) or
    html:find("Reproduces: the diagnostic of the paper's Figure 1", 1, true), "paper figure of part 1")
  -- part 4 (Figure 5) is not run under the sanitizers
  T.ok(html:find("Figure 3", 1, true) and html:find("Algorithm 1", 1, true), "Figure 3 and Algorithm 1")
  if not SANITIZED then T.ok(html:find("Figure 5", 1, true), "Figure 5 (part 4)") end
  T.ok(html:find("Vn = V / |V|", 1, true) and html:find("Why it works", 1, true), "the two lines; why it works")
  T.ok(out:find(#parts .. " parts present", 1, true), out)
  -- an empty results folder lists the commands
  code, out = run("report.lua", "--out " .. shq(TMP .. "/none") .. " --plots " .. shq(TMP .. "/none"))
  T.eq(code, 0)
  html = read(TMP .. "/none/report.html")
  T.ok(html:find("Missing parts", 1, true) and html:find("xsa scripts/part4_seqlen.lua", 1, true))
  -- the commands name the folders the report was asked about
  T.ok(html:find("xsa scripts/part4_seqlen.lua --out '" .. TMP .. "/none' --plots '" .. TMP .. "/none'", 1, true),
    "missing-part commands carry --out/--plots")
end)

long_case("run_all: every part in order (cached), then the report", function()
  local code, out, err = run("run_all.lua", q("--skip part4 --seeds 2"), "XSA_EXE=" .. shq(EXE))
  T.eq(code, 0, err)
  for _, p in ipairs{"part3", "part5", "part6"} do
    T.ok(out:find("=== " .. p .. ": [^\n]*%-%-seeds' '2'") or out:find("=== " .. p .. ": [^\n]*%-%-seeds 2"), p .. " gets --seeds: " .. out)
  end
  T.eq(#summary("part3").runs, 2)
  for _, p in ipairs{"part1", "part2", "part3", "part5", "part6", "report"} do
    T.ok(out:find("=== " .. p, 1, true), p)
  end
  T.ok(out:find("| part4 | skipped |", 1, true), out)
  T.ok(count(err, "cache hit:") >= 4, err)
end)

long_case("Ctrl-C during training: the state written, status 130", function()
  local dir = TMP .. "/intr"
  local o, e = TMP .. "/intr.out", TMP .. "/intr.err"
  local sh = string.format([[
%s %s --quick --steps 100000 --eval-every 50000 --out %s --plots %s >%s 2>%s & pid=$!
i=0; while ! grep -q "step 0/" %s 2>/dev/null; do sleep 0.1; i=$((i+1)); [ $i -gt 600 ] && break; done
sleep 2; kill -INT $pid; wait $pid; echo "status=$?"]], shq(EXE), shq(ROOT .. "/scripts/part3_train.lua"), shq(dir),
    shq(dir), shq(o), shq(e), shq(e))
  local p = io.popen("sh -c " .. shq(sh))
  local res = p:read("a")
  p:close()
  local err = read(e) or ""
  T.ok(res:find("status=130", 1, true), res .. err)
  local partial = err:match("results so far written to .-([^%s,]+%.resume%.json)")
  T.ok(partial, err)
  local d = assert(xsa.json.read_file(partial))
  T.eq(d.result.status, "interrupted")
  T.ok(d.result.completed_steps < 100000)
  T.eq(d.state.completed_steps, d.result.completed_steps)
  -- no finished cache entry for an interrupted run
  T.ok(not err:find("cache hit", 1, true))
end)

-- A small part-3 run stopped three times (SIGINT, SIGTERM, SIGKILL between
-- saves) and resumed each time ends with the numbers and checkpoints of the
-- same run left alone, to the bit.
long_case("resume after SIGINT, SIGTERM and SIGKILL: bit-identical to an uninterrupted run", function()
  local flags = "--quick --steps 48 --eval-every 3 --save-every 4 --eval-batches 1 --max-tokens 8000 " ..
    "--seq-len 16 --batch 4 --d-model 32 --n-layer 1"
  local ref, dir = TMP .. "/resume_ref", TMP .. "/resume"
  local code, _, err = run("part3_train.lua", flags .. " --out " .. shq(ref) .. " --plots " .. shq(ref))
  T.eq(code, 0, err)
  local e = TMP .. "/resume.err"
  -- one session of the run in `dir`, stopped with `sig` once the first logged
  -- step >= n ("step N/", every 3 steps) is
  local function session(n, sig)
    n = (n + 2) // 3 * 3
    local sh = string.format([[
XSA_RESULTS=%s XSA_PROGRESS=log %s %s %s --out %s --plots %s >/dev/null 2>%s & pid=$!
i=0; while ! grep -q "step %d/" %s 2>/dev/null; do sleep 0.05; i=$((i+1)); [ $i -gt 1200 ] && break; done
kill -%s $pid; { wait $pid; } 2>/dev/null; echo "status=$?"]], shq(dir .. "/records"), shq(EXE), shq(ROOT .. "/scripts/part3_train.lua"), flags, shq(dir), shq(dir),
      shq(e), n, shq(e), sig)
    local p = io.popen("sh -c " .. shq(sh))
    local res = p:read("a")
    p:close()
    local text = read(e) or ""
    io.stdout:write(string.format("  %s after step %d: %s", sig, n, res))
    return tonumber(res:match("status=(%d+)")), text
  end
  local function resumed_from(text) return tonumber(text:match("resume: part3 paired training %(seed 0%) from step (%d+) of 48")) end
  local status, text = session(6, "INT")
  T.eq(status, 130, text)
  local at1 = tonumber(text:match("interrupted after (%d+) of 48 steps; results so far written to"))
  T.ok(at1 and at1 >= 6 and at1 < 24, text)
  T.ok(text:find("the same command resumes from step " .. at1, 1, true), text)
  local state = assert(xsa.json.read_file(text:match("([^%s,]+%.resume%.json)")))
  local ms = state.state.model_steps
  T.ok((ms.sa == at1 or ms.sa == at1 + 1) and (ms.xsa == at1 or ms.xsa == at1 + 1), "each model at or one step past it")
  io.stdout:write(string.format("  SIGINT's state: %d steps done, SA took %d, XSA %d\n", at1, ms.sa, ms.xsa))
  status, text = session(at1 + 6, "TERM")
  T.eq(status, 130, text)
  T.eq(resumed_from(text), at1, "SIGINT's state: " .. text)
  local at2 = tonumber(text:match("interrupted after (%d+) of 48 steps"))
  T.ok(at2 and at2 >= at1 + 6 and at2 < 36, text)
  status, text = session(at2 + 7, "KILL")
  T.eq(status, 137, text)
  T.eq(resumed_from(text), at2, "SIGTERM's state: " .. text)
  code, _, err = run("part3_train.lua", flags .. " --out " .. shq(dir) .. " --plots " .. shq(dir))
  T.eq(code, 0, err)
  local at3 = resumed_from(err)
  -- killed: from the last periodic save, a multiple of --save-every
  T.ok(at3 and at3 % 4 == 0 and at3 > at2 and at3 < 48, "SIGKILL: " .. err)
  io.stdout:write(string.format("  stopped at steps %d (SIGINT), %d (SIGTERM); resumed from %d after SIGKILL\n", at1, at2, at3))
  local a = assert(xsa.json.read_file(summary_path(ref)))
  local b = assert(xsa.json.read_file(summary_path(dir)))
  T.eq(a.entry:match("[^/]+$"), b.entry:match("[^/]+$"))
  local ra, rb = assert(xsa.json.read_file(a.entry)).result, assert(xsa.json.read_file(b.entry)).result
  T.eq(#rb.sa.step_loss, 48)
  for _, k in ipairs{"steps", "sa", "xsa", "improvement_pct", "completed_steps", "status", "tokens"} do
    local x, y = ra[k], rb[k]
    if type(x) == "table" then x, y = xsa.json.encode(x), xsa.json.encode(y) end
    T.eq(y, x, "result." .. k .. " is the uninterrupted run's")
  end
  for _, k in ipairs{"init", "sa", "xsa"} do
    local x, y = read(ra.checkpoints[k]), read(rb.checkpoints[k])
    T.ok(x and y and x == y, k .. " checkpoint byte-identical")
  end
  -- the finished entry replaced the saved state
  local left = io.popen("ls " .. shq(dir)):read("a")
  T.ok(not left:find("resume", 1, true), left)
end)

-- --jobs: a SIGINT sent to the parent alone (kill -INT, as a Jupyter
-- interrupt sends it) reaches the workers, which save their states, and
-- then ends the parent. Through os.execute the parent ignored SIGINT until
-- every worker had finished its whole run. The waits count log lines with
-- `cat | grep -c`, which prints 0 before the log exists (grep -c of a
-- missing file printed nothing, `[` failed and the kill came at once).
long_case("--jobs 2: kill -INT of the parent stops the workers, which save, then the parent", function()
  local flags = "--quick --seeds 2 --jobs 2 --steps 3000 --eval-every 50 --save-every 100 --eval-batches 1 " ..
    "--max-tokens 8000 --seq-len 16 --batch 4 --d-model 32 --n-layer 1"
  local dir, e = TMP .. "/jobs_int", TMP .. "/jobs_int.err"
  local sh = string.format([[
XSA_RESULTS=%s XSA_PROGRESS=log %s %s %s --out %s --plots %s >/dev/null 2>%s & pid=$!
i=0; until [ "$(cat %s 2>/dev/null | grep -c "step [0-9]*/3000")" -ge 4 ]; do sleep 0.05; i=$((i+1)); [ $i -gt 12000 ] && break; done
t0=$(date +%%s%%N); kill -INT $pid; { wait $pid; } 2>/dev/null; s=$?; t1=$(date +%%s%%N)
echo "status=$s ms=$(( (t1 - t0) / 1000000 ))"]], shq(dir .. "/records"), shq(EXE), shq(ROOT .. "/scripts/part3_train.lua"),
    flags, shq(dir), shq(dir), shq(e), shq(e))
  local p = io.popen("sh -c " .. shq(sh))
  local res = p:read("a")
  p:close()
  local text = read(e) or ""
  local status, ms = tonumber(res:match("status=(%d+)")), tonumber(res:match("ms=(%d+)"))
  io.stdout:write("  kill -INT of the --jobs parent: " .. res)
  T.eq(status, 130, res .. text)
  T.eq(count(text, "results so far written to"), 2, "each worker saved its state: " .. text)
  for seed = 0, 1 do
    local at = tonumber(text:match("seed " .. seed .. "%) interrupted after (%d+) of 3000 steps") or
      text:match("interrupted after (%d+) of 3000 steps"))
    T.ok(at and at < 3000, "seed " .. seed .. " stopped early: " .. text)
  end
  T.ok(ms and ms < 15000, "the parent ended " .. tostring(ms) .. " ms after the signal")
  -- the same command resumes both seeds from their states
  local sh2 = string.format([[
XSA_RESULTS=%s XSA_PROGRESS=log %s %s %s --out %s --plots %s >/dev/null 2>%s & pid=$!
i=0; until [ "$(cat %s 2>/dev/null | grep -c "resume: part3")" -ge 2 ]; do sleep 0.05; i=$((i+1)); [ $i -gt 12000 ] && break; done
kill -INT $pid; { wait $pid; } 2>/dev/null; echo "status=$?"]], shq(dir .. "/records"), shq(EXE), shq(ROOT .. "/scripts/part3_train.lua"),
    flags, shq(dir), shq(dir), shq(e), shq(e))
  p = io.popen("sh -c " .. shq(sh2))
  res = p:read("a")
  p:close()
  text = read(e) or ""
  T.eq(count(text, "resume: part3 paired training"), 2, "both seeds resumed: " .. text)
end)

-- An interrupt at any moment of a --jobs parent's life (starting, making its
-- folders, starting the workers, waiting for them) stops it with status 130,
-- never lost: the signal comes after each of a series of delays, from at
-- once to well into training. What the run was doing then does not matter;
-- every delay must give 130 and no worker that trained to its end. The
-- delays are moments, not deadlines: a loaded machine moves them, and
-- every moment must work. `env --default-signal=INT`: sh starts a background
-- job with SIGINT ignored (no job control), which no program can see
-- coming; a launcher that interrupts (Jupyter) does not. The delays count
-- from env's exec of xsa (the same pid): a signal that reaches env before
-- it has reset SIGINT is lost to the test's shell, not to xsa (on a quiet
-- machine "0 s" landed there and the run finished). The wait is for the
-- name of xsa's own executable, not for "not env": before env's exec the
-- pid is the shell's forked child (named sh, SIGINT ignored as a background
-- job's), and on a loaded machine "0 s" landed there too.
long_case("--jobs 2: kill -INT at any moment of the parent's life gives 130, never a finished run", function()
  local flags = "--quick --seeds 2 --jobs 2 --steps 3000 --eval-every 50 --save-every 100 --eval-batches 1 " ..
    "--max-tokens 8000 --seq-len 16 --batch 4 --d-model 32 --n-layer 1"
  local comm = EXE:match("[^/]*$"):sub(1, 15) -- the kernel keeps 15 bytes of an executable's name
  for i, delay in ipairs{"0", "0.05", "0.2", "0.5", "1", "2", "4"} do
    local dir, e = TMP .. "/jobs_any" .. i, TMP .. "/jobs_any" .. i .. ".err"
    local sh = string.format([[
XSA_RESULTS=%s XSA_PROGRESS=log env --default-signal=INT %s %s %s --out %s --plots %s >/dev/null 2>%s & pid=$!
until [ "$(cat /proc/$pid/comm 2>/dev/null)" = %s ] || ! kill -0 $pid 2>/dev/null; do :; done
sleep %s; kill -INT $pid; { wait $pid; } 2>/dev/null; echo "status=$?"]], shq(dir .. "/records"), shq(EXE),
      shq(ROOT .. "/scripts/part3_train.lua"), flags, shq(dir), shq(dir), shq(e), shq(comm), delay)
    local p = io.popen("sh -c " .. shq(sh))
    local res = p:read("a")
    p:close()
    local text = read(e) or ""
    T.eq(tonumber(res:match("status=(%d+)")), 130, "signal after " .. delay .. " s: " .. res .. text:sub(-1500))
    T.ok(not text:find("3000/3000", 1, true) and not text:find("record written", 1, true),
      "after " .. delay .. " s a worker trained to its end: " .. text:sub(-1500))
  end
end)

os.execute("rm -rf " .. shq(TMP))
T.done()
