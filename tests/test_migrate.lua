-- test_migrate.lua: scripts/migrate_records.lua, the one-time conversion of
-- the records of groups of runs from format 1 (a pair's or a grid group's
-- result under the whole configuration's key) to format 2 (each run under
-- its own key, xsa.group). On copies of real records of every shape
-- (tests/fixtures/records1: part 3's pair, part 4's without step losses,
-- part 6's with probes and a reused SA, part 7's cosine recipe, the pilot's
-- groups of one, two records of one key; part 1's and part 5's, which are
-- no group): every number of the old file is found at its place in the new
-- one, bit for bit, the reader gives the same result before and after, a
-- second run changes nothing, and a damaged record stops it, named.
local T = require "testing"
local xsa = require "xsa"
local record, json = require "xsa.record", xsa.json
local ROOT = os.getenv("XSA_ROOT") or "."
local mig = dofile(ROOT .. "/scripts/migrate_records.lua")
local FIX = ROOT .. "/tests/fixtures/records1"
local FOLDERS = {"part1", "part3", "part4", "part5", "part6", "part7", "pilot"}
local TMP = T.tmpdir()
local shq = xsa.sys.shell_quote

local function fresh(name)
  local dir = TMP .. "/" .. name
  assert(os.execute("rm -rf " .. shq(dir) .. " && cp -r " .. shq(FIX) .. " " .. shq(dir)))
  return dir
end

-- every file of the folders: {path = text}
local function snapshot(dir)
  local out, n = {}, 0
  for _, f in ipairs(FOLDERS) do
    for _, name in ipairs(xsa.list_files(dir .. "/" .. f) or {}) do
      out[f .. "/" .. name], n = T.readfile(dir .. "/" .. f .. "/" .. name), n + 1
    end
  end
  return out, n
end

-- the records as the reader gives them, by folder and name (config from the file)
local function read_all(dir)
  local out = {}
  for path, text in pairs(snapshot(dir)) do
    local raw = json.decode(text)
    local folder = path:match("^([^/]+)/")
    local recs = record.find(dir, folder, raw.name, raw.config)
    out[folder .. "/" .. raw.name] = recs
  end
  return out
end

-- Where the test expects a number of the old result in the new record: a
-- pair's sa/xsa and config.sa/config.xsa and probe.sa/probe.xsa with its
-- run; a list's runs[i] and config.models[i] with run i; the rest as it was.
local function new_place(new, path)
  local arm_of = {sa = 1, xsa = 2}
  local top, rest = path[1], {table.unpack(path, 2)}
  if new.layout == "pair" and arm_of[top] then return new.runs[arm_of[top]].result, rest end
  if new.layout == "pair" and (top == "config" or top == "probe") and arm_of[path[2]] then
    return new.runs[arm_of[path[2]]][top == "config" and "model" or "probe"], {table.unpack(path, 3)}
  end
  if new.layout == "list" and top == "runs" then return new.runs[path[2]].result, {table.unpack(path, 3)} end
  if new.layout == "list" and top == "config" and path[2] == "models" then return new.runs[path[3]].model, {table.unpack(path, 4)} end
  return new.result, path
end

local function leaves(v, path, out)
  if type(v) ~= "table" then out[#out + 1] = {path = path, value = v}; return out end
  for k, x in pairs(v) do
    local p = table.move(path, 1, #path, 1, {})
    p[#p + 1] = k
    leaves(x, p, out)
  end
  return out
end

T.case("every number of every record survives, bit for bit, at its place", function()
  local dir = fresh("a")
  local before = snapshot(dir)
  local done = mig.run(dir, FOLDERS)
  T.eq(#done, 7, "the seven groups converted; part 1's and part 5's stay")
  local after = snapshot(dir)
  local n = 0
  for _, d in ipairs(done) do
    local rel_from, rel_to = d.from:sub(#dir + 2), d.to:sub(#dir + 2)
    T.eq(after[rel_from], nil, rel_from .. " removed")
    local old, new = json.decode(before[rel_from]), json.decode(after[rel_to])
    T.eq(new.format, "xsa-record/2")
    T.eq(rel_to:match("%-(%x+)%.json$"), rel_from:match("%-(%x+)%.json$"), "the provenance stamp stays")
    T.ok(mig.same(new.provenance, old.provenance) and mig.same(new.config, old.config) and mig.same(new.data, old.data),
      rel_to .. ": provenance, configuration and data as they were")
    for _, leaf in ipairs(leaves(old.result, {}, {})) do
      local at, rest = new_place(new, leaf.path)
      for _, k in ipairs(rest) do at = at[k] end
      T.ok(xsa.numbers.same(at, leaf.value),
        rel_to .. ": " .. table.concat(leaf.path, ".") .. " is " .. tostring(at) .. ", was " .. tostring(leaf.value))
      n = n + 1
    end
  end
  T.ok(n > 2000, "numbers compared: " .. n)
  for _, f in ipairs{"part1/part1-3ba176ee96ea-0aac1262.json", "part5/part5-seed0-353a6ad75713-76c81049.json"} do
    T.eq(after[f], before[f], f .. " is no group: as it was")
  end
end)

T.case("the reader gives the same records before and after, and a second run changes nothing", function()
  local dir = fresh("b")
  local before = read_all(dir) -- format 1, as the lab's older checkouts write them
  mig.run(dir, FOLDERS)
  local snap, count = snapshot(dir)
  local after = read_all(dir)
  T.eq(#after["pilot/pilot-4x256-T256-lr0.001-seed1000"], 2, "two records of one key: both, still compared")
  for k, recs in pairs(before) do
    T.eq(#after[k], #recs, k)
    for i, r in ipairs(recs) do
      T.ok(mig.same(after[k][i].result, r.result), k .. ": the result as the reader gives it")
      T.ok(mig.same(after[k][i].provenance, r.provenance), k .. ": its provenance")
      T.ok(mig.same(record.differences(after[k]), record.differences(recs)), k .. ": the cross-machine comparison")
    end
  end
  T.eq(#mig.run(dir, FOLDERS), 0, "a second run converts nothing")
  local again, count2 = snapshot(dir)
  T.eq(count2, count)
  for p, text in pairs(snap) do T.ok(again[p] == text, p .. " unchanged") end
end)

T.case("a run of a converted group is found under its key from another part's configuration", function()
  local dir = fresh("c")
  mig.run(dir, FOLDERS)
  local raw = json.decode(T.readfile(dir .. "/part7/" .. xsa.list_files(dir .. "/part7")[1]))
  local c = {}
  for k, v in pairs(raw.config) do c[k] = v end
  c.part = "part9" -- another part, another name: the runs are the same
  local runs = xsa.group.runs(c, record.data_identity())
  T.eq(xsa.group.run_key(runs[1]), raw.runs[1].key)
  T.eq(xsa.group.run_key(runs[2]), raw.runs[2].key)
end)

T.case("a damaged record stops the conversion, naming its file; the others stay readable", function()
  local dir = fresh("d")
  local victim = dir .. "/part4/part4-T128-seed0-3c4bc59e051c-4242da4b.json"
  local damages = {
    other_format = function(t) return (t:gsub('"xsa%-record/1"', '"xsa-record/9"', 1)) end,
    truncated = function(t) return t:sub(1, #t // 2) end,
    other_key = function(t) local r = json.decode(t); r.key = r.key:gsub('"steps":%d+', '"steps":1'); return json.encode(r) end,
    no_data = function(t) local r = json.decode(t); r.data = nil; return json.encode(r) end,
    runs_in_format1 = function(t) local r = json.decode(t); r.runs = {{arm = "sa"}}; return json.encode(r) end,
    another_part = function(t) local r = json.decode(t); r.part = "pilot"; return json.encode(r) end,
    another_name = function(t) local r = json.decode(t); r.name = "../../escaped"; return json.encode(r) end,
  }
  local good = T.readfile(victim)
  for what, edit in pairs(damages) do
    T.writefile(victim, edit(good))
    local ok, err = pcall(mig.run, dir, FOLDERS)
    T.ok(not ok and tostring(err):find(victim, 1, true), what .. ": " .. tostring(err))
    T.eq(T.readfile(victim), edit(good), what .. ": the damaged file is left as it was")
  end
  T.writefile(victim, good)
  T.ok(#mig.run(dir, FOLDERS) >= 1, "restored: converted")
end)

T.case("the command: --check says what it would convert and exits 1 until it is done", function()
  local dir = fresh("e")
  local function run(flags)
    return T.capture(string.format("cd %s && %s scripts/migrate_records.lua --results %s %s", shq(ROOT),
      shq(os.getenv("XSA_EXE") or (ROOT .. "/xsa")), shq(dir), flags))
  end
  local out, status = run("--check")
  T.ok(out:find("7 records to convert", 1, true) and status == 1, out)
  T.eq(#mig.run(dir, FOLDERS, true), 7, "--check wrote nothing")
  out, status = run("")
  T.ok(out:find("7 records converted", 1, true) and status == 0, out)
  out, status = run("--check")
  T.ok(out:find("0 records to convert", 1, true) and status == 0, out)
  out, status = run("--no-such-flag")
  T.eq(status, 2, "an unknown option is refused: " .. out)
end)

-- The lab's checkout (from before groups) keeps writing format 1 and keeps
-- its old files: copied back beside their conversions, they are the same
-- records, counted once; a copy whose numbers were edited is refused.
T.case("a format 1 record copied back beside its conversion is one record", function()
  local dir = fresh("f")
  local before = read_all(dir)
  mig.run(dir, FOLDERS)
  assert(os.execute("cp -r " .. shq(FIX) .. "/. " .. shq(dir)))
  local both = read_all(dir)
  for k, recs in pairs(before) do
    T.eq(#both[k], #recs, k .. ": counted once")
    for i, r in ipairs(recs) do T.ok(xsa.numbers.same(both[k][i].result, r.result), k) end
  end
  T.eq(both["part3/part3-300steps-seed0"][1].format, "xsa-record/2", "the converted one stands for both")
  local copy = dir .. "/part3/part3-300steps-seed0-e9b39dcc96af-efc17aeb.json"
  local raw = json.decode(T.readfile(copy))
  raw.result.xsa.final_val = raw.result.xsa.final_val - 1e-9
  T.writefile(copy, json.encode(raw))
  local ok, err = pcall(record.find, dir, "part3", raw.name, raw.config)
  T.ok(not ok and tostring(err):find(copy, 1, true) and tostring(err):find("edited", 1, true), tostring(err))
  T.writefile(copy, T.readfile(FIX .. "/part3/part3-300steps-seed0-e9b39dcc96af-efc17aeb.json"))
  T.eq(#mig.run(dir, FOLDERS), 7, "converting the copies again: the same files")
  T.eq(#read_all(dir)["part3/part3-300steps-seed0"], 1)
end)

T.done()
