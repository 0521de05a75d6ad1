-- test_parts.lua: the study's parts as declarations and the one scheduler.
-- xsa.schedule on its own (waves, order, dependencies, what is refused,
-- skipping), then a throwaway part: one new file beside a copy of scripts/
-- and one line in its registry (scripts/parts.lua) make it a part that
-- run_all runs (serially and with --jobs: its units need each other), that
-- the report shows and that make results (results.lua) publishes.
local T = require "testing"
local xsa = xsa or require "xsa"
local schedule = require "xsa.schedule"

local EXE = os.getenv("XSA_EXE")
local ROOT = os.getenv("XSA_ROOT") or "."
if EXE and EXE:sub(1, 1) ~= "/" then EXE = ROOT .. "/" .. EXE end
local shq = xsa.sys.shell_quote

local TMP = os.tmpname()
os.remove(TMP)
xsa.sys.mkdir(TMP)

-- Units that log the order they ran in; `after` as given.
local function units_of(spec, log)
  local units = {}
  for i, s in ipairs(spec) do
    units[i] = {key = s[1], after = s[2], seed = s.seed, run = function(deps)
      log[#log + 1] = s[1]
      if s.fail then error(s.fail, 0) end
      local v = i
      for _, k in ipairs(s[2] or {}) do v = v + 10 * deps[k] end
      return v
    end}
  end
  return units
end

T.case("schedule: waves, results in unit order, each unit once", function()
  local log = {}
  local units = units_of({{"a"}, {"b", {"a"}}, {"c"}, {"d", {"b", "c"}}}, log)
  local waves = schedule.levels(units)
  T.eq(#waves, 3)
  T.eq(table.concat(waves[1], ","), "1,3", "a and c need nothing")
  T.eq(table.concat(waves[2], ","), "2")
  T.eq(table.concat(waves[3], ","), "4")
  local res, gone = schedule.serial(units)
  T.eq(table.concat(log, ","), "a,b,c,d", "list order, every unit once")
  T.eq(res[1], 1)
  T.eq(res[2], 12, "b got a's result")
  T.eq(res[4], 4 + 10 * 12 + 10 * 3, "d got b's and c's")
  T.eq(#gone, 0)
  for k in pairs(log) do log[k] = nil end
  T.eq(schedule.one(units, 4), 154, "one unit with what it needs")
  T.eq(table.concat(log, ","), "a,b,c,d")
end)

T.case("schedule: refused lists name the unit", function()
  local function refused(spec, needle)
    local ok, err = pcall(schedule.levels, units_of(spec, {}))
    T.ok(not ok and tostring(err):find(needle, 1, true), tostring(err))
  end
  refused({{"a", {"b"}}, {"b"}}, "unit 'a' needs 'b', which is not listed before it")
  refused({{"a"}, {"a"}}, "two units have the key 'a'")
  refused({{"a", {"a"}}}, "unit 'a' needs 'a'")
  local ok, err = pcall(schedule.serial, {{key = "x"}})
  T.ok(not ok and tostring(err):find("unit 1 needs a string key and a run function", 1, true), tostring(err))
end)

T.case("schedule: a skipped unit leaves out the units that need it; other errors are raised", function()
  local log = {}
  local units = units_of({{"a", fail = "no record"}, {"b", {"a"}}, {"c"}}, log)
  local res, gone = schedule.serial(units, {skip = function(_, e) return e == "no record" end})
  T.eq(table.concat(gone, ","), "1,2")
  T.eq(res[3], 3)
  T.eq(table.concat(log, ","), "a,c", "b never ran")
  local ok, err = pcall(schedule.serial, units_of({{"a", fail = "broken"}}, {}))
  T.ok(not ok and err == "broken", tostring(err))
end)

-- ---------------------------------------------------------------------------
-- a throwaway part

local PART = [[
-- part99_demo.lua: a throwaway part (tests/test_parts.lua): per seed a unit
-- "a" and a unit "b" that needs a's result.
local xsa = xsa or require "xsa"

local P = {name = "part99", title = "Demo part", options = xsa.study.options({}), quick = {}, publish = {seeds = 2},
  report = {about = "A part made of one file.", words = function(s) return {"total " .. s.result.total .. "."} end}}

function P.units(ex)
  local units = {}
  for _, seed in ipairs(ex.seeds) do
    local a = "seed " .. seed .. " a"
    units[#units + 1] = {key = a, seed = seed, run = function()
      return (ex:cached(function() return {v = seed + 1} end, {name = "part99-a-seed" .. seed, config = {part = "part99", seed = seed}}))
    end}
    units[#units + 1] = {key = "seed " .. seed .. " b", seed = seed, after = {a}, run = function(d)
      return (ex:cached(function() return {v = 10 * d[a].v} end, {name = "part99-b-seed" .. seed, config = {part = "part99", seed = seed, b = 1}}))
    end}
  end
  return units
end

function P.main(ex, results)
  local values, total = {}, 0
  for i, r in ipairs(results) do values[i], total = r.v, total + r.v end
  print("part99 values " .. table.concat(values, ","))
  ex:summary{result = {total = total, values = values}}
end

return xsa.experiment.part(P, ...)
]]

-- A copy of scripts/ with the part added: one new file, one registry line.
local function study_with_part()
  local dir = TMP .. "/scripts"
  os.execute("cp -r " .. shq(ROOT .. "/scripts") .. " " .. shq(dir))
  T.writefile(dir .. "/part99_demo.lua", PART)
  local reg = assert(T.read(dir .. "/parts.lua"))
  local n
  reg, n = reg:gsub('(\n  "[%w_]+%.lua",\n)(}\n)', '%1  "part99_demo.lua",\n%2', 1) -- after the last part
  T.eq(n, 1, "one registry line")
  T.writefile(dir .. "/parts.lua", reg)
  return dir
end

local function sh(cmd)
  local p = io.popen("cd " .. shq(TMP) .. " && " .. cmd .. " 2>&1")
  local out = p:read("a")
  local ok, _, code = p:close()
  return ok and 0 or code, out
end

if not EXE then
  print("skip: XSA_EXE not set")
  T.done()
end

T.case("a part is one new file plus one registry line", function()
  local dir = study_with_part()
  local x = shq(EXE)
  local function flags(out) -- records of their own too, never the checkout's
    return " --out " .. shq(TMP .. "/" .. out) .. " --plots " .. shq(TMP .. "/" .. out .. "/plots") .. " --results " ..
      shq(TMP .. "/" .. out .. "/records")
  end
  -- run_all knows it (its --skip/--only names come from the registry)
  local code, out = sh(x .. " " .. shq(dir .. "/run_all.lua") .. " --skip part42")
  T.eq(code, 2)
  local names = {}
  for _, d in ipairs(dofile(ROOT .. "/scripts/parts.lua").load()) do names[#names + 1] = d.name end
  T.ok(out:find("(the parts: " .. table.concat(names, ", ") .. ", part99, report)", 1, true), out)
  -- run_all runs it and the report shows it
  code, out = sh(x .. " " .. shq(dir .. "/run_all.lua") .. " --only part99,report --seeds 2" .. flags("serial"))
  T.eq(code, 0, out)
  T.ok(out:find("part99 values 1,10,2,20", 1, true), "results in unit order, b after its a: " .. out)
  local html = T.read(TMP .. "/serial/plots/report.html") or ""
  T.ok(html:find('<h2 id="part99">Demo part</h2>', 1, true), "the report's section")
  T.ok(html:find("A part made of one file.", 1, true) and html:find("total 33.", 1, true), "its texts")
  T.ok(html:find("<code>xsa scripts/part99_demo.lua", 1, true) == nil, "present, not listed as missing")
  -- with --jobs: wave by wave in child processes, the same results
  code, out = sh(x .. " " .. shq(dir .. "/part99_demo.lua") .. " --seeds 2 --jobs 2" .. flags("jobs"))
  T.eq(code, 0, out)
  local _, waves = out:gsub("jobs: seeds 0,1 in 2 processes side by side", "")
  T.eq(waves, 2, "two waves (the a units, then the b units): " .. out)
  T.ok(out:find("part99 values 1,10,2,20", 1, true), out)
  -- make results publishes it (from records: it has none in an empty folder)
  xsa.sys.mkdir(TMP .. "/no-records")
  code, out = sh(x .. " " .. shq(dir .. "/results.lua") .. " --check --results " .. shq(TMP .. "/no-records"))
  T.ok(out:find("\npart99: ", 1, true) or out:find("^part99: "), out)
end)

os.execute("rm -rf " .. shq(TMP))
T.done()
