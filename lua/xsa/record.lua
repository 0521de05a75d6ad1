-- xsa.record: the study's record. One small JSON file per finished group
-- of runs (or per result of no training, as a probe), kept in the
-- repository (results/ by default), so that what was trained on any
-- machine, in any session, is never trained again and every published
-- number is generated from these files alone.
--
--   local record = require "xsa.record"
--   local recs = record.find(dir, "mine", "mine-300steps-seed0", config, check)
--   if recs[1] then use(recs[1].result) end       -- the chosen one comes first
--   record.write(dir, "mine", "mine-300steps-seed0", config, result)
--
-- A record is DIR/PART/NAME-KEY-STAMP.json:
--   KEY    12 hex digits of the hash of the key text. A group of runs that
--          shared their batches (format 2, xsa.group): its runs' keys, each
--          the run's model with its attention and lambda, data, training,
--          the identity of the data it read (the CRC-64 and size of the
--          corpus and both tokenizer files, not their paths) and precision;
--          the record lists every run under its own key beside what the
--          group shares. Anything else, and records written before groups
--          (format 1): the whole configuration, its part's name in it, the
--          data's identity and the precision. Whatever changes the numbers
--          changes the key; find reads both formats.
--   STAMP  8 hex digits of the hash of the provenance (xsa.provenance): what
--          should not change the numbers but may (engine commit, OpenBLAS
--          kernel and threads, float32 GEMM library, CPU model) and the
--          date. A second record of the same key (another machine, a rerun)
--          lands beside the first, never over it.
-- Which record counts (the rule the statistics state): the oldest by its
-- provenance date, ties broken by file name; the others are the
-- cross-machine comparison (record.differences).
--
-- Records are data from strangers: a record is read only from DIR/PART,
-- only when its file name matches the expected NAME-KEY prefix, at most
-- MAX_BYTES long, and it must parse, carry the format of its key, hold the
-- key text of the expected configuration (a group's runs: each under its
-- key, in the key's order, nothing of them twice: xsa.group.join), only
-- finite numbers, and strings of at most MAX_STRING bytes without control
-- characters; nothing in it is used as a path, a command or code; no key
-- twice; typed provenance with a real date (valid_date); a pair's
-- improvement recomputed from its losses. A record that fails is refused
-- with an error naming its file: never skipped silently, never retrained
-- over. Results are stored and read without the fields that name files
-- (checkpoints). A part folder that cannot be listed is an error, not "no
-- records".
-- Non-goals: deleting or editing records (git does that), locking (every
-- writer writes a file of its own).
local sys = require "xsa.sys"
local cache = require "xsa.cache"
local numbers = require "xsa.numbers"
local group = require "xsa.group"
local provenance = require "xsa.provenance"

local M = {}

M.FORMAT = "xsa-record/1" -- one result under its configuration's key
M.GROUP_FORMAT = "xsa-record/2" -- a group of runs, each under its own key (xsa.group)
M.MAX_BYTES = 4 * 1024 * 1024
M.MAX_STRING = 400
-- fields of a result that are never recorded (they name files)
M.DROPPED = {checkpoints = true}
-- where a record's numbers were computed: xsa.provenance's, by their older names
M.commit, M.provenance, M.blas_text = provenance.commit, provenance.now, provenance.blas_text
M.valid_date, M.FIRST_DATE = provenance.valid_date, provenance.FIRST_DATE

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

-- The key of a format-1 record: the whole configuration (its part too),
-- the data by content (identity: default this checkout's files), the precision.
function M.legacy_key(config, identity)
  local precision = type(config.model) == "table" and config.model.precision or "f32"
  return cache.key({config = config, data = identity or M.data_identity(), precision = precision})
end

-- The key a configuration's records are written under: a group of runs'
-- (xsa.group.key: its runs' keys) when config is one, else M.legacy_key.
function M.key(config, identity)
  identity = identity or M.data_identity()
  return group.key(config, identity) or M.legacy_key(config, identity)
end

-- reading

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
  if type(rec.runs) == "table" then -- a group's: each run's key is checked apart too
    local runs = {}
    for i, e in pairs(rec.runs) do
      if type(e) ~= "table" or type(e.key) ~= "string" or #e.key > 65536 then return false, "record.runs." .. tostring(i) .. ".key is not a key text" end
      runs[i] = {}
      for k, v in pairs(e) do if k ~= "key" then runs[i][k] = v end end
    end
    rest.runs = runs
  end
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
  if rec.format ~= M.FORMAT and rec.format ~= M.GROUP_FORMAT then
    return nil, "format is " .. tostring(rec.format) .. ", not " .. M.FORMAT .. " or " .. M.GROUP_FORMAT
  end
  if rec.key ~= key then return nil, "its key is not this configuration's (edited, or another data set)" end
  if type(rec.result) ~= "table" then return nil, "it has no result" end
  if type(rec.provenance) ~= "table" or type(rec.provenance.date) ~= "string" then return nil, "it has no provenance date" end
  local good, why = sane_record(rec)
  if not good then return nil, why end
  if rec.format == M.GROUP_FORMAT then -- the group's runs back where the trainer put them
    local r, w = group.join(rec)
    if not r then return nil, w end
    rec.result = r
  elseif rec.runs ~= nil or rec.layout ~= nil then return nil, "a format 1 record with a group's runs" end
  rec.result = stripped(rec.result)
  good, why = provenance.valid(rec.provenance)
  if good then good, why = valid_result(rec.result) end
  if not good then return nil, why end
  if check then
    local okc, g, w = pcall(check, rec.result)
    if not okc then g, w = false, "a field is missing or of the wrong type (" .. tostring(g):gsub("\n.*", "") .. ")" end
    if not g then return nil, "its result fails the check: " .. tostring(w) end
  end
  return rec
end

-- A format 1 record copied back beside its conversion (scripts/
-- migrate_records.lua; the lab's checkout writes format 1 and keeps its
-- files): both have one provenance, so one STAMP, and are one record. The
-- format 2 one stands for both when they hold the same numbers; when they
-- do not, one was edited, and both are refused.
local function once(recs)
  local by, out = {}, {}
  for _, r in ipairs(recs) do
    local stamp = r.file:match("%-(%x+)%.json$")
    local other = by[stamp]
    if other and numbers.same(other.provenance, r.provenance) then
      if not numbers.same(other.result, r.result) then
        error(string.format("records %s and %s are one record (one provenance) with other numbers: one was edited. " ..
          "Restore them (git checkout -- PATH) or remove the one that is not.", other.path, r.path), 0)
      end
      if r.format == M.GROUP_FORMAT then out[other.index], by[stamp], r.index = r, r, other.index end
    else
      out[#out + 1], by[stamp], r.index = r, r, #out + 1
    end
  end
  for _, r in ipairs(out) do r.index = nil end
  return out
end

-- The names in a records folder; none when it does not exist. One that
-- cannot be listed (not a folder, no permission, an I/O error) is an error,
-- never "none" (strerror's text: xsa never sets a locale).
local function listed(pdir, kind)
  local files, err = core.list_files(pdir, kind)
  if files then return files end
  if tostring(err):find(": No such file or directory$") then return {} end
  error(string.format("records folder %s cannot be listed: %s", pdir, tostring(err)), 0)
end

local function refuse(path, why)
  error(string.format("record %s is refused: %s. Restore it (git checkout -- %s) or remove it.", path, why, path), 0)
end

-- The rule that chooses among records of one run: the oldest by its
-- provenance date, ties broken by file name.
local function older(a, b)
  if a.provenance.date ~= b.provenance.date then return a.provenance.date < b.provenance.date end
  return a.file < b.file
end
M.older = older

-- The records of a run (a list, the chosen one first; empty when none).
-- Raises, naming the file, on any record of this name and key that is
-- refused.
function M.find(dir, part, name, config, check)
  assert(type(name) == "string" and name:match(SAFE), "xsa.record: bad run name " .. tostring(name))
  local pdir = part_dir(dir, part)
  local files = listed(pdir)
  local out = {}
  -- a group's records (format 2) under its key; format 1 under the whole
  -- configuration's (records written before groups, or not of a group)
  local identity = M.data_identity()
  local keys = {{M.legacy_key(config, identity), M.FORMAT}}
  local gkey = group.key(config, identity)
  if gkey then table.insert(keys, 1, {gkey, M.GROUP_FORMAT}) end
  for _, f in ipairs(files) do
    local key, format
    for _, k in ipairs(keys) do
      if f:sub(1, #name + 14) == name .. "-" .. cache.hash(k[1]):sub(1, 12) .. "-" then key, format = k[1], k[2] end
    end
    if key and f:match("^[%w%.%-_]+%.json$") then
      local path = pdir .. "/" .. f
      local text, err = core.read_file(path)
      local rec, why = nil, err
      if text then rec, why = M.parse(text, key, check) end
      if rec and rec.format ~= format then rec, why = nil, "its format is " .. rec.format .. ", its key's " .. format end
      if not rec then refuse(path, why) end
      rec.file, rec.path = f, path
      out[#out + 1] = rec
    end
  end
  out = once(out)
  table.sort(out, older)
  return out
end

-- Every record of the folders `folders` (names; default: every folder) of
-- `dir`, for accounting (a run's CPU time and machine, each record once)
-- and for finding a run in any of them (xsa.reuse): each checked as find
-- checks it, against the key its own file holds, where find would read it
-- (its folder its part's, its file name its name's and key's). A folder
-- that does not exist has none. Raises, naming the file, on one refused.
function M.all(dir, folders)
  local out = {}
  for _, folder in ipairs(folders or listed(dir, "folders")) do
    local pdir = part_dir(dir, folder)
    local runs, order = {}, {} -- a run's records (its name and key), as find gathers them
    for _, f in ipairs(listed(pdir)) do
      if f:match("^[%w%.%-_]+%.json$") then
        local path = pdir .. "/" .. f
        local text, why = core.read_file(path)
        local rec, raw
        if text and #text <= M.MAX_BYTES then
          local ok, j = pcall(core.json.decode, text)
          raw = ok and type(j) == "table" and j or nil
        end
        if raw and type(raw.key) == "string" and raw.part == folder and type(raw.name) == "string" and
          f:sub(1, #raw.name + 14) == raw.name .. "-" .. cache.hash(raw.key):sub(1, 12) .. "-" then
          rec, why = M.parse(text, raw.key)
        elseif text then
          why = "not a record where its part, name and key would put it"
        end
        if not rec then refuse(path, why) end
        rec.file, rec.path, rec.folder = f, path, folder
        local id = f:sub(1, #raw.name + 13)
        if not runs[id] then runs[id], order[#order + 1] = {}, id end
        table.insert(runs[id], rec)
      end
    end
    for _, id in ipairs(order) do
      for _, r in ipairs(once(runs[id])) do out[#out + 1] = r end
    end
  end
  return out
end

----------------------------------------------------------------------------
-- writing

-- Writes a new record of a finished run (atomically); returns its path.
-- provenance: default M.provenance() (a result brought from a cache entry
-- passes what it knows).
function M.write(dir, part, name, config, result, provenance)
  assert(type(name) == "string" and name:match(SAFE), "xsa.record: bad run name " .. tostring(name))
  local rec = M.build(part, name, config, result, provenance or M.provenance())
  local ok, why = sane_record(rec)
  if not ok then error("xsa.record: will not write " .. name .. ": " .. why, 2) end
  local path = M.path(dir, rec)
  sys.mkdir(part_dir(dir, part))
  core.write_file_atomic(path, core.json.encode(rec, {indent = true}))
  return path
end

-- The record of a finished run as it is written: a group's (format 2, each
-- run under its own key: xsa.group) when config is a group's and result one
-- of its layouts, else format 1. identity: the data files' (default this
-- checkout's; scripts/migrate_records.lua passes a record's own).
function M.build(part, name, config, result, provenance, identity)
  identity = identity or M.data_identity()
  local rec = {part = part, name = name, config = config, data = identity,
    precision = type(config.model) == "table" and config.model.precision or "f32", result = stripped(result),
    provenance = provenance}
  local runs, rest, layout = group.split(config, rec.result, identity)
  if runs then
    rec.format, rec.key, rec.runs, rec.layout, rec.result = M.GROUP_FORMAT, group.key(config, identity), runs, layout, rest
  else
    rec.format, rec.key = M.FORMAT, M.legacy_key(config, identity)
  end
  return rec
end

-- Where a record is written: DIR/PART/NAME-KEY-STAMP.json.
function M.path(dir, rec)
  assert(type(rec.name) == "string" and rec.name:match(SAFE), "xsa.record: bad run name " .. tostring(rec.name))
  return string.format("%s/%s-%s-%s.json", part_dir(dir, rec.part), rec.name, cache.hash(rec.key):sub(1, 12),
    cache.hash(cache.key(rec.provenance)):sub(1, 8))
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
