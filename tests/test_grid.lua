-- test_grid.lua: the registered grid of parts 8 and 9 (scripts/plan.lua,
-- grid.lua, verdicts.lua): no training token is read twice within a run of
-- any cell, every cell is evaluated on the same held-out tokens, a run that
-- would repeat data is refused, and the verdicts apply the registered
-- procedure (per-seed statistics, t tests, Holm's correction, the stopping
-- rule) to records.
local T = require "testing"
local xsa = require "xsa"
local stats, record = require "xsa.stats", require "xsa.record"
local ROOT = os.getenv("XSA_ROOT") or "."
local plan = dofile(ROOT .. "/scripts/plan.lua")
local grid = dofile(ROOT .. "/scripts/grid.lua")
local V = dofile(ROOT .. "/scripts/verdicts.lua")

T.case("every cell of the plan: no training token read twice, none from the held-out tail", function()
  T.eq(#plan.cells, 5)
  for _, c in ipairs(plan.cells) do
    T.eq(c.batch * c.seq_len, plan.tokens_per_step, c.key .. ": equal tokens per step")
    local cfg = grid.config(plan, "grid", c, 7, 1e-3, {"sa", "xsa"})
    local tl, vl, info = grid.loaders(cfg.data, cfg.train.steps)
    local starts = grid.windows_read(tl, cfg.train.steps)
    T.eq(#starts, plan.steps * c.batch, c.key .. ": windows read")
    -- windows are seq_len + 1 tokens long: distinct starts on that grid never overlap
    local seen = {}
    for _, s in ipairs(starts) do
      T.eq(s % (c.seq_len + 1), 0, c.key .. ": a window on the tiling")
      T.ok(not seen[s], c.key .. ": token " .. s .. " read twice")
      seen[s] = true
      T.ok(s + c.seq_len + 1 <= info.val_first, c.key .. ": a training window reaches the held-out tail")
    end
    T.eq(info.val_first, info.n_tokens - plan.val_tokens, c.key .. ": the tail")
    tl:free()
    vl:free()
  end
end)

T.case("every cell is evaluated on the same held-out tokens", function()
  local firsts = {}
  for _, c in ipairs(plan.cells) do
    local cfg = grid.config(plan, "grid", c, 0, 1e-3, {"sa"})
    local _, vl, info = grid.loaders(cfg.data, 1)
    local x = vl:batch(1)
    firsts[#firsts + 1] = {info.val_first, x[1][1], x[1][2], x[1][3]}
    T.eq(vl.num_windows, plan.val_tokens // (c.seq_len + 1), c.key .. ": val windows")
  end
  for i = 2, #firsts do
    for k = 1, 4 do T.eq(firsts[i][k], firsts[1][k], "cell " .. i .. " starts its val text elsewhere") end
  end
end)

T.case("a run that would read a training window twice is refused", function()
  local c = plan.cell["2x128-T1024"]
  local cfg = grid.config(plan, "grid", c, 0, 1e-3, {"sa"}, {steps = 4000})
  T.raises(function() grid.loaders(cfg.data, cfg.train.steps) end, "each token is seen once")
end)

-- Writes records of synthetic final val losses: per (cell, seed) an SA loss of
-- 5 and an XSA loss giving the improvement gain(cell, seed) %.
local function fake_group(dir, folder, cell, seed, lr, arms, sa_val, xsa_val)
  local cfg = grid.config(plan, folder, cell, seed, lr, arms)
  local runs = {{label = "SA", final_val = sa_val, train = {sa_val - 0.1}, val = {sa_val}}}
  if xsa_val then runs[2] = {label = "XSA", final_val = xsa_val, train = {xsa_val - 0.1}, val = {xsa_val}} end
  record.write(dir, folder, grid.name(cfg, cell, #arms == 1), cfg, {status = "done", runs = runs, cpu_s = 1, elapsed_s = 1})
end

local function fake_pilot(dir)
  for _, s in ipairs(plan.sizes) do
    local c = plan.cell[s.key .. "-T256"]
    for _, lr in ipairs(plan.lr_sweep.lrs) do fake_group(dir, "pilot", c, 1000, lr, {"sa"}, lr == 2e-3 and 5.0 or 5.5) end
  end
  for _, key in ipairs(plan.pilot.cells) do -- equal gains: sd 0, so N is the registered minimum
    for _, s in ipairs(plan.pilot.seeds) do fake_group(dir, "pilot", plan.cell[key], s, 2e-3, {"sa", "xsa"}, 5, 4.95) end
  end
end

T.case("the lr sweep's rule: the best lr, extended by a factor at an end", function()
  local dir = T.tmpdir()
  local c = plan.cell["4x256-T256"]
  for _, lr in ipairs{1e-3, 2e-3, 4e-3} do fake_group(dir, "pilot", c, 1000, lr, {"sa"}, 6 - lr * 100) end
  local lr, why = V.chosen_lr(dir, "4x256")
  T.eq(lr, nil)
  T.ok(why:find("0.008", 1, true), "the next lr beyond the best end is asked for: " .. why)
  fake_group(dir, "pilot", c, 1000, 8e-3, {"sa"}, 7)
  T.eq(V.chosen_lr(dir, "4x256"), 4e-3)
end)

T.case("the verdicts: per-seed statistics, t tests, Holm's correction, the stopping rule", function()
  local dir = T.tmpdir()
  fake_pilot(dir)
  local n = V.seeds_rule(dir)
  T.eq(n, plan.seeds.min)
  -- gains per seed: a clear mean gain, a length slope with a raw p near 0.03, no size trend
  local noise = {0.3, -0.2, 0.1, -0.4, 0.2}
  local lx = {[64] = 0, [256] = 2, [1024] = 4}
  local function gain(c, s)
    local g = 1 + noise[s + 1]
    if c.size == "2x128" then g = g + (0.034 + 0.08 * noise[(s + 2) % 5 + 1]) * lx[c.seq_len] end
    return g
  end
  local want = {gain = {}, length = {}, size = {}}
  for s = 0, n - 1 do
    for _, c in ipairs(plan.cells) do fake_group(dir, "grid", c, s, 2e-3, {"sa", "xsa"}, 5, 5 * (1 - gain(c, s) / 100)) end
    -- the statistics written out here, not taken from verdicts.lua
    local sum = 0
    for _, c in ipairs(plan.cells) do sum = sum + gain(c, s) end
    want.gain[s + 1] = sum / #plan.cells
    local g8 = {}
    for i, c in ipairs(plan.part8) do g8[i] = gain(c, s) end
    want.length[s + 1] = ((g8[3] - g8[1]) * 2) / 8 -- x = 0, 2, 4 around their mean 2: sxx = 8
    local x9, g9 = {}, {}
    for i, c in ipairs(plan.part9) do x9[i], g9[i] = math.log(c.params, 2), gain(c, s) end
    local mx, my = (x9[1] + x9[2] + x9[3]) / 3, (g9[1] + g9[2] + g9[3]) / 3
    local sxy, sxx = 0, 0
    for i = 1, 3 do sxy, sxx = sxy + (x9[i] - mx) * (g9[i] - my), sxx + (x9[i] - mx) ^ 2 end
    want.size[s + 1] = sxy / sxx
  end
  local fam = V.family(dir)
  T.eq(fam.incomplete, nil)
  local raw = {}
  for i, key in ipairs{"gain", "length", "size"} do
    T.eq(fam.rows[i].key, key)
    T.near(fam.rows[i].mean, stats.mean(want[key]), 1e-9, key .. " mean")
    raw[i] = stats.paired_t_p(want[key])
    T.near(fam.rows[i].p, raw[i], 1e-9, key .. " raw p")
  end
  -- Holm by hand: sort, multiply by m - j + 1, keep the running maximum
  local order = {1, 2, 3}
  table.sort(order, function(a, b) return raw[a] < raw[b] end)
  local run = 0
  for j, i in ipairs(order) do
    run = math.max(run, math.min(1, (4 - j) * raw[i]))
    T.near(fam.rows[i].p_holm, run, 1e-12, "Holm p of " .. fam.rows[i].key)
  end
  T.ok(raw[2] < 0.05 and fam.rows[2].p_holm >= 0.05, string.format(
    "the data must make Holm matter: length raw p %.4f, adjusted %.4f", raw[2], fam.rows[2].p_holm))
  T.eq(fam.rows[1].verdict, "supported")
  T.eq(fam.rows[2].verdict, "not decided")
  -- the stopping rule: one record fewer and there is no verdict
  os.remove(dir .. "/grid/" .. assert(xsa.list_files(dir .. "/grid"))[1])
  local part = V.family(dir)
  T.eq(part.rows, nil)
  T.ok(part.incomplete:find("of " .. n, 1, true), part.incomplete)
end)

T.case("part 8 end to end on small settings: exploratory records, read back without training", function()
  local exe = os.getenv("XSA_EXE")
  if not exe then print("skip: XSA_EXE not set"); return end
  local dir = T.tmpdir()
  local cmd = string.format("%s %s/scripts/part8_length.lua --quick --seeds 0, --threads 1 --results %s/r --out %s/c " ..
    "--plots %s/p 2>&1", exe, ROOT, dir, dir, dir)
  local p = io.popen(cmd)
  local out = p:read("a")
  T.ok(p:close(), "part 8 --quick failed:\n" .. out)
  T.eq(#assert(xsa.list_files(dir .. "/r/explore")), 3, "one record per cell")
  T.eq(xsa.list_files(dir .. "/r/grid"), nil, "flags off the plan never write the registered grid")
  for _, T_ in ipairs{64, 256, 1024} do T.ok(out:find("\n| " .. T_ .. " | 1 |", 1, true), "a row for seq_len " .. T_) end
  T.ok(out:find("exploratory", 1, true))
  p = io.popen(cmd)
  out = p:read("a")
  T.ok(p:close())
  T.ok(not out:find("cache miss", 1, true) and select(2, out:gsub("record: explore%-", "")) == 3,
    "read back from the records:\n" .. out)
  -- the exploratory curves: per cell each seed's SA and XSA curve and their means, from the records
  T.ok(xsa.sys.exists(dir .. "/p/part8_length_curves.png"), "the curves figure is drawn")
  local gp = assert(xsa.read_file(dir .. "/p/part8_length_curves.gp"))
  local _, means = gp:gsub('title "[SX]+A, mean"', "")
  T.eq(means, 6, "an SA and an XSA mean in each of the three panels:\n" .. gp)
  -- a record whose curve lost a point (records are untrusted): refused as xsa.runs.check refuses it, the file named,
  -- no traceback
  local f
  for _, name in ipairs(xsa.list_files(dir .. "/r/explore")) do if name:find("T64", 1, true) then f = name end end
  local path = dir .. "/r/explore/" .. f
  local rec = assert(xsa.json.read_file(path))
  T.eq(#rec.runs[2].result.val, 2, "steps 0 and 2")
  table.remove(rec.runs[2].result.val)
  xsa.json.write_file(path, rec)
  p = io.popen(cmd)
  out = p:read("a")
  T.ok(not p:close(), "a damaged curve is refused:\n" .. out)
  T.ok(out:find(f .. " is refused: its result fails the check: run 2's val curve has 1 points for 2 evaluation steps",
    1, true), out)
  T.ok(not out:find("traceback", 1, true), out)
end)

T.case("stats.holm and the chi-square quantile against closed forms", function()
  local a = stats.holm{0.01, 0.04, 0.03}
  T.near(a[1], 0.03, 1e-15); T.near(a[2], 0.06, 1e-15); T.near(a[3], 0.06, 1e-15)
  local b = stats.holm{0.5, 0.001}
  T.near(b[1], 0.5, 1e-15); T.near(b[2], 0.002, 1e-15)
  -- df 2: P(X <= x) = 1 - exp(-x/2); df 4: 1 - exp(-x/2)(1 + x/2); df 1: erf of sqrt(x/2) (z = 1.96... gives 0.95)
  T.near(stats.chi2_quantile(0.2, 2), -2 * math.log(0.8), 1e-10)
  local q = stats.chi2_quantile(0.2, 4)
  T.near(1 - math.exp(-q / 2) * (1 + q / 2), 0.2, 1e-10)
  T.near(stats.chi2_cdf(1.959963984540054 ^ 2, 1), 0.95, 1e-12)
  T.near(stats.sd_upper(2, 4, 0.8), 2 * math.sqrt(4 / q), 1e-12)
  -- slope of (0, 1), (2, 2), (4, 4): sxy = (-2)(-4/3) + 2 (5/3) = 6 over sxx = 8
  T.near(stats.slope({0, 2, 4}, {1, 2, 4}), 0.75, 1e-15)
  T.raises(function() stats.slope({1, 1}, {1, 2}) end, "the xs are all equal")
end)

-- A group of the grid killed (SIGKILL, as a session's end kills the lab)
-- between saves continues from its last saved state on the next call and
-- ends with the numbers of the group never stopped, to the bit; its CPU
-- time adds the killed session's; the saved state is gone once the entry
-- holds the group.
T.case("a grid group killed between saves resumes to the bit", function()
  local EXE = os.getenv("XSA_EXE") or "xsa"
  if EXE:sub(1, 1) ~= "/" then EXE = ROOT .. "/" .. EXE end
  local shq, dir = xsa.sys.shell_quote, T.tmpdir()
  local script = dir .. "/group.lua"
  T.writefile(script, [[
local root, out = ...
local grid, plan = dofile(root .. "/scripts/grid.lua"), dofile(root .. "/scripts/plan.lua")
local ex = xsa.experiment{name = "t", argv = {"--out", out}}
grid.save_every = 2
local c = plan.cell["2x128-T64"]
local cfg = grid.config(plan, "explore", c, 3, 2e-3, {"sa", "xsa"}, {steps = 14, eval_every = 4, eval_batches = 1,
  val_tokens = 2050})
local r = grid.group(ex, cfg, c, false)
xsa.json.write_file(out .. "/group.json", r)
]])
  local function run(out, background)
    local cmd = string.format("XSA_RESULTS=%s XSA_PROGRESS=log %s %s %s %s 2>>%s", shq(out .. "/records"), shq(EXE),
      shq(script), shq(ROOT), shq(out), shq(out .. ".err"))
    return background and ("sh -c " .. shq(cmd) .. " & pid=$!") or os.execute(cmd)
  end
  xsa.sys.mkdir(dir .. "/ref")
  xsa.sys.mkdir(dir .. "/killed")
  T.ok(run(dir .. "/ref"), T.read(dir .. "/ref.err"))
  -- killed once a state of step 6 or later is on disk
  local sh = run(dir .. "/killed", true) .. string.format([[
i=0; until grep -qE '"completed_steps": ?([6-9]|1[0-3])[,}]' %s/*.resume.json 2>/dev/null; do
  sleep 0.05; i=$((i+1)); [ $i -gt 2400 ] && break; done
kill -KILL $pid; pkill -KILL -f %s; wait $pid 2>/dev/null; echo done]], dir .. "/killed", shq(dir .. "/killed"))
  T.capture("sh -c " .. shq(sh))
  local state = xsa.json.read_file(io.popen("ls " .. shq(dir .. "/killed") .. "/*.resume.json"):read("l") or "")
  T.ok(type(state) == "table" and state.state.completed_steps >= 6 and state.state.completed_steps < 14,
    "a state between steps 6 and 13 was left: " .. tostring(T.read(dir .. "/killed.err")))
  T.ok(run(dir .. "/killed"), T.read(dir .. "/killed.err"))
  local err = T.read(dir .. "/killed.err")
  T.ok(err:find("resume: explore%-2x128%-T64%-seed3%-%x+ from step " .. state.state.completed_steps .. " of 14"), err)
  local a, b = xsa.json.read_file(dir .. "/ref/group.json"), xsa.json.read_file(dir .. "/killed/group.json")
  T.eq(#b.runs, 2)
  for i = 1, 2 do
    for _, k in ipairs{"step_loss", "train", "val", "final_val"} do
      T.eq(xsa.json.encode(b.runs[i][k]), xsa.json.encode(a.runs[i][k]), "run " .. i .. " " .. k .. " is the uninterrupted run's")
    end
  end
  T.eq(xsa.json.encode(b.steps), xsa.json.encode(a.steps))
  T.ok(b.cpu_s > state.extra.cpu_s, "the CPU time of the killed session is counted: " .. b.cpu_s)
  local left = io.popen("ls " .. shq(dir .. "/killed")):read("a")
  T.ok(not left:find("resume", 1, true), left)
end)

-- --from-records while the grid is being run: a part with no seed complete
-- says how far its groups are, writes a summary that says so, and exits 0
-- without a traceback; the claims' rows say "not yet", never "the pilot has
-- not fixed N". A part without any record at all still fails, in one line.
T.case("--from-records mid-grid: how far it is, no traceback", function()
  local EXE = os.getenv("XSA_EXE") or "xsa"
  if EXE:sub(1, 1) ~= "/" then EXE = ROOT .. "/" .. EXE end
  local shq, dir = xsa.sys.shell_quote, T.tmpdir()
  fake_pilot(dir)
  local n = V.seeds_rule(dir)
  fake_group(dir, "grid", plan.cell["2x128-T256"], 0, 2e-3, {"sa", "xsa"}, 5, 4.9)
  fake_group(dir, "grid", plan.cell["6x384-T256"], 0, 4e-3, {"sa", "xsa"}, 5, 4.9) -- not the chosen lr: not the grid's
  fake_group(dir, "grid", plan.cell["4x256-T256"], 1, 2e-3, {"sa", "xsa"}, 5, 4.9)
  local function part(script)
    return T.capture(string.format("cd %s && %s %s --from-records --results %s --out %s --plots %s 2>&1; echo status=$?",
      shq(dir), shq(EXE), shq(ROOT .. "/scripts/" .. script), shq(dir), shq(dir .. "/out"), shq(dir .. "/plots")))
  end
  local out = part("part9_size.lua")
  T.ok(out:find("status=0", 1, true), out)
  T.ok(not out:find("traceback", 1, true), out)
  T.ok(out:find(string.format("2 of %d groups of this part recorded (%d seeds x 3 cells)", 3 * n, n), 1, true), out)
  T.ok(out:find(string.format("no complete record for seeds 0-%d (%d runs missing", n - 1, 3 * n - 2), 1, true), out)
  local s = xsa.json.read_file(dir .. "/out/summary/part9.json")
  T.eq(s.n, n)
  T.ok(s.incomplete:find("4x256-T256 1 of " .. n, 1, true), s.incomplete)
  T.eq(s.recorded, 2, "the groups at the chosen lrs, over all cells (6x384's is at another lr)")
  T.eq(s.total, 5 * n, "N seeds of the five cells")
  out = part("part3_train.lua")
  T.ok(out:find("status=1", 1, true), out)
  T.ok(out:find("part3: no runs of this configuration have records in", 1, true) and not out:find("traceback", 1, true), out)
end)

T.done()
