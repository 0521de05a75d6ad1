-- test_record.lua: the study's record (xsa.record, lua/xsa/record.lua) and
-- how the experiments use it: the key covers the data's content, a run
-- with a record is never trained again, records of one key from two
-- machines are kept side by side and compared, --from-records leaves out
-- seeds without records, and a damaged or hostile record is refused with a
-- message naming its file, whatever the damage.
local T = require "testing"
local xsa = xsa or require "xsa"
local record = require "xsa.record"

local TMP = T.tmpdir()
local shq = xsa.sys.shell_quote
local EXE = xsa.experiment.exe()
local ROOT = xsa.sys.abspath(xsa.sys.root())

T.case("file identities: CRC-64 as xz computes it, folder listings", function()
  T.writefile(TMP .. "/h.txt", "hello xsa\n")
  -- `xz -C crc64` of these ten bytes stores check 7b2adf3bca089be3 (xz --robot -lvv)
  local sum, n = xsa.file_checksum(TMP .. "/h.txt")
  T.eq(sum, "crc64:7b2adf3bca089be3")
  T.eq(n, 10)
  T.writefile(TMP .. "/empty", "")
  T.eq(xsa.file_checksum(TMP .. "/empty"), "crc64:0000000000000000", "CRC-64 of nothing is 0")
  local none, why = xsa.file_checksum(TMP)
  T.eq(none, nil, "a folder has no checksum")
  T.ok(why:find(TMP, 1, true), why)
  xsa.sys.mkdir(TMP .. "/ls/sub")
  for _, f in ipairs{"b.json", "a.json", ".hidden"} do T.writefile(TMP .. "/ls/" .. f, "x") end
  os.execute("ln -s a.json " .. shq(TMP .. "/ls/link.json"))
  T.eq(table.concat(assert(xsa.list_files(TMP .. "/ls")), ","), "a.json,b.json", "regular files only, sorted")
  xsa.sys.mkdir(TMP .. "/ls/a")
  os.execute("ln -s sub " .. shq(TMP .. "/ls/linked"))
  T.eq(table.concat(assert(xsa.list_files(TMP .. "/ls", "folders")), ","), "a,sub", "folders only, sorted, no links")
  T.eq(table.concat(assert(xsa.list_files(TMP .. "/ls", "files")), ","), "a.json,b.json", "\"files\" is the default")
  T.raises(function() xsa.list_files(TMP .. "/ls", "links") end, "invalid option 'links'")
  local no, msg = xsa.list_files(TMP .. "/missing")
  T.eq(no, nil)
  T.ok(msg:find("missing", 1, true), msg)
end)

local config = {part = "t", data = {seq_len = 4}, model = {seed = 1}, train = {steps = 2}, lambda = 1}
local function result(v)
  return {status = "done", sa = {final_val = v, val = {9, v}}, xsa = {final_val = v - 0.5, val = {9, v - 0.5}},
    improvement_pct = 100 * 0.5 / v, elapsed_s = 3.5, checkpoints = {sa = "/somewhere/sa.safetensors"}}
end
local function prov(date, cpu)
  return {engine = "xsa test", commit = "unknown", blas = "Haswell", threads = 1, cpu = cpu, date = date}
end

T.case("the key: configuration, data by content, precision", function()
  local k = record.key(config)
  T.ok(k:find('"corpus":"crc64:', 1, true) and k:find('"vocab":"crc64:', 1, true), "the data files by content")
  T.ok(not k:find("tinystories", 1, true), "not by path")
  T.ok(record.key(config) == k, "stable")
  local c2 = {part = "t", data = {seq_len = 4}, model = {seed = 1, precision = "bf16"}, train = {steps = 2}, lambda = 1}
  T.ok(record.key(c2) ~= k, "precision")
  -- the same corpus bytes elsewhere: the same key; one byte changed: another
  local d = TMP .. "/data"
  xsa.sys.mkdir(d)
  local data = require "xsa.data"
  local enc, vocab = data.tokenizer_files()
  for _, f in ipairs{enc, vocab, data.tinystories_file()} do os.execute("cp " .. shq(f) .. " " .. shq(d)) end
  local code = "print(require('xsa.record').key{part = 't', data = {seq_len = 4}, model = {seed = 1}, train = {steps = 2}, lambda = 1})"
  local function key_with(dir)
    local p = io.popen("XSA_DATA=" .. shq(dir) .. " " .. shq(EXE) .. " -e " .. shq(code))
    local out = p:read("a")
    p:close()
    return out:gsub("\n$", "")
  end
  T.eq(key_with(d), k, "a copy of the same files")
  local f = io.open(d .. "/vocab.bpe", "r+b")
  f:seek("set", 100)
  f:write("#")
  f:close()
  T.ok(key_with(d) ~= k, "one byte of the tokenizer changed: another key")
end)

T.case("write, find, merge: the oldest counts, the others are compared", function()
  local dir = TMP .. "/res1"
  T.eq(#record.find(dir, "t", "run-seed0", config), 0, "no folder: no record")
  local p1 = record.write(dir, "t", "run-seed0", config, result(4.5), prov("2026-12-02T00:00:00Z", "machine B"))
  local p2 = record.write(dir, "t", "run-seed0", config, result(4.25), prov("2026-12-01T00:00:00Z", "machine A"))
  T.ok(p1 ~= p2, "a second record lands beside the first")
  T.ok(p1:match("/t/run%-seed0%-%x+%-%x+%.json$"), p1)
  local recs = record.find(dir, "t", "run-seed0", config)
  T.eq(#recs, 2)
  T.eq(recs[1].provenance.cpu, "machine A", "the oldest first")
  T.eq(recs[1].result.checkpoints, nil, "paths are not recorded")
  T.eq(recs[1].result.sa.final_val, 4.25)
  local diffs = {}
  for _, d in ipairs(record.differences(recs)) do diffs[d.field] = d end
  T.near(diffs["sa.final_val"].max_abs, 0.25, 0)
  T.eq(diffs["sa.val.2"].values[2], 4.5)
  T.eq(diffs["elapsed_s"], nil, "equal numbers are not listed")
  local other = {part = "t", data = {seq_len = 4}, model = {seed = 2}, train = {steps = 2}, lambda = 1}
  T.eq(#record.find(dir, "t", "run-seed0", other), 0, "another configuration under the same name: not these")
end)

-- A valid record's text, then every kind of damage: each is refused by
-- find with a message naming the file.
T.case("damaged and hostile records are refused, naming the file", function()
  local dir = TMP .. "/res2"
  local path = record.write(dir, "t", "run-seed0", config, result(4.25), prov("2026-12-01T00:00:00Z", "A"))
  local good = T.readfile(path)
  local rec = xsa.json.decode(good)
  local function variant(edit)
    local r = xsa.json.decode(good)
    edit(r)
    return xsa.json.encode(r)
  end
  local damages = {
    truncated = good:sub(1, #good // 2), empty = "", not_object = "[1, 2, 3]", number = "42",
    garbage = "\0\1\2binary", huge_number = good:gsub('"final_val": [%d.]+', '"final_val": 1e999', 1),
    wrong_format = variant(function(r) r.format = "xsa-record/0" end),
    other_key = variant(function(r) r.key = r.key:gsub('"steps":2', '"steps":3') end),
    no_result = variant(function(r) r.result = nil end),
    no_date = variant(function(r) r.provenance.date = nil end),
    control_chars = variant(function(r) r.provenance.cpu = "A\27[2J" end),
    long_string = variant(function(r) r.runs[1].result.label = string.rep("x", 5000) end),
    -- a group's runs (format 2): each under its key, in the key's order, nothing of them twice
    runs_swapped = variant(function(r) r.runs[1], r.runs[2] = r.runs[2], r.runs[1] end),
    run_key_of_another = variant(function(r) r.runs[2].key = r.runs[1].key end),
    arm_renamed = variant(function(r) r.runs[2].arm = "sa" end),
    run_dropped = variant(function(r) r.runs[2] = nil end),
    run_added = variant(function(r) r.runs[3] = r.runs[2] end),
    run_twice = variant(function(r) r.result.xsa = r.runs[2].result end),
    run_field = variant(function(r) r.runs[1].cmd = "rm -rf /" end),
    run_long_key = variant(function(r) r.runs[1].key = string.rep("k", 70000) end),
    no_layout = variant(function(r) r.layout = "tree" end),
    not_runs = variant(function(r) r.runs = {sa = r.runs[1], xsa = r.runs[2]} end),
    format1_with_runs = variant(function(r) r.format = record.FORMAT end),
    deep = variant(function(r)
      local t = {}
      r.result.deep = t
      for _ = 1, 40 do t.x = {}; t = t.x end
    end),
    fails_check = variant(function(r) r.result.status = "stopped" end),
    oversized = good:sub(1, -3) .. ', "pad": "' .. string.rep(" ", record.MAX_BYTES) .. '"}',
  }
  local check = function(r) return r.status == "done", "did not finish" end
  local n = 0
  for what, text in pairs(damages) do
    os.remove(path)
    T.writefile(path, text)
    local ok, err = pcall(record.find, dir, "t", "run-seed0", config, check)
    T.ok(not ok, what .. ": refused")
    T.ok(tostring(err):find(path, 1, true) and tostring(err):find("refused", 1, true), what .. ": " .. tostring(err))
    n = n + 1
  end
  T.ok(n >= 26, "every damage tried")
  -- a record that names files is only data: nothing it names is opened or run
  os.remove(path)
  T.writefile(path, variant(function(r) r.result.checkpoints = {sa = "/etc/passwd"}; r.result.cmd = "$(touch " .. TMP .. "/pwned)" end))
  local recs = record.find(dir, "t", "run-seed0", config)
  T.eq(#recs, 1, "a record with extra fields still reads")
  T.ok(not xsa.sys.exists(TMP .. "/pwned"), "nothing it names ran")
  T.eq(rec.format, record.GROUP_FORMAT, "a pair's record is a group's")
end)

-- Every record of some folders, for accounting (scripts/results.lua counts
-- each run's CPU time once, also the runs no part's table reads): each read
-- only where find would read it, each run's records once, the damage of
-- one a refusal naming its file.
T.case("record.all: every run's records of the folders, each once; a misplaced or damaged one refused", function()
  local dir = TMP .. "/res-all"
  T.eq(#record.all(dir, {"t", "u"}), 0, "no folders: no records")
  local a = record.write(dir, "t", "run-seed0", config, result(4.5), prov("2026-12-02T00:00:00Z", "B"))
  record.write(dir, "t", "run-seed0", config, result(4.25), prov("2026-12-01T00:00:00Z", "A"))
  -- another run with the same provenance (one stamp): a record of its own, not a copy
  local c1 = {part = "t", data = {seq_len = 4}, model = {seed = 2}, train = {steps = 2}, lambda = 1}
  record.write(dir, "t", "run-seed1", c1, result(4), prov("2026-12-01T00:00:00Z", "A"))
  local u = {part = "u", data = {seq_len = 4}, model = {seed = 1}, train = {steps = 2}, lambda = 1}
  record.write(dir, "u", "run-seed0", u, result(5), prov("2026-12-03T00:00:00Z", "C"))
  T.writefile(dir .. "/t/notes.txt", "not a record")
  local all = record.all(dir, {"t", "u", "missing"})
  T.eq(#all, 4, "two records of one run, one of another, one in the second folder")
  local seen = {}
  for _, r in ipairs(all) do seen[r.folder .. ":" .. r.provenance.cpu .. ":" .. r.result.sa.final_val] = true end
  for _, k in ipairs{"t:A:4.25", "t:B:4.5", "t:A:4", "u:C:5"} do T.ok(seen[k], k) end
  -- a record where find would never read it: another folder, or a file name not its key's
  local text = T.readfile(a)
  local moved = dir .. "/u/" .. a:match("[^/]+$")
  T.writefile(moved, text)
  local ok, err = pcall(record.all, dir, {"u"})
  T.ok(not ok and tostring(err):find(moved, 1, true) and tostring(err):find("refused", 1, true), tostring(err))
  os.remove(moved)
  local renamed = dir .. "/t/run-seed0-000000000000-00000000.json"
  T.writefile(renamed, text)
  ok, err = pcall(record.all, dir, {"t"})
  T.ok(not ok and tostring(err):find(renamed, 1, true), tostring(err))
  os.remove(renamed)
  T.writefile(a, text:sub(1, #text // 2))
  ok, err = pcall(record.all, dir, {"t"})
  T.ok(not ok and tostring(err):find(a, 1, true) and tostring(err):find("refused", 1, true), tostring(err))
  T.writefile(a, text)
  T.eq(#record.all(dir, {"t"}), 3, "restored")
  T.raises(function() record.all(dir, {"../etc"}) end, "bad part name")
end)

-- Runs, not pairs: a run's key is what determines its numbers (its model
-- with its attention and lambda, data, training, precision), never the part
-- or the group it was trained in; a group's record lists its runs' keys.
T.case("a run's key: model with attention and lambda, data, training, precision; not the part", function()
  local group = require "xsa.group"
  local id = record.data_identity()
  local function keys(c)
    local out = {}
    for i, r in ipairs(group.runs(c, id)) do out[i] = group.run_key(r) end
    return out
  end
  local base = keys(config)
  T.eq(#base, 2, "a pair is a group of two")
  local elsewhere = keys{part = "other", data = {seq_len = 4}, model = {seed = 1}, train = {steps = 2}, lambda = 1}
  T.eq(elsewhere[1], base[1], "another part's SA of the same configuration: the same run")
  T.eq(elsewhere[2], base[2], "and the same XSA")
  local lam = keys{part = "t", data = {seq_len = 4}, model = {seed = 1}, train = {steps = 2}, lambda = 0.5}
  T.eq(lam[1], base[1], "SA has no lambda: the same run at any lambda")
  T.ok(lam[2] ~= base[2], "XSA(0.5) is another run than XSA(1)")
  -- the lambda sweep as one group of SA and XSA at each lambda: the same runs as the pairs'
  local sweep_config = {part = "t", data = {seq_len = 4}, model = {seed = 1}, train = {steps = 2},
    arms = {"sa", {attention = "xsa", lambda = 0.5}, {attention = "xsa", lambda = 1}}}
  local sweep = keys(sweep_config)
  T.eq(sweep[1], base[1], "the sweep's SA is the pair's")
  T.eq(sweep[2], lam[2], "its XSA(0.5) is the lambda 0.5 pair's")
  T.eq(sweep[3], base[2], "its XSA(1) is the pair's")
  -- written as one group (xsa.train.runs' layout) and read back as it was given
  local runs = {}
  for i = 1, 3 do runs[i] = {label = "run " .. i, final_val = 4 + i / 8, val = {9, 4 + i / 8}} end
  local res = {status = "done", runs = runs, config = {lr = 1, models = {{attention = "sa"}, {attention = "xsa"},
    {attention = "xsa"}}}, elapsed_s = 2}
  local sp = record.write(TMP .. "/res6", "t", "sweep-seed0", sweep_config, res, prov("2026-12-01T00:00:00Z", "A"))
  local sraw = xsa.json.decode(T.readfile(sp))
  T.eq(sraw.layout, "list")
  T.eq(sraw.runs[2].key, lam[2])
  T.eq(sraw.runs[3].model.attention, "xsa")
  local back = record.find(TMP .. "/res6", "t", "sweep-seed0", sweep_config)[1].result
  T.ok(xsa.numbers.same(back.runs, runs) and xsa.numbers.same(back.config.models, res.config.models), "the runs as given")
  T.eq(back.config.lr, 1)
  -- a list's probes (result.probes, in arm order) are its runs': each in its run's entry
  res.probes = {{cos = 0.5}, {cos = 0.25}, {cos = 0.125}}
  local pp = record.write(TMP .. "/res7", "t", "sweep-seed0", sweep_config, res, prov("2026-12-01T00:00:00Z", "A"))
  local praw = xsa.json.decode(T.readfile(pp))
  T.eq(praw.runs[2].probe.cos, 0.25, "run 2's probe in its entry")
  T.eq(praw.result.probes, nil, "and nowhere else")
  T.ok(xsa.numbers.same(record.find(TMP .. "/res7", "t", "sweep-seed0", sweep_config)[1].result.probes, res.probes),
    "read back in arm order")
  praw.result.probes = {{cos = 1}}
  T.writefile(pp, xsa.json.encode(praw))
  T.raises(function() record.find(TMP .. "/res7", "t", "sweep-seed0", sweep_config) end, "result.probes holds run 1's probe")
  T.ok(keys{part = "t", data = {seq_len = 4, seed = 3}, model = {seed = 1}, train = {steps = 2}, lambda = 1}[1] ~= base[1],
    "another batch order: another run")
  T.ok(keys{part = "t", data = {seq_len = 4}, model = {seed = 1, precision = "bf16"}, train = {steps = 2}, lambda = 1}[1] ~=
    base[1], "another precision: another run")
  T.ok(base[1]:find('"attention":"sa"', 1, true) and base[2]:find('"attention":"xsa"', 1, true), "the attention is in it")
  T.ok(not base[1]:find('"part"', 1, true), "the part is not")
  T.eq(group.runs({part = "t", model = {}}, id), nil, "no training configuration: no group (format 1)")
  -- a group record's file lists its runs under their keys, in order
  local path = record.write(TMP .. "/res4", "t", "run-seed0", config, result(4.25), prov("2026-12-01T00:00:00Z", "A"))
  local raw = xsa.json.decode(T.readfile(path))
  T.eq(raw.runs[1].key, base[1])
  T.eq(raw.runs[2].key, base[2])
  T.eq(raw.runs[2].result.final_val, 3.75, "XSA's own numbers are with its key")
  T.eq(raw.result.sa, nil, "not twice")
  T.eq(record.find(TMP .. "/res4", "t", "run-seed0", config)[1].result.xsa.final_val, 3.75, "read back as the trainer gave it")
end)

-- The lab's checkouts from before groups write format 1 records of pairs
-- and of the grid's groups: they are read as they are, beside format 2 ones.
T.case("a format 1 record of a group (written before groups) is still read", function()
  local dir = TMP .. "/res5"
  local p2 = record.write(dir, "t", "run-seed0", config, result(4.25), prov("2026-12-02T00:00:00Z", "new"))
  local old = {format = record.FORMAT, part = "t", name = "run-seed0", key = record.legacy_key(config), config = config,
    data = record.data_identity(), precision = "f32", result = result(4.5), provenance = prov("2026-12-01T00:00:00Z", "old")}
  old.result.checkpoints = nil
  local p1 = string.format("%s/t/run-seed0-%s-%s.json", dir, xsa.cache.hash(old.key):sub(1, 12), "0000abcd")
  T.writefile(p1, xsa.json.encode(old))
  local recs = record.find(dir, "t", "run-seed0", config)
  T.eq(#recs, 2, "both formats")
  T.eq(recs[1].provenance.cpu, "old", "the oldest counts, whatever its format")
  T.eq(recs[1].result.sa.final_val, 4.5)
  T.eq(recs[2].path, p2)
  T.eq(#record.differences(recs) > 0, true, "and they are compared")
  -- a format 2 record under the format 1 key (or the reverse) is refused
  local moved = string.format("%s/t/run-seed0-%s-%s.json", dir, xsa.cache.hash(old.key):sub(1, 12), "0000dcba")
  T.writefile(moved, T.readfile(p2))
  local ok, err = pcall(record.find, dir, "t", "run-seed0", config)
  T.ok(not ok and tostring(err):find(moved, 1, true), tostring(err))
end)

-- The part scripts through xsa.experiment: a quick part 3 of two steps.
local function part3(args)
  local cmd = string.format("cd %s && %s scripts/part3_train.lua --quick --steps 2 --eval-every 1 --out %s --plots %s " ..
    "--results %s %s 2>&1", shq(ROOT), shq(EXE), shq(TMP .. "/out"), shq(TMP .. "/plots"), shq(TMP .. "/res3"), args)
  local p = io.popen(cmd)
  local out = p:read("a")
  local ok = p:close()
  local written, hits = 0, 0
  for _ in out:gmatch("record written") do written = written + 1 end
  for _ in out:gmatch("\nrecord: ") do hits = hits + 1 end
  return ok, out, written, hits
end

T.case("a run with a record is not trained again; more seeds train only the new ones", function()
  local ok, out, written = part3("--seeds 2")
  T.ok(ok, out)
  T.eq(written, 2, "two seeds, two records")
  T.ok(out:find("\ntrained now: [%d.]+ s over 2 paired runs %("), "trained here, said so: " .. out)
  os.execute("rm -rf " .. shq(TMP .. "/out")) -- another machine: no cache, only the records
  ok, out, written = part3("--seeds 3")
  T.ok(ok, out)
  T.eq(written, 1, "--seeds 3 after 2 trains one pair")
  T.ok(not out:find("seed 0 step", 1, true), "seed 0 was not trained")
  -- the time of the recorded pairs is when and where they were recorded, never as if run now (issue 39)
  local cpu = xsa.record.provenance().cpu
  local line = out:match("\n(recorded [^\n]*)")
  T.ok(line and line:find("^recorded %d%d%d%d%-%d%d%-%d%d on " .. cpu:gsub("%p", "%%%0") .. ": %d+ s of training over 2 paired runs; " ..
    "trained now: [%d.]+ s %("), tostring(line))
  local s3 = assert(xsa.json.read_file(TMP .. "/out/summary/part3.json"))
  T.eq(s3.timing, (line:gsub(" %([%d.]+ s evaluating.*$", "")), "the summary (and the report) say the same")
  ok, out, written = part3("--seeds 5 --from-records")
  T.ok(ok, out)
  T.eq(written, 0, "--from-records trains nothing")
  T.ok(out:find("no complete record for seeds 3, 4 (2 runs missing: ", 1, true), out)
  T.ok(out:find("N=3", 1, true), "the verdict over the three seeds that have records")
  ok, out = part3("--seed 9 --from-records")
  T.ok(not ok and out:find("no runs of this configuration have records", 1, true), out)
  -- --no-cache trains again and lands a second record beside the first
  ok, out, written = part3("--seed 0 --no-cache")
  T.ok(ok, out)
  T.eq(written, 1)
  local files = xsa.list_files(TMP .. "/res3/part3")
  T.eq(#files, 4, "three runs, seed 0 twice")
  -- the summary compares the two: same machine, kernel and threads, so no
  -- number differs (times aside); the published comparison reads this
  ok, out = part3("--seed 0 --from-records")
  T.ok(ok, out)
  local s = assert(xsa.json.read_file(TMP .. "/out/summary/part3.json"))
  local used = s.records[1]
  T.eq(#s.records, 1)
  T.eq(used.others, 1, "the second record is counted")
  T.eq(#used.kernels, 2, "both records' kernels are named")
  T.eq(used.kernels[1], used.kernels[2])
  T.eq(#used.differences, 0, "a rerun on the same kernel and threads gives the same numbers")
end)

T.case("--quick records stay out of the study's record", function()
  local before = xsa.list_files(ROOT .. "/results/part3") or {}
  local p = io.popen(string.format("cd %s && env -u XSA_RESULTS %s scripts/part3_train.lua --quick --steps 1 --out %s --plots %s 2>&1",
    shq(ROOT), shq(EXE), shq(TMP .. "/q"), shq(TMP .. "/q")))
  local out = p:read("a")
  T.ok(p:close(), out)
  T.ok(out:find(TMP .. "/q/records/part3/", 1, true), "a quick run records into OUT/records: " .. out)
  T.eq(#(xsa.list_files(ROOT .. "/results/part3") or {}), #before, "results/ unchanged")
end)

-- Files named inside data: a summary from elsewhere naming files outside
-- the report's folders gets them refused, never read or rendered.
T.case("the report opens only the figures it would have written itself", function()
  local plots = TMP .. "/plots-own"
  local own = xsa.report.own_figure
  T.ok(own({name = "part3_loss", gp = plots .. "/part3_loss.gp", path = plots .. "/part3_loss.png"}, plots), "its own")
  for _, f in ipairs{
    {name = "x", gp = "/etc/passwd", path = plots .. "/x.png"},
    {name = "x", gp = plots .. "/x.gp", path = "/etc/shadow"},
    {name = "../x", gp = plots .. "/../x.gp", path = plots .. "/../x.png"},
    {name = "x`id`", gp = plots .. "/x`id`.gp", path = plots .. "/x`id`.png"},
    {name = 7}, "a string", {name = "x", gp = TMP .. "/x.gp", path = TMP .. "/x.png"}} do
    local ok, why = own(f, plots)
    T.ok(not ok and type(why) == "string", xsa.json.encode(f))
  end
  -- end to end: a summary naming /etc/passwd as its figure: a warning, no figure, nothing read
  local out = TMP .. "/out-own"
  xsa.sys.mkdir(out .. "/summary")
  xsa.json.write_file(out .. "/summary/part1.json", {part = "part1", title = "x", result = {layers = {}},
    figures = {{name = "evil", gp = "/etc/passwd", path = "/etc/passwd"}}})
  local html, info = xsa.report.build{out = out, plots = plots, sections = dofile(xsa.sys.root() .. "/scripts/parts.lua").sections()}
  T.ok(not html:find("root:", 1, true), "nothing of the named file in the page")
  T.ok(table.concat(info.warnings, "\n"):find("refused", 1, true), table.concat(info.warnings, "\n"))
end)

-- A --jobs worker that dies of a signal is a crash naming its seed and the
-- signal, not an interrupt; the other workers' finished runs are kept.
T.case("worker exit statuses", function()
  local st = xsa.experiment.worker_status
  T.eq(st(0), "ok")
  T.eq(st(130), "interrupted")
  T.eq(st(nil), "interrupted", "the recording shell never ran: the job was stopped")
  local kind, why = st(137)
  T.eq(kind, "crashed")
  T.ok(why:find("signal 9", 1, true) and why:find("out-of-memory", 1, true), why)
  kind, why = st(139)
  T.ok(kind == "crashed" and why:find("SIGSEGV", 1, true), why)
  kind, why = st(1)
  T.ok(kind == "failed" and why:find("exit status 1", 1, true), why)
end)

T.case("a worker killed by SIGKILL is reported as a crash of its seed", function()
  local dir = TMP .. "/crash"
  local e = dir .. ".err"
  local sh = string.format([[
cd %s && %s scripts/part3_train.lua --quick --steps 100000 --eval-every 50000 --seeds 2 --jobs 2 --out %s --plots %s --results %s >/dev/null 2>%s & pid=$!
i=0; while ! grep -q "seed 1 step 0/" %s 2>/dev/null; do sleep 0.1; i=$((i+1)); [ $i -gt 1200 ] && break; done
pkill -KILL -f -- "%s.*--seeds 1, --[w]orker"; sleep 1; pkill -INT -f -- "%s.*--seeds 0, --[w]orker"; wait $pid; echo "status=$?"]],
    shq(ROOT), shq(EXE), shq(dir), shq(dir), shq(dir .. "/records"), shq(e), shq(e), dir, dir)
  local p = io.popen("sh -c " .. shq(sh))
  local res = p:read("a")
  p:close()
  local err = T.readfile(e) or ""
  -- status 1, not 130: seed 0 was stopped by Ctrl-C, but a crash outranks it
  T.ok(res:find("status=1\n", 1, true), res .. err)
  T.ok(err:find("seed 1 crashed: killed by signal 9", 1, true), err)
end)

-- No run trained twice for two parts: part 6's sweep of a seed is one
-- group whose SA and XSA(1) are part 3's runs, found by their keys (lambda
-- 0 is SA: XSA(0) computes what SA computes), with part 5's probes; the
-- numbers equal those of a sweep that trains them all.
T.case("part 6 takes lambda 1 and 0 from part 3's records and part 5's probes: the same numbers as training", function()
  local function run(script, dir, extra)
    local probe = script == "part3_train.lua" and "" or "--probe-batches 2 --probe-tokens 6000 --probe-batch 2"
    local cmd = string.format("cd %s && %s scripts/%s --steps 4 --max-tokens 6000 --batch 2 --eval-every 2 " ..
      "--eval-batches 2 --seq-len 32 --seeds 2 %s --out %s --plots %s --results %s %s 2>&1", shq(ROOT), shq(EXE),
      script, probe, shq(dir .. "/out"), shq(dir .. "/plots"), shq(dir .. "/res"), extra or "")
    local p = io.popen(cmd)
    local out = p:read("a")
    T.ok(p:close(), out)
    local trained = 0
    for _ in out:gmatch("record written") do trained = trained + 1 end
    return assert(xsa.json.read_file(dir .. "/out/summary/" .. script:match("^(part%d)") .. ".json"), out), trained
  end
  local reused, alone = TMP .. "/reuse", TMP .. "/alone"
  run("part3_train.lua", reused)
  run("part5_bias_trained.lua", reused)
  local a, n_a = run("part6_lambda_sweep.lua", reused, "--lambdas 0,0.5,1")
  local b, n_b = run("part6_lambda_sweep.lua", alone, "--lambdas 0,0.5,1")
  T.eq(n_a, 2, "one group per seed, training only lambda 0.5")
  T.eq(n_b, 2, "without part 3's records: one group per seed, every arm trained once")
  for i, lam in ipairs{0, 0.5, 1} do
    local x, y = a.result.runs[i], b.result.runs[i]
    T.eq(x.lambda, lam)
    for _, k in ipairs{"sa_val", "xsa_val", "improvement_pct", "xsa_post_cos", "sa_post_cos"} do
      T.eq(x[k], y[k], string.format("lambda %g: %s", lam, k))
    end
    for s = 1, 2 do T.eq(x.seeds[s].xsa_post_cos_all, y.seeds[s].xsa_post_cos_all, "per seed, all positions") end
  end
  T.eq(a.result.runs[1].improvement_pct, 0, "XSA(0) is SA")
end)

T.case("relative paths resolve against the real working directory, not $PWD", function()
  local here = assert(xsa.cwd())
  local p = io.popen("cd " .. shq(TMP) .. " && PWD=/nonexistent " .. shq(EXE) .. " -e " .. shq("print(xsa.sys.abspath('x'))"))
  local out = p:read("a")
  p:close()
  T.eq(out, TMP .. "/x\n", "a stale $PWD is ignored")
  T.ok(here:sub(1, 1) == "/", here)
end)

T.done()
