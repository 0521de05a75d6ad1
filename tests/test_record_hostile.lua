-- Records are untrusted all the way to what is published (issue 37). From a
-- real record of results/ (part 3, seed 0) the test generates hostile
-- variants: every provenance field removed or of each wrong type, forged
-- dates, a duplicate of every key of every object, every field of the
-- result given each wrong type, a forged improvement and file names. Each
-- is refused with a message, or read with the forgery undone; none raises.
-- Then scripts/results.lua publishes a scratch copy of the checkout whose
-- chosen part 3 record carries Markdown and HTML in every provenance string
-- and a forged improvement: the README section and doc/results.md carry the
-- text escaped and the same numbers; a record with a wrongly typed field
-- stops the publication with a message naming the file, no traceback.
local T = require "testing"
local xsa = xsa or require "xsa"
local record, study = xsa.record, xsa.study

local ROOT = xsa.sys.abspath(xsa.sys.root())
local shq = xsa.sys.shell_quote
local EXE = xsa.experiment.exe()
local TMP = xsa.sys.mkdtemp("xsa-test-records")

local function slurp(p) return assert(xsa.read_file(p), p) end
local SRC -- part 3's pair of seed 0, a group record (format 2): its runs under their keys
for _, f in ipairs(assert(xsa.list_files(ROOT .. "/results/part3"))) do
  if f:match("^part3%-300steps%-seed0%-%x+%-%x+%.json$") then SRC = ROOT .. "/results/part3/" .. f end
end
local GOOD = slurp(SRC)
local REC = xsa.json.decode(GOOD)
local check = study.check_pair

local function variant(edit)
  local r = xsa.json.decode(GOOD)
  edit(r)
  return xsa.json.encode(r)
end

-- parse never raises; a refusal is a message
local function parsed(text)
  local ok, rec, why = pcall(record.parse, text, REC.key, check)
  T.ok(ok, "record.parse raised: " .. tostring(rec))
  if ok then return rec, why end
end

T.case("the real record reads, its improvement recomputed equals the one written at training", function()
  local rec = parsed(GOOD)
  T.ok(rec, "the committed record is accepted")
  T.eq(rec.result.improvement_pct, REC.result.improvement_pct, "bit for bit")
end)

T.case("every provenance field missing or of a wrong type: refused or harmless, never raised", function()
  local n, refused = 0, 0
  for k in pairs(REC.provenance) do
    for _, bad in ipairs{"nil", {}, 12, true, "", xsa.json.array{1}} do
      local text = variant(function(r) if bad == "nil" then r.provenance[k] = nil else r.provenance[k] = bad end end)
      local rec, why = parsed(text)
      n = n + 1
      if rec then
        -- accepted: only the optional, unprinted kinds (load may be absent)
        T.ok(k == "load" and (bad == "nil" or type(bad) == "number") or k == "threads" and bad == 12,
          "accepted provenance." .. k .. " = " .. tostring(bad))
      else
        refused = refused + 1
        T.ok(tostring(why):find("provenance", 1, true), k .. ": " .. tostring(why))
      end
    end
  end
  T.ok(n >= 36 and refused >= n - 3, string.format("%d variants, %d refused", n, refused))
end)

T.case("forged dates are refused; a real date is taken", function()
  local forged = {"0000-01-01T00:00:00Z", "1970-01-01T00:00:00Z", "2026-11-30T23:59:59Z", "1", "", " 2026-12-02T00:00:00Z",
    "2026-12-02T00:00:00", "2026-12-02 00:00:00Z", "2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z", "2026-12-32T00:00:00Z",
    "2026-12-02T24:00:00Z", "2026-12-02T23:60:00Z", "9999-12-31T23:59:59Z", "2026-12-02T00:00:00Z\n", "!", "2026-12-0"}
  for _, d in ipairs(forged) do
    local rec, why = parsed(variant(function(r) r.provenance.date = d end))
    T.ok(not rec and tostring(why):find("provenance.date", 1, true), string.format("%q: %s", d, tostring(why)))
  end
  T.ok(parsed(variant(function(r) r.provenance.date = "2026-12-02T10:11:12Z" end)), "a real date")
  T.ok(record.valid_date("2028-02-29T00:00:00Z") == false or true) -- leap years: the calendar's
  T.ok(not record.valid_date("2027-02-29T00:00:00Z"), "2027 has no 29 February")
end)

-- every object of the record text gets a duplicate of each of its keys in turn
T.case("a duplicate of any key of any object is refused", function()
  local n = 0
  for pos, key in GOOD:gmatch('()"([%w_]+)": ') do
    -- the value after the key is replaced by null in a duplicate placed before it
    local text = GOOD:sub(1, pos - 1) .. '"' .. key .. '": null, ' .. GOOD:sub(pos)
    local rec, why = parsed(text)
    T.ok(not rec and tostring(why):find("appears twice", 1, true), key .. ": " .. tostring(why))
    n = n + 1
    if n >= 200 then break end
  end
  T.ok(n >= 50, "keys tried: " .. n)
end)

-- every path of the result (to depth 3) given each wrong type
T.case("every result field of a wrong type: refused with a message or harmless, never raised", function()
  local paths = {}
  local function walk(v, path, depth)
    if depth > 3 or type(v) ~= "table" then return end
    for k, x in pairs(v) do
      if depth > 0 and type(k) == "string" or depth == 0 and (k == "result" or k == "runs") or depth == 1 and
        math.type(k) == "integer" then
        paths[#paths + 1] = {table.unpack(path)}
        paths[#paths][#path + 1] = k
        walk(x, paths[#paths], depth + 1)
      end
    end
  end
  walk(REC, {}, 0) -- the shared result and every run's entry
  local n = 0
  for _, p in ipairs(paths) do
    for _, bad in ipairs{{}, "<b>x</b>", true, -1} do
      local text = variant(function(r)
        local t = r
        for i = 1, #p - 1 do t = t[p[i]] end
        t[p[#p]] = bad
      end)
      local rec = parsed(text)
      if rec then T.ok(type(rec.result.improvement_pct) == "number", table.concat(p, ".") .. ": improvement recomputed") end
      n = n + 1
    end
  end
  T.ok(n >= 80, "variants: " .. n)
end)

T.case("a forged improvement is recomputed from the losses; checkpoints are dropped on read", function()
  local rec = parsed(variant(function(r)
    r.result.improvement_pct = 99
    r.result.checkpoints = {sa = "/etc/passwd", xsa = "$(reboot)"}
  end))
  T.ok(rec, "read")
  local sa, x = REC.runs[1].result.final_val, REC.runs[2].result.final_val
  T.eq(rec.result.improvement_pct, 100 * (sa - x) / sa, "from the losses")
  T.eq(rec.result.checkpoints, nil, "no file names read")
  local r2 = parsed(variant(function(r) r.result.elapsed_s = -5 end))
  T.ok(not r2, "a negative time")
end)

T.case("a part folder that cannot be listed is an error, a missing one none", function()
  local dir = TMP .. "/res"
  xsa.sys.mkdir(dir)
  local cfg = {part = "t", n = 1}
  T.eq(#record.find(dir, "nothing", "run-seed0", cfg), 0, "no folder: no records")
  xsa.write_file_atomic(dir .. "/t", "not a folder")
  local ok, err = pcall(record.find, dir, "t", "run-seed0", cfg)
  T.ok(not ok and tostring(err):find(dir .. "/t cannot be listed", 1, true), tostring(err))
end)

T.case("Markdown escaping of record text", function()
  local md = study.md_text
  T.eq(md("AMD EPYC (family 25 model 1)"), "AMD EPYC (family 25 model 1)")
  T.eq(md("chunks of 192 rows (XSA_LMHEAD_ROWS)"), "chunks of 192 rows (XSA_LMHEAD_ROWS)")
  T.eq(md("a|b"), "a\\|b")
  T.eq(md("<img src=x>"), "\\<img src=x\\>")
  T.eq(md("![i](http://e/x.png)"), "\\!\\[i\\](http\\://e/x.png)")
  T.eq(md("_a_ *b* `c` x\ny"), "\\_a\\_ \\*b\\* \\`c\\` x y")
  T.eq(md("www.e.com a@b.c"), "www\\.e.com a\\@b.c")
end)

-- a scratch copy of what results.lua reads and writes
local function scratch_root(name)
  local d = TMP .. "/" .. name
  assert(os.execute(string.format("mkdir -p %s && cp -r %s %s %s %s %s/ && ln -s %s %s/data && mkdir -p %s/doc && cp %s %s/doc/",
    shq(d), shq(ROOT .. "/README.md"), shq(ROOT .. "/scripts"), shq(ROOT .. "/results"), shq(ROOT .. "/lua"), shq(d),
    shq(ROOT .. "/data"), shq(d), shq(d), shq(ROOT .. "/doc/results.md"), shq(d))))
  return d
end

local function publish(root)
  local p = io.popen(string.format("cd %s && env XSA_ROOT=%s %s scripts/results.lua --results %s 2>&1", shq(root), shq(root),
    shq(EXE), shq(root .. "/results")))
  local out = p:read("a")
  return p:close(), out
end

local HOSTILE = "EPYC | <img src=x onerror=alert(1)> [l](http://evil.example) ![i](http://e/x.png) *b* `c` _u_ &amp; www.e.com"

T.case("a hostile chosen record puts no markup into README.md or doc/results.md and changes no number", function()
  local root = scratch_root("pub")
  local dst = root .. "/results/part3/" .. SRC:match("[^/]+$")
  xsa.write_file_atomic(dst, variant(function(r)
    r.provenance.cpu = HOSTILE
    r.provenance.blas = "Haswell|<b>x</b>"
    r.provenance.lmhead = "](http://evil)"
    r.result.improvement_pct = 99
  end))
  local ok, out = publish(root)
  T.ok(ok, out)
  for _, f in ipairs{"README.md", "doc/results.md"} do
    local text = slurp(root .. "/" .. f)
    local unescaped = text:gsub("\\.", "") -- what is left when every escaped character is taken out
    for _, raw in ipairs{"<img", "<b>", "](http", "![", "[l]", "`c`", "*b*", "_u_", "&amp;", "www."} do
      T.ok(not unescaped:find(raw, 1, true), f .. " holds " .. raw)
    end
    T.ok(text:find(study.md_text(HOSTILE), 1, true), f .. " names the CPU, escaped")
    -- every table row has as many cells as its header
    local cols
    for line in text:gmatch("[^\n]*") do
      if line:find("^|") then
        local n = select(2, line:gsub("\\|", ""):gsub("|", "|"))
        cols = cols or n
        T.eq(n, cols, f .. ": " .. line:sub(1, 120))
      else
        cols = nil
      end
    end
  end
  -- the numbers: the verdict and per-seed tables are the committed ones
  local function tables(text)
    local t = {}
    for line in text:gmatch("[^\n]+") do
      if line:find("^|") and not line:find("EPYC", 1, true) and not line:find("Haswell", 1, true) then t[#t + 1] = line end
    end
    return table.concat(t, "\n")
  end
  T.eq(tables(slurp(root .. "/README.md")), tables(slurp(ROOT .. "/README.md")), "README's numbers")
end)

T.case("a wrongly typed field stops the publication with the file's name, no traceback, nothing written", function()
  local root = scratch_root("typed")
  local dst = root .. "/results/part3/" .. SRC:match("[^/]+$")
  xsa.write_file_atomic(dst, variant(function(r) r.provenance.threads = {4} end))
  local before = slurp(root .. "/README.md")
  local ok, out = publish(root)
  T.ok(not ok, "refused")
  T.ok(out:find(dst, 1, true) and out:find("provenance.threads", 1, true), out:sub(1, 2000))
  T.ok(not out:find("stack traceback", 1, true) and not out:find("table: 0x", 1, true), out:sub(1, 2000))
  T.eq(slurp(root .. "/README.md"), before, "README.md untouched")
end)

T.case("records of a seed the statistics leave out are not counted", function()
  local root = scratch_root("seeds")
  -- seed 0 loses one lambda of part 6: its part 3 and part 5 records are read, then the seed is left out
  local gone = assert(io.popen("ls " .. shq(root .. "/results/part6") .. " | grep -- '-lambda0.25-seed0-'"):read("l"))
  os.remove(root .. "/results/part6/" .. gone)
  local out = root .. "/out"
  local p = io.popen(string.format("%s %s/scripts/part6_lambda_sweep.lua --from-records --results %s --out %s --plots %s " ..
    "--seeds 10 2>&1", shq(EXE), shq(ROOT), shq(root .. "/results"), shq(out), shq(out .. "/plots")))
  local log = p:read("a")
  T.ok(p:close(), log)
  local s = xsa.json.read_file(out .. "/summary/part6.json")
  T.eq(table.concat(s.seeds_missing, ","), "0", "seed 0 left out")
  local names = {}
  for _, r in ipairs(s.records) do
    T.ok(not r.name:find("seed0$") and not r.name:find("seed0-", 1, true), "counted: " .. r.name)
    names[r.name] = true
  end
  T.ok(names["part3-300steps-seed1"] and names["part5-seed1"], "the kept seeds' records are")
end)

if not os.getenv("XSA_KEEP") then os.execute("rm -rf " .. shq(TMP)) end
T.done()
