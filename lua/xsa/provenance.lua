-- xsa.provenance: what a record says of where and with what its numbers
-- were computed (engine, commit, BLAS kernel and threads, float32 GEMM
-- library, lm_head blocking, CPU, load, date), and the check of a record's
-- provenance, which is data from strangers. None of it is in a record's key:
-- a run computed elsewhere is another record of the same run (xsa.record).
--
--   local p = xsa.provenance.now()
--   print(xsa.provenance.blas_text(p), xsa.provenance.valid(p))
-- Non-goals: reading or writing records (xsa.record).
local sys = require "xsa.sys"

local M = {}

local core = require "xsa.core" -- the C functions and libraries

-- The first capture of pattern in a line of the regular file at path (a
-- folder, a missing file or one of more than 4 MB: nil).
local function first_line(path, pattern)
  local text = core.read_file(path)
  if not text or #text > 4 * 1024 * 1024 then return nil end
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
function M.now()
  local blas = core.blas()
  local family, model = first_line("/proc/cpuinfo", "^cpu family%s*:%s*(%d+)"), first_line("/proc/cpuinfo", "^model%s*:%s*(%d+)")
  return {engine = "xsa " .. core.version(), commit = M.commit(), blas = blas.core, threads = blas.threads,
    gemm = blas.gemm_lib, lmhead = blas.lmhead,
    cpu = (first_line("/proc/cpuinfo", "^model name%s*:%s*(.-)%s*$") or "unknown") ..
      (family and string.format(" (family %s model %s)", family, model or "?") or ""),
    load = tonumber(first_line("/proc/loadavg", "^(%S+)") or ""), -- a busy machine trains slower: read elapsed_s with it
    date = os.date("!%Y-%m-%dT%H:%M:%SZ")}
end

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
function M.valid(p)
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


return M
