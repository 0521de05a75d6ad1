-- test_experiment.lua: xsa.experiment, the object the part scripts are built
-- on: flags, configuration, file names next to the cache entry, cached
-- results, the summary, and asking for another experiment's results. The
-- scripts themselves run end to end in test_scripts.lua.
local T = require "testing"
local xsa = xsa or require "xsa"
local experiment = xsa.experiment

local TMP = T.tmpdir()
local shq = xsa.sys.shell_quote

local function new(argv, extra)
  local spec = {name = "mine", script = "mine.lua", title = "Mine", summary = "a test experiment",
    options = xsa.study.options({steps = 100}), quick = experiment.pair_quick(),
    argv = argv or {"--out", TMP .. "/out", "--plots", TMP .. "/plots"}}
  for k, v in pairs(extra or {}) do spec[k] = v end
  return experiment(spec)
end

T.case("flags, folders and the configuration", function()
  local ex = new({"--out", TMP .. "/out", "--plots", TMP .. "/plots", "--quick", "--steps", "7"},
    {config = function(o) return {steps = o.steps} end})
  T.eq(ex.opts.steps, 7, "a given flag beats --quick")
  T.eq(ex.opts.batch, 4, "--quick")
  T.eq(ex.opts.out, TMP .. "/out")
  T.eq(ex.config.steps, 7, "config from the flags")
  local c = ex:pair_config{seq_len = 16, lambda = 0.5}
  T.eq(c.part, "mine")
  T.eq(c.data.seq_len, 16)
  T.eq(c.model.seq_len, 16)
  T.eq(c.train.steps, 7)
  T.eq(c.lambda, 0.5)
  T.eq(c.probe_batches, nil)
  -- the configuration of part 3: data, model (both from the seed), training, lambda
  T.eq(xsa.cache.key(experiment.pair_config(ex.opts, "part3")), xsa.cache.key({part = "part3",
    data = xsa.study.data_config(ex.opts), model = xsa.study.model_config(ex.opts),
    train = xsa.study.adam_config(ex.opts), lambda = ex.opts.lambda}))
  T.eq(c.train.final_point, "all", "the last val point is the whole val set")
end)

T.case("seeds: --seeds N, --seeds a,b,c, --data-seed, --init-seed, errors", function()
  local parse = xsa.study.parse_seeds
  T.eq(table.concat(parse("5"), ","), "0,1,2,3,4")
  T.eq(table.concat(parse("1"), ","), "0")
  T.eq(table.concat(parse("3,7,11"), ","), "3,7,11")
  T.eq(table.concat(parse("7,"), ","), "7", "a comma makes a list")
  for _, bad in ipairs{{"0", "not a positive number of seeds"}, {"-2", "not a positive number"}, {"x", "not a positive"},
    {"1,1", "seed 1 is given twice"}, {"3,-1", "'-1' is not a seed"}, {"2.5", "not a positive"}, {"1,a", "'a' is not a seed"}} do
    local list, why = parse(bad[1])
    T.eq(list, nil, bad[1])
    T.ok(why and why:find(bad[2], 1, true), bad[1] .. ": " .. tostring(why))
  end
  local base = {"--out", TMP .. "/out", "--plots", TMP .. "/plots", "--quick"}
  local function with(...)
    local argv = {}
    for _, a in ipairs(base) do argv[#argv + 1] = a end
    for _, a in ipairs{...} do argv[#argv + 1] = a end
    return new(argv)
  end
  T.eq(table.concat(with().seeds, ","), "0", "default: one seed, --seed")
  T.eq(table.concat(with("--seed", "4").seeds, ","), "4")
  local ex = with("--seeds", "3")
  T.eq(table.concat(ex.seeds, ","), "0,1,2")
  -- each seed its own configuration: the batch order and the initial weights follow it
  local c1, c2 = ex:pair_config{seed = 1}, ex:pair_config{seed = 2}
  T.eq(c1.data.seed, 1); T.eq(c1.model.seed, 1); T.eq(c2.data.seed, 2)
  T.ok(xsa.cache.key(c1) ~= xsa.cache.key(c2))
  T.eq(experiment.pair_name("part3", c1), "part3-10steps-seed1")
  -- --data-seed holds the batch order, --init-seed the weights
  ex = with("--seeds", "5,6", "--data-seed", "0")
  local c = ex:pair_config{seed = 6}
  T.eq(c.data.seed, 0); T.eq(c.model.seed, 6)
  T.eq(experiment.pair_name("part3", c), "part3-10steps-init6-data0")
  c = with("--seeds", "2", "--init-seed", "9"):pair_config{seed = 1}
  T.eq(c.data.seed, 1); T.eq(c.model.seed, 9)
  -- seed 0 with --data-seed 0 is the same run as plain seed 0: the same entry
  T.eq(xsa.cache.key(with("--seeds", "2", "--data-seed", "0"):pair_config{seed = 0}), xsa.cache.key(with():pair_config()))
  -- errors exit with status 2 and a message (checked through a script)
  local exe = os.getenv("XSA_EXE")
  if not exe then return end
  if exe:sub(1, 1) ~= "/" then exe = (os.getenv("XSA_ROOT") or ".") .. "/" .. exe end
  local script = TMP .. "/seeds.lua"
  T.writefile(script, [[
local ex = xsa.experiment{name = "mine", options = xsa.study.options({})}
print("seeds", table.concat(ex.seeds, ","))]])
  local function run(flags)
    local p = io.popen(shq(exe) .. " " .. shq(script) .. " --out " .. shq(TMP .. "/o") .. " --plots " .. shq(TMP .. "/o") ..
      " " .. flags .. " 2>&1; echo status=$?")
    local out = p:read("a")
    p:close()
    return out
  end
  local out = run("--seeds 3,7,11")
  T.ok(out:find("seeds	3,7,11", 1, true) and out:find("status=0", 1, true), out)
  out = run("--seeds 0")
  T.ok(out:find("--seeds: '0' is not a positive number of seeds", 1, true) and out:find("status=2", 1, true), out)
  out = run("--seeds 3 --seed 1")
  T.ok(out:find("give --seed S (one seed) or --seeds (several), not both", 1, true) and out:find("status=2", 1, true), out)
  out = run("--seeds 3 --data-seed 1 --init-seed 1")
  T.ok(out:find("leave nothing to vary", 1, true) and out:find("status=2", 1, true), out)
end)

T.case("file names: entry, checkpoints, partial saves", function()
  local config = {a = 1}
  local f = experiment.files("/d", "part3-300steps", config)
  local hash = xsa.cache.path("/d", "part3-300steps", config):match("%-(%x+)%.json$")
  T.eq(f.entry, "/d/part3-300steps-" .. hash .. ".json")
  T.eq(f.checkpoints.sa, "/d/part3-sa-300steps-" .. hash .. ".safetensors")
  T.eq(f.checkpoint("xsa", "-at5"), "/d/part3-xsa-300steps-" .. hash .. "-at5.safetensors")
  T.eq(experiment.files("/d", "mine", config).checkpoints.init, "/d/mine-init-" ..
    xsa.cache.path("/d", "mine", config):match("%-(%x+)%.json$") .. ".safetensors")
  T.eq(experiment.pair_name("part3", {train = {steps = 300}, data = {seed = 0}, model = {seed = 0}}), "part3-300steps-seed0")
end)

T.case("cached results and the summary", function()
  local ex = new(nil, {config = {k = 1}})
  local calls = 0
  local function compute() calls = calls + 1; return {value = 3} end
  local r, status, entry = ex:cached(compute, {label = "mine thing"})
  T.eq(r.value, 3)
  T.eq(status, "miss")
  T.eq(entry, xsa.cache.path(TMP .. "/out", "mine", experiment.cache_config({k = 1})), "keyed by the configuration and the data files")
  r, status, entry = ex:cached(compute)
  T.eq(status, "record", "the finished run's record comes before the cache")
  T.ok(entry:find(ex.opts.results .. "/mine/mine-", 1, true), entry)
  T.eq(r.value, 3)
  T.eq(calls, 1)
  r, status = ex:cached(compute, {name = "other", config = {k = 2}, check = function() return false, "no" end})
  T.eq(status, "miss")
  T.eq(calls, 2)
  local path = ex:summary{cache = status, result = r, table = "| x |"}
  local s = assert(xsa.json.read_file(path))
  T.eq(path, TMP .. "/out/summary/mine.json")
  T.eq(s.part, "mine")
  T.eq(s.title, "Mine")
  T.eq(s.config.k, 1)
  T.ok(s.wall_s >= 0 and s.command and s.finished_at)
  T.eq(#s.figures, 0)
end)

T.case("a figure names the OpenBLAS kernel and threads its numbers were measured with", function()
  local function footer_of(ex)
    local fig = xsa.plot.figure{}
    fig:panel{}:line({1, 2}, {1, 2})
    ex:save_figure(fig, "f")
    return fig.footer
  end
  -- nothing measured (part 2's drawing): no footer
  T.eq(footer_of(new()), nil)
  -- a run computed here: this machine's kernel and threads
  local blas = xsa.blas()
  local ex = new(nil, {config = {k = 11}})
  ex:cached(function() return {value = 1} end)
  T.eq(footer_of(ex), string.format("Measured with the OpenBLAS %s kernel, %d thread%s", blas.core, blas.threads,
    blas.threads == 1 and "" or "s"))
  -- runs from records: the records' provenance, whatever this machine is
  local prov = {engine = "xsa 0", commit = "abc", blas = "Kernel9", threads = 3, cpu = "elsewhere", date = "2026-12-02T00:00:00Z"}
  xsa.record.write(ex.opts.results, "mine", "mine", {k = 12}, {value = 2}, prov)
  ex = new(nil, {config = {k = 12}})
  local _, status = ex:cached(function() error("a run with a record is not computed") end)
  T.eq(status, "record")
  T.eq(footer_of(ex), "Measured with the OpenBLAS Kernel9 kernel, 3 threads")
  -- runs of two kernels: each with its share
  prov.blas, prov.threads = "Kernel8", 1
  xsa.record.write(ex.opts.results, "mine", "mine", {k = 13}, {value = 3}, prov)
  ex:cached(function() end, {config = {k = 13}})
  T.eq(footer_of(ex), "Measured with the OpenBLAS kernels Kernel8, 1 thread (1 run); Kernel9, 3 threads (1 run)")
  -- a footer of the caller's own stays
  local fig = xsa.plot.figure{footer = "mine"}
  fig:panel{}:line({1, 2}, {1, 2})
  ex:save_figure(fig, "g")
  T.eq(fig.footer, "mine")
end)

T.case("results of another experiment: missing, with the command to run", function()
  local ex = new({"--out", TMP .. "/empty", "--plots", TMP .. "/plots", "--quick", "--seed", "3"})
  local r, msg = experiment.results("part3", ex.opts, {by = "mine", script = "scripts/part3_train.lua"})
  T.eq(r, nil)
  T.ok(msg:find("mine: no finished part3 run for this configuration (part3-10steps-seed3: missing)", 1, true), msg)
  T.ok(msg:find("Run scripts/part3_train.lua first with the same flags:\n  xsa scripts/part3_train.lua --seed 3 --out " ..
    TMP .. "/empty --plots " .. TMP .. "/plots --quick\n", 1, true), msg)
  -- a finished entry (checkpoints present) is loaded, not recomputed
  local config = experiment.pair_config(ex.opts, "part3")
  local f = experiment.files(ex.opts.out, "part3-10steps-seed3", experiment.cache_config(config))
  for _, p in pairs(f.checkpoints) do xsa.write_file_atomic(p, "x") end
  local fake = {status = "done", sa = {final_val = 3.5}, xsa = {final_val = 3.25}, checkpoints = f.checkpoints}
  -- an entry keyed without the data files is another entry: a miss
  xsa.cache.store(ex.opts.out, "part3-10steps-seed3", config, fake)
  T.eq(experiment.results("part3", ex.opts), nil, "an entry that does not name the data files is not used")
  xsa.cache.store(ex.opts.out, "part3-10steps-seed3", experiment.cache_config(config), fake)
  local got, c = experiment.results("part3", ex.opts)
  T.eq(got.xsa.final_val, 3.25)
  T.eq(xsa.cache.key(c), xsa.cache.key(config))
  os.remove(f.checkpoints.sa)
  T.eq(experiment.results("part3", ex.opts), nil, "a missing checkpoint is no result")
end)

-- A tiny paired run (real data and models, well under a second per run).
local TINY = {"--quick", "--steps", "4", "--eval-every", "2", "--eval-batches", "1", "--max-tokens", "6000",
  "--seq-len", "16", "--batch", "2", "--d-model", "32", "--n-layer", "1"}
local function tiny(extra)
  local argv = {"--out", TMP .. "/tiny", "--plots", TMP .. "/tiny"}
  for _, a in ipairs(TINY) do argv[#argv + 1] = a end
  for _, a in ipairs(extra or {}) do argv[#argv + 1] = a end
  return new(argv)
end
-- runs fn with stderr captured; returns fn's results (or its error) and the text
local function capture(fn)
  local old, text = io.stderr, {}
  io.stderr = {write = function(self, ...) for _, x in ipairs{...} do text[#text + 1] = tostring(x) end return self end,
    flush = function(self) return self end}
  local r = table.pack(pcall(fn))
  io.stderr = old
  return r, table.concat(text)
end
local function same_losses(a, b)
  T.eq(xsa.json.encode({a.steps, a.sa.train, a.sa.val, a.sa.step_loss, a.sa.final_val, a.xsa.train, a.xsa.val,
    a.xsa.step_loss, a.xsa.final_val}), xsa.json.encode({b.steps, b.sa.train, b.sa.val, b.sa.step_loss,
    b.sa.final_val, b.xsa.train, b.xsa.val, b.xsa.step_loss, b.xsa.final_val}))
end

T.case("a stopped paired run resumes from its saved state; --no-resume starts over", function()
  if not xsa.data.find(xsa.data.TEXT_NAMES) then error("the TinyStories corpus is missing") end
  local full = tiny():pair{checkpoints = true, label = "tiny"}
  local ex = tiny({"--no-cache"})
  local f = experiment.files(ex.opts.out, "mine-4steps-seed0", experiment.cache_config(ex:pair_config()))
  local function stop_at(n) return function(step) if step == n then error("interrupted!") end end end
  local r, err = capture(function() return ex:pair{checkpoints = true, label = "tiny", on_point = stop_at(2)} end)
  T.ok(not r[1] and tostring(r[2]):find("interrupted!", 1, true), tostring(r[2]))
  T.ok(err:find("tiny: interrupted after 2 of 4 steps; results so far written to", 1, true), err)
  local j = assert(xsa.json.read_file(f.state))
  T.eq(j.state.completed_steps, 2)
  T.eq(j.result.status, "interrupted")
  T.eq(j.key, xsa.cache.key(experiment.cache_config(ex:pair_config())), "the state's key covers the data files")
  -- resumed: the uninterrupted numbers and checkpoints, the state gone
  r, err = capture(function() return tiny({"--no-cache"}):pair{checkpoints = true, label = "tiny", what = "tiny run"} end)
  T.ok(r[1], tostring(r[2]))
  T.ok(err:find("resume: tiny run from step 2 of 4", 1, true), err)
  same_losses(r[2], full)
  for _, k in ipairs{"init", "sa", "xsa"} do
    T.ok(T.read(r[2].checkpoints[k]) == T.read(full.checkpoints[k]), k .. " checkpoint byte-identical")
  end
  for _, p in ipairs(f.state_files) do T.ok(not xsa.sys.exists(p), p .. " removed") end
  -- --no-resume: a saved state is discarded, training starts at step 0
  capture(function() return ex:pair{label = "tiny", on_point = stop_at(2)} end)
  T.ok(xsa.sys.exists(f.state))
  local seen = {}
  r, err = capture(function() return tiny({"--no-cache", "--no-resume"}):pair{label = "tiny",
    on_point = function(step) seen[#seen + 1] = step end} end)
  T.ok(r[1] and err:find("--no-resume, starting tiny over", 1, true), err)
  T.eq(table.concat(seen, ","), "0,2,4")
  same_losses(r[2], full)
  -- a state of another configuration under this name (a hash collision) or a
  -- damaged one is never used
  capture(function() return ex:pair{label = "tiny", on_point = stop_at(4)} end)
  j = assert(xsa.json.read_file(f.state))
  j.key = j.key:gsub('"seed":0', '"seed":1')
  xsa.json.write_file(f.state, j)
  r, err = capture(function() return tiny({"--no-cache"}):pair{label = "tiny"} end)
  T.ok(err:find("is for another configuration; starting over", 1, true), err)
  T.ok(not err:find("resume:", 1, true), err)
  same_losses(r[2], full)
  capture(function() return ex:pair{label = "tiny", on_point = stop_at(2)} end)
  os.remove(assert(xsa.json.read_file(f.state)).models.xsa)
  r, err = capture(function() return tiny({"--no-cache"}):pair{label = "tiny"} end)
  T.ok(err:find("names a model that cannot be loaded", 1, true), err)
  same_losses(r[2], full)
  -- --save-every: states between steps while training, none left at the end
  local saves, files = {}, {}
  r = capture(function() return tiny({"--no-cache", "--save-every", "1"}):pair{label = "tiny",
    on_point = function()
      local j = xsa.json.read_file(f.state)
      if not j then return end
      saves[#saves + 1] = j.state.completed_steps
      local n = 0
      for i = 2, #f.state_files do n = n + (xsa.sys.exists(f.state_files[i]) and 1 or 0) end
      files[#files + 1] = n .. (xsa.sys.exists(j.models.sa) and xsa.sys.exists(j.models.xsa) and "" or " missing")
    end} end)
  T.eq(table.concat(files, ","), "2,2", "the two models the state names, the other slot removed")
  -- at point 2 the latest state is step 1's (step 2's follows its point), at 4 step 3's (the last step saves none)
  T.eq(table.concat(saves, ","), "1,3")
  T.ok(not xsa.sys.exists(f.state))
end)

-- ex:pair and ex:group take one path (xsa.runs.run, xsa.train.runs): a
-- group of SA and XSA gives the pair's numbers to the bit, and a group has
-- the hooks a pair has (its probes are an after()).
T.case("a pair is a group of two: the same numbers; a group's on_start, on_point, after and check", function()
  if not xsa.data.find(xsa.data.TEXT_NAMES) then error("the TinyStories corpus is missing") end
  local pair = capture(function() return tiny({"--no-cache"}):pair{label = "tiny"} end)
  T.ok(pair[1], tostring(pair[2]))
  local seen, started, probed = {}, 0, nil
  local r, err = capture(function() return tiny({"--no-cache"}):group{name = "mine-group", label = "g",
    on_start = function(m, tl, vl) started = started + 1; T.ok(m and tl:num_batches() > 0 and vl:num_batches() > 0) end,
    on_point = function(step) seen[#seen + 1] = step end,
    after = function(res, m)
      T.eq(#m.models, 2)
      T.eq(table.concat(m.labels, ","), "sa,xsa")
      probed = m.models[2]:config().attention
      res.probe = {batches = 1, note = "probed"}
    end,
    check = function(res) return res.probe ~= nil, "no probe" end} end)
  T.ok(r[1], tostring(r[2]) .. err)
  local g, p = r[2], pair[2]
  T.eq(started, 1)
  T.eq(table.concat(seen, ","), "0,2,4")
  T.eq(probed, "xsa")
  T.eq(g.probe.note, "probed", "after() ran before the entry was stored")
  same_losses({steps = g.steps, sa = g.runs[1], xsa = g.runs[2]}, p)
  -- the entry is found again (its check passes), nothing trained
  seen = {}
  r = capture(function() return tiny():group{name = "mine-group", label = "g", on_point = function(step)
    seen[#seen + 1] = step end, check = function(res) return res.probe ~= nil, "no probe" end} end)
  T.ok(r[1] and (r[3] == "record" or r[3] == "hit"), tostring(r[3]))
  T.eq(#seen, 0, "read back, not trained")
  T.raises(function() tiny():group{name = "mine-group", nope = 1} end, "nope")
end)

-- A run is keyed by what determines its numbers, not by its group, name or
-- part (xsa.group): one that another group recorded is an ordinary cache
-- hit (xsa.reuse), and the runs still missing train beside it on the same
-- batches, with the numbers they get when trained with nothing reused.
T.case("a run another group recorded is not trained again: a sweep beside a pair, to the bit", function()
  if not xsa.data.find(xsa.data.TEXT_NAMES) then error("the TinyStories corpus is missing") end
  local function ex_in(dir, name, extra)
    local argv = {"--out", TMP .. "/" .. dir, "--plots", TMP .. "/" .. dir, "--results", TMP .. "/" .. dir .. "/records"}
    for _, a in ipairs(TINY) do argv[#argv + 1] = a end
    for _, a in ipairs(extra or {}) do argv[#argv + 1] = a end
    return new(argv, {name = name})
  end
  local function run(ex, o)
    local points = 0
    o.on_point = function() points = points + 1 end
    local r, err = capture(function() return ex:group(o) end)
    T.ok(r[1], tostring(r[2]) .. err)
    local written = select(2, err:gsub("record written", ""))
    return r[2], r[3], points, written, err
  end
  local function same_run(a, b, what)
    T.eq(xsa.json.encode({a.train, a.val, a.step_loss, a.final_val}), xsa.json.encode({b.train, b.val, b.step_loss,
      b.final_val}), what)
  end
  local sweep = {"sa", {attention = "xsa", lambda = 0.5}, "xsa"}
  local pair = run(ex_in("reuse", "first"), {name = "first-g"})
  local r2, _, _, written = run(ex_in("reuse", "second"), {name = "second-g", arms = sweep})
  T.eq(written, 1, "the sweep trained and recorded")
  T.ok(r2.runs[1].reused and r2.runs[3].reused and not r2.runs[2].reused, "SA and XSA(1) are the pair's")
  same_run(r2.runs[1], pair.runs[1], "SA as the pair recorded it")
  same_run(r2.runs[3], pair.runs[2], "XSA(1) as the pair recorded it")
  local ex2 = ex_in("reuse", "second")
  local keys = xsa.group.runs(ex2:pair_config{seed = 0}, xsa.record.data_identity())
  local sa_hits = xsa.reuse.all(ex2.opts.results, xsa.group.run_key(keys[1]))
  T.eq(#sa_hits, 1, "SA's copy in the sweep's record is not a second hit")
  T.eq(sa_hits[1].record.name, "first-g", "its own record is")
  local alone = run(ex_in("alone", "second"), {name = "second-g", arms = sweep})
  T.ok(not alone.runs[1].reused, "nothing to reuse: every arm trains")
  same_run(r2.runs[2], alone.runs[2], "XSA(0.5) beside reused runs: the numbers it gets alone")
  -- every run recorded by others: nothing trains, nothing is written
  local r4, status, points, w4, err = run(ex_in("reuse", "third"), {name = "third-g"})
  T.eq(status, "record")
  T.eq(points, 0, "not trained")
  T.eq(w4, 0, "no record of runs trained elsewhere")
  T.ok(err:find("every run from the records of others", 1, true), err)
  same_run(r4.runs[2], pair.runs[2], "XSA(1)")
  T.eq(r4.elapsed_s, 0, "no time spent now")
  -- --no-cache: trained again, found nowhere; a probe set asked for: the pair's runs have none of it
  local _, s5, p5 = run(ex_in("reuse", "third", {"--no-cache"}), {name = "third-g"})
  T.ok(s5 ~= "record" and p5 > 0, "--no-cache trains")
  local c = ex_in("reuse", "fourth"):pair_config{seed = 0}
  c.probe = {batches = 1}
  local _, s6, p6 = run(ex_in("reuse", "fourth"), {name = "fourth-g", config = c})
  T.ok(s6 ~= "record" and p6 > 0, "a group asking for a probe set reuses only runs probed on it")
end)

-- glibc's system() (os.execute) ignores SIGINT while its shell runs, so a
-- Ctrl-C that came then was lost and the run went on to the end (CI, under
-- load). Training and its saves run no shell; a stale temporary file of a
-- killed save is still removed, before training.
T.case("no shell while training: Ctrl-C is never ignored between steps", function()
  if not xsa.data.find(xsa.data.TEXT_NAMES) then error("the TinyStories corpus is missing") end
  local ex = tiny({"--no-cache", "--save-every", "1"})
  local f = experiment.files(ex.opts.out, "mine-4steps-seed0", experiment.cache_config(ex:pair_config()))
  local stale = f.state_files[2] .. ".tmp.99999"
  assert(io.open(stale, "w")):close()
  local real, calls, at = os.execute, 0, {}
  os.execute = function(...) calls = calls + 1; return real(...) end
  local r = capture(function() return ex:pair{label = "tiny",
    on_point = function(step) at[#at + 1] = step .. ":" .. calls end} end)
  os.execute = real
  T.ok(r[1], tostring(r[2]))
  local first = at[1]:match(":(%d+)")
  T.eq(table.concat(at, ","), "0:" .. first .. ",2:" .. first .. ",4:" .. first, "no os.execute between points (saves at steps 1 and 3)")
  T.ok(not xsa.sys.exists(stale), "a killed save's temporary file removed")
end)

T.case("a script built on it: --help, a bad flag", function()
  local exe = os.getenv("XSA_EXE")
  if not exe then print("skip: XSA_EXE not set") return end
  if exe:sub(1, 1) ~= "/" then exe = (os.getenv("XSA_ROOT") or ".") .. "/" .. exe end
  local script = TMP .. "/mine.lua"
  T.writefile(script, [[
local ex = xsa.experiment{name = "mine", summary = "mine!", options = xsa.study.options({steps = 5})}
ex:main(function() print("steps", ex.opts.steps) error("interrupted!") end)]])
  local p = io.popen(shq(exe) .. " " .. shq(script) .. " --help 2>&1")
  local out = p:read("a")
  p:close()
  T.ok(out:find("usage: xsa " .. script .. " [options]", 1, true) and out:find("mine!", 1, true), "the path it was run as: " .. out)
  p = io.popen(shq(exe) .. " " .. shq(script) .. " --out " .. shq(TMP .. "/o") .. " --plots " .. shq(TMP .. "/o") ..
    " --steps 9 2>&1; echo status=$?")
  out = p:read("a")
  p:close()
  T.ok(out:find("steps\t9", 1, true) and out:find("status=130", 1, true), out)
end)

os.execute("rm -rf " .. shq(TMP))
T.case("seed ranges: consecutive runs of three or more joined, strings read as numbers", function()
  T.eq(xsa.study.seed_ranges({}), "")
  T.eq(xsa.study.seed_ranges({4}), "4")
  T.eq(xsa.study.seed_ranges({0, 1}), "0, 1")
  T.eq(xsa.study.seed_ranges({0, 1, 2, 5, 7, 8, 9, 11, 12}), "0-2, 5, 7-9, 11, 12")
  T.eq(xsa.study.seed_ranges({"0", "1", "2", "3"}), "0-3")
end)

T.done()
