-- xsa.record: the study's record. One small JSON file per finished run,
-- kept in the repository (results/ by default), so that what was trained
-- on any machine, in any session, is never trained again and every
-- published number is generated from these files alone.
--
--   local record = require "xsa.record"
--   local recs = record.find(dir, "mine", "mine-300steps-seed0", config, check)
--   if recs[1] then use(recs[1].result) end       -- the chosen one comes first
--   record.write(dir, "mine", "mine-300steps-seed0", config, result)
--
-- A record is DIR/PART/NAME-KEY-STAMP.json:
--   KEY    12 hex digits of the hash of the key text: the run's whole
--          configuration, the identity of the data it read (the CRC-64 and
--          size of the corpus and of both tokenizer files, not their paths)
--          and the precision. Whatever changes the numbers changes the key.
--   STAMP  8 hex digits of the hash of the provenance: what should not
--          change the numbers but may (engine commit, OpenBLAS kernel and
--          threads, float32 GEMM library, CPU model) and the date. A second record of the same key
--          (another machine, a rerun) lands beside the first, never over it.
-- Which record counts (the rule the statistics state): the oldest by its
-- provenance date, ties broken by file name; the others are the
-- cross-machine comparison (record.differences).
--
-- Records are data from strangers: a record is read only from DIR/PART,
-- only when its file name matches the expected NAME-KEY prefix, at most
-- MAX_BYTES long, and it must parse, carry this format, hold the key text
-- of the expected configuration, only finite numbers, and strings of at
-- most MAX_STRING bytes without control characters; nothing in it is used
-- as a path, a command or code; no key twice; typed provenance with a
-- real date (valid_date); a pair's improvement recomputed from its losses.
-- A record that fails is refused with an error naming its file: never
-- skipped silently, never retrained over. Results are stored and read
-- without the fields that name files (checkpoints). A part folder that
-- cannot be listed is an error, not "no records".
-- Non-goals: deleting or editing records (git does that), locking (every
-- writer writes a file of its own).
local sys = require "xsa.sys"
local cache = require "xsa.cache"
local numbers = require "xsa.numbers"

local M = {}

M.FORMAT = "xsa-record/1"
M.MAX_BYTES = 4 * 1024 * 1024
M.MAX_STRING = 400
-- fields of a result that are never recorded (they name files)
M.DROPPED = {checkpoints = true}

local core = require "xsa.core" -- the C functions and libraries

-- The folder of a part's records; names are checked so a record's path is
-- made of the caller's words only.
local SAFE = "^[%w][%w%.%-_]*$"
local function part_dir(dir, part)
  assert(type(part) == "string" and part:match(SAFE), "xsa.record: bad part name " .. tostring(part))
  return dir .. "/" .. part
end

----------------------------------------------------------------------------
-- identity and provenance

local identity_memo = {}
-- {corpus = "crc64:...:BYTES", encoder = ..., vocab = ...}: the data files
-- the loaders read (xsa.data's search order), by content.
function M.data_identity()
  local data = require "xsa.data"
  local enc, vocab = data.tokenizer_files()
  local files = {corpus = data.tinystories_file(), encoder = enc, vocab = vocab}
  local out = {}
  for k, path in pairs(files) do
    if not identity_memo[path] then
      local sum, size = core.file_checksum(path)
      if not sum then error("xsa.record: cannot read " .. path .. ": " .. tostring(size), 0) end
      identity_memo[path] = sum .. ":" .. size
    end
    out[k] = identity_memo[path]
  end
  return out
end

-- The key of a run: its configuration, its data by content, its precision.
function M.key(config)
  local precision = type(config.model) == "table" and config.model.precision or "f32"
  return cache.key({config = config, data = M.data_identity(), precision = precision})
end

-- The first capture of pattern in a line of the regular file at path (a
-- folder or a missing file: nil).
local function first_line(path, pattern)
  local text = core.read_file(path)
  if not text or #text > M.MAX_BYTES then return nil end
  for line in text:gmatch("[^\n]+") do
    local v = line:match(pattern)
    if v then return v end
  end
end

-- The commit of the checkout (read from .git, no git process), or "unknown".
function M.commit()
  local root = sys.root()
  local gitdir = root .. "/.git"
  local pointer = first_line(gitdir, "^gitdir: (.+)$") -- a worktree
  if pointer then gitdir = pointer:sub(1, 1) == "/" and pointer or (root .. "/" .. pointer) end
  local head = first_line(gitdir .. "/HEAD", "^(.+)$")
  if not head then return "unknown" end
  local ref = head:match("^ref: (.+)$")
  if not ref then return head:match("^%x+$") or "unknown" end
  local common = first_line(gitdir .. "/commondir", "^(.+)$")
  local dirs = {gitdir, common and (common:sub(1, 1) == "/" and common or gitdir .. "/" .. common)}
  for _, d in ipairs(dirs) do
    local h = first_line(d .. "/" .. ref, "^(%x+)$")
    if h then return h end
    h = first_line(d .. "/packed-refs", "^(%x+) " .. ref:gsub("%p", "%%%0") .. "$")
    if h then return h end
  end
  return "unknown"
end

-- What should not change the numbers but may: engine, commit, BLAS kernel
-- and threads, the float32 GEMM library (OpenBLAS or oneDNN: another
-- summation order, so other last bits), the lm_head's blocking (the order
-- of the softmax's sums), CPU, the load average when the run ended, date.
function M.provenance()
  local blas = core.blas()
  local family, model = first_line("/proc/cpuinfo", "^cpu family%s*:%s*(%d+)"), first_line("/proc/cpuinfo", "^model%s*:%s*(%d+)")
  return {engine = "xsa " .. core.version(), commit = M.commit(), blas = blas.core, threads = blas.threads,
    gemm = blas.gemm_lib, lmhead = blas.lmhead,
    cpu = (first_line("/proc/cpuinfo", "^model name%s*:%s*(.-)%s*$") or "unknown") ..
      (family and string.format(" (family %s model %s)", family, model or "?") or ""),
    load = tonumber(first_line("/proc/loadavg", "^(%S+)") or ""), -- a busy machine trains slower: read elapsed_s with it
    date = os.date("!%Y-%m-%dT%H:%M:%SZ")}
end

----------------------------------------------------------------------------
-- reading

-- The BLAS of a provenance as text: the OpenBLAS kernel, the float32 GEMM
-- library when the record names one other than OpenBLAS (records from
-- before it was recorded ran OpenBLAS's), and the lm_head's blocking when
-- the record names it (records from before ran chunks of 40 MB, blocks of
-- 4 MB): "Haswell; products oneDNN ...; lm_head chunks of ...".
function M.blas_text(prov)
  local t = tostring(prov.blas)
  if type(prov.gemm) == "string" and not prov.gemm:match("^OpenBLAS") then t = t .. "; products " .. prov.gemm end
  if type(prov.lmhead) == "string" then t = t .. "; lm_head " .. prov.lmhead end
  return t
end

-- Every string in v is short and printable, every number finite, nesting
-- bounded. Returns true, or false and why (naming the field).
local function sane(v, path, depth)
  if depth > 12 then return false, path .. " is nested too deeply" end
  local t = type(v)
  if t == "number" then
    if not numbers.finite(v) then return false, path .. " is " .. tostring(v) end
  elseif t == "string" then
    if #v > M.MAX_STRING then return false, path .. " is a string of " .. #v .. " bytes" end
    if v:find("[%z\1-\8\11-\31\127]") then return false, path .. " holds control characters" end
  elseif t == "table" then
    for k, x in pairs(v) do
      local ok, why = sane(x, path .. "." .. tostring(k), depth + 1)
      if not ok then return false, why end
    end
  elseif t ~= "boolean" then
    return false, path .. " is a " .. t
  end
  return true
end

-- sane() of a whole record: the key text is long (the whole configuration)
-- and checked apart, against the expected one.
local function sane_record(rec)
  if type(rec.key) ~= "string" or #rec.key > 65536 then return false, "record.key is not a key text" end
  local rest = {}
  for k, v in pairs(rec) do if k ~= "key" then rest[k] = v end end
  return sane(rest, "record", 0)
end

local function stripped(v)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do
    if not M.DROPPED[k] then out[k] = stripped(x) end
  end
  return setmetatable(out, getmetatable(v))
end

-- The earliest date a record can carry: the day the record format began
-- (the first record of results/ is from that evening). Dates are compared
-- as text to pick the record that counts, so only this one shape is taken.
M.FIRST_DATE = "2026-12-01T00:00:00Z"
local DAYS = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

-- A date "YYYY-MM-DDTHH:MM:SSZ" of the calendar, not before FIRST_DATE and
-- not after a day from now; true, or false and why.
function M.valid_date(d)
  local y, mo, da, h, mi, se = tostring(d):match("^(%d%d%d%d)%-(%d%d)%-(%d%d)T(%d%d):(%d%d):(%d%d)Z$")
  y, mo, da, h, mi, se = tonumber(y), tonumber(mo), tonumber(da), tonumber(h), tonumber(mi), tonumber(se)
  if not (y and mo >= 1 and mo <= 12 and da >= 1 and da <= DAYS[mo] and h <= 23 and mi <= 59 and se <= 59) or
    (mo == 2 and da == 29 and not (y % 4 == 0 and (y % 100 ~= 0 or y % 400 == 0))) then
    return false, "provenance.date " .. string.format("%q", tostring(d)) .. " is not a date YYYY-MM-DDTHH:MM:SSZ"
  end
  if d < M.FIRST_DATE or d > os.date("!%Y-%m-%dT%H:%M:%SZ", os.time() + 86400) then
    return false, "provenance.date " .. d .. " is before the record format existed (" .. M.FIRST_DATE .. ") or in the future"
  end
  return true
end

-- The provenance's fields that the published files print, by type: the
-- strings named, threads a positive integer, load a number when present.
local PROV_STRINGS = {engine = true, commit = true, blas = true, cpu = true, date = true}
local PROV_OPTIONAL = {gemm = true, lmhead = true, source = true}
local function valid_provenance(p)
  if type(p) ~= "table" or getmetatable(p) then return false, "provenance is not an object" end
  for k in pairs(PROV_STRINGS) do
    if type(p[k]) ~= "string" or p[k] == "" then return false, "provenance." .. k .. " is not a string" end
  end
  for k in pairs(PROV_OPTIONAL) do
    if p[k] ~= nil and type(p[k]) ~= "string" then return false, "provenance." .. k .. " is not a string" end
  end
  if math.type(p.threads) ~= "integer" or p.threads < 1 then return false, "provenance.threads is not a positive integer" end
  if p.load ~= nil and type(p.load) ~= "number" then return false, "provenance.load is not a number" end
  if not (p.commit == "unknown" or p.commit:match("^%x+$")) then return false, "provenance.commit is not a commit" end
  return M.valid_date(p.date)
end

-- A result's own numbers as the statistics use them: times non-negative;
-- a pair's improvement recomputed from its losses, never taken as written.
local function valid_result(r)
  if getmetatable(r) then return false, "result is not an object" end
  for _, k in ipairs{"elapsed_s", "cpu_s"} do
    if r[k] ~= nil and not (type(r[k]) == "number" and r[k] >= 0) then return false, "result." .. k .. " is not a time" end
  end
  if r.sa ~= nil or r.xsa ~= nil or r.improvement_pct ~= nil then
    if type(r.sa) ~= "table" or type(r.xsa) ~= "table" then return false, "result.sa or result.xsa is not an object" end
    if type(r.sa.final_val) ~= "number" or type(r.xsa.final_val) ~= "number" then
      return false, "result.sa.final_val or result.xsa.final_val is not a number"
    end
    r.improvement_pct = require("xsa.train").improvement(r.sa.final_val, r.xsa.final_val)
  end
  return true
end

-- The record in `text` checked against the expected key; the record or
-- nil, why. check(result) -> ok, why: the caller's own validation. Fields
-- that name files (DROPPED) are removed from the result, as on write.
function M.parse(text, key, check)
  if #text > M.MAX_BYTES then return nil, "larger than " .. M.MAX_BYTES .. " bytes" end
  local ok, rec = pcall(core.json.decode, text)
  if not ok then return nil, "not valid JSON (" .. tostring(rec):gsub("\n", " ") .. ")" end
  if type(rec) ~= "table" or getmetatable(rec) then return nil, "not a JSON object" end
  if rec.format ~= M.FORMAT then return nil, "format is " .. tostring(rec.format) .. ", not " .. M.FORMAT end
  if rec.key ~= key then return nil, "its key is not this configuration's (edited, or another data set)" end
  if type(rec.result) ~= "table" then return nil, "it has no result" end
  if type(rec.provenance) ~= "table" or type(rec.provenance.date) ~= "string" then return nil, "it has no provenance date" end
  local good, why = sane_record(rec)
  if not good then return nil, why end
  rec.result = stripped(rec.result)
  good, why = valid_provenance(rec.provenance)
  if good then good, why = valid_result(rec.result) end
  if not good then return nil, why end
  if check then
    local okc, g, w = pcall(check, rec.result)
    if not okc then g, w = false, "a field is missing or of the wrong type (" .. tostring(g):gsub("\n.*", "") .. ")" end
    if not g then return nil, "its result fails the check: " .. tostring(w) end
  end
  return rec
end

local function older(a, b)
  if a.provenance.date ~= b.provenance.date then return a.provenance.date < b.provenance.date end
  return a.file < b.file
end

-- The records of a run (a list, the chosen one first; empty when none).
-- Raises, naming the file, on any record of this name and key that is
-- refused.
function M.find(dir, part, name, config, check)
  assert(type(name) == "string" and name:match(SAFE), "xsa.record: bad run name " .. tostring(name))
  local pdir = part_dir(dir, part)
  local files, err = core.list_files(pdir)
  local out = {}
  if not files then
    -- no folder: no records; one that cannot be listed (not a folder, no
    -- permission, an I/O error) is an error, never "none" (strerror's
    -- text: xsa never sets a locale)
    if tostring(err):find(": No such file or directory$") then return out end
    error(string.format("records folder %s cannot be listed: %s", pdir, tostring(err)), 0)
  end
  local key = M.key(config)
  local prefix = name .. "-" .. cache.hash(key):sub(1, 12) .. "-"
  for _, f in ipairs(files) do
    if f:sub(1, #prefix) == prefix and f:match("^[%w%.%-_]+%.json$") then
      local path = pdir .. "/" .. f
      local text, err = core.read_file(path)
      local rec, why = nil, err
      if text then rec, why = M.parse(text, key, check) end
      if not rec then
        error(string.format("record %s is refused: %s. Restore it (git checkout -- %s) or remove it.", path, why, path), 0)
      end
      rec.file, rec.path = f, path
      out[#out + 1] = rec
    end
  end
  table.sort(out, older)
  return out
end

----------------------------------------------------------------------------
-- writing

-- Writes a new record of a finished run (atomically); returns its path.
-- provenance: default M.provenance() (a result brought from a cache entry
-- passes what it knows).
function M.write(dir, part, name, config, result, provenance)
  assert(type(name) == "string" and name:match(SAFE), "xsa.record: bad run name " .. tostring(name))
  local key = M.key(config)
  local prov = provenance or M.provenance()
  local rec = {format = M.FORMAT, part = part, name = name, key = key, config = config, data = M.data_identity(),
    precision = type(config.model) == "table" and config.model.precision or "f32", result = stripped(result),
    provenance = prov}
  local ok, why = sane_record(rec)
  if not ok then error("xsa.record: will not write " .. name .. ": " .. why, 2) end
  local pdir = part_dir(dir, part)
  sys.mkdir(pdir)
  local path = string.format("%s/%s-%s-%s.json", pdir, name, cache.hash(key):sub(1, 12),
    cache.hash(cache.key(prov)):sub(1, 8))
  core.write_file_atomic(path, core.json.encode(rec, {indent = true}))
  return path
end

----------------------------------------------------------------------------
-- merging

-- Numbers that differ between the records of one run: a list of
-- {field = "sa.final_val", values = {...}, max_abs = d}, fields in order.
-- Compares every number the chosen record's result holds at the same path.
function M.differences(recs)
  local out = {}
  local function walk(v, path)
    if type(v) == "number" then
      local vals, lo, hi = {}, v, v
      for i, r in ipairs(recs) do
        local x = r.result
        for k in path:gmatch("[^.]+") do x = type(x) == "table" and (x[k] or x[tonumber(k)]) or nil end
        vals[i] = x
        if type(x) == "number" then lo, hi = math.min(lo, x), math.max(hi, x) end
      end
      if hi > lo then out[#out + 1] = {field = path, values = vals, max_abs = hi - lo} end
    elseif type(v) == "table" then
      local keys = {}
      for k in pairs(v) do keys[#keys + 1] = k end
      table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
      for _, k in ipairs(keys) do walk(v[k], path == "" and tostring(k) or (path .. "." .. tostring(k))) end
    end
  end
  if #recs > 1 then walk(recs[1].result, "") end
  return out
end

return M
