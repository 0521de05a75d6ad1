-- testing.lua: the small harness of the Lua tests.
--   local T = require "testing"
--   T.case("name", function() T.eq(1 + 1, 2) end)
--   T.done()   -- prints "FILE: N passed, M failed", exits non-zero on failure
--   XSA_TEST_CASE=words: only the cases whose names contain the words run
local T = {}
local passed, failed = 0, 0
local current = "?"

local function where(level)
  local info = debug.getinfo(level + 1, "Sl")
  return info and (info.short_src .. ":" .. info.currentline) or "?"
end

-- $XSA_TEST_CASE: only the cases whose names contain it run (make test T=scripts XSA_TEST_CASE=quick)
local only = os.getenv("XSA_TEST_CASE")
if only == "" then only = nil end

function T.case(name, fn)
  if only and not name:find(only, 1, true) then return end
  current = name
  local ok, err = xpcall(fn, debug.traceback)
  if ok then
    passed = passed + 1
  else
    failed = failed + 1
    io.stdout:write("FAIL ", name, ": ", tostring(err), "\n")
  end
end

function T.ok(cond, msg)
  if not cond then error((msg or "assertion failed") .. " at " .. where(2), 2) end
end

function T.eq(a, b, msg)
  if a ~= b then
    error(string.format("%s: expected %s, got %s at %s", msg or "eq", tostring(b), tostring(a), where(2)), 2)
  end
end

-- |a - b| <= tol * max(1, |b|)
function T.near(a, b, tol, msg)
  tol = tol or 1e-6
  if not (math.abs(a - b) <= tol * math.max(1, math.abs(b))) then
    error(string.format("%s: %.9g vs %.9g (tol %g) at %s", msg or "near", a, b, tol, where(2)), 2)
  end
end

-- fn must raise an error whose message contains `pattern` (plain text).
function T.raises(fn, pattern, msg)
  local ok, err = pcall(fn)
  if ok then error((msg or "expected an error") .. " matching '" .. pattern .. "' at " .. where(2), 2) end
  err = tostring(err)
  if not err:find(pattern, 1, true) then
    error(string.format("%s: error '%s' does not contain '%s' at %s", msg or "raises", err, pattern, where(2)), 2)
  end
  return err
end

-- Whole files for test fixtures (raise on failure).
function T.readfile(p)
  local f = assert(io.open(p, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

function T.writefile(p, s)
  local f = assert(io.open(p, "wb"))
  f:write(s)
  f:close()
end

-- A whole file, or nil when it cannot be opened (for "was it written?" checks).
function T.read(p)
  local f = io.open(p, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- The output (stdout and stderr together) of a shell command and its exit
-- status (a number).
function T.capture(cmd)
  local p = io.popen(cmd .. " 2>&1; echo \"status $?\"")
  local out = p:read("a")
  p:close()
  local body, status = out:match("^(.-)status (%d+)\n?$")
  return body, tonumber(status)
end

-- A new empty folder under the system's temporary folder, removed with
-- everything in it by T.done() (test_record's alone held 1.4 GB of
-- checkpoints, left behind by every run); XSA_KEEP_TMP=1 keeps them.
local tmpdirs = {}
function T.tmpdir()
  local d = os.tmpname()
  os.remove(d)
  os.execute("mkdir -p '" .. d .. "'")
  tmpdirs[#tmpdirs + 1] = d
  return d
end

-- tmp(name) -> a fresh path "<TMPDIR>/xsa-<tag>-<time>-<random>-name"; cleanup()
-- removes every path handed out; base is the common prefix (for "ls base-*").
function T.tmp_paths(tag)
  local base = string.format("%s/xsa-%s-%d-%d", os.getenv("TMPDIR") or "/tmp", tag, os.time(),
                             math.random(1 << 30))
  local created = {}
  local function tmp(name)
    local p = base .. "-" .. name
    created[#created + 1] = p
    return p
  end
  local function cleanup()
    for _, p in ipairs(created) do os.remove(p) end
  end
  return tmp, cleanup, base
end

-- The PyTorch golden values: $XSA_GOLDEN, else the checkout's tests/fixtures/golden;
-- nil when neither holds them (tests then fail, never skip).
function T.golden_dir()
  local d = os.getenv("XSA_GOLDEN")
  if not d or d == "" then d = (os.getenv("XSA_ROOT") or ".") .. "/tests/fixtures/golden" end
  local f = io.open(d .. "/tiny/model.safetensors", "rb")
  if f then f:close(); return d end
end

function T.done()
  if os.getenv("XSA_KEEP_TMP") ~= "1" then
    for _, d in ipairs(tmpdirs) do os.execute("rm -rf '" .. d .. "'") end
  end
  local name = (arg and arg[0] or "lua"):match("([^/]+)$")
  io.stdout:write(string.format("%s: %d passed, %d failed\n", name, passed, failed))
  io.stdout:flush()
  os.exit(failed == 0 and 0 or 1)
end

return T
