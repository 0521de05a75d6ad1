-- test_proc.lua: xsa._proc.run, a shell command that signals reach. It
-- returns what os.execute returns; a SIGINT or SIGTERM sent to this process
-- while it runs goes to the command's whole process group, run waits until
-- that group is empty, and the signal then interrupts the Lua code here
-- ("interrupted!"), as it would have without a command running.
local T = require "testing"
local xsa = xsa or require "xsa"
local now = require("xsa.progress").now
local shq = xsa.sys.shell_quote

local TMP = T.tmpdir()
local PID = io.open("/proc/self/stat"):read("a"):match("^(%d+)")

local function pack(...) return {n = select("#", ...), ...} end

T.case("the results are os.execute's", function()
  for _, cmd in ipairs{"true", "exit 3", "kill -9 $$", "exit 255"} do
    local a, b = pack(xsa._proc.run(cmd)), pack(os.execute(cmd))
    T.eq(a.n, 3, cmd)
    for i = 1, 3 do T.eq(a[i], b[i], cmd .. " result " .. i) end
  end
  local ok, err = pcall(xsa._proc.run)
  T.ok(not ok and tostring(err):find("string expected", 1, true), tostring(err))
end)

-- Sends sig to this process after `after` seconds, from a background shell.
local function signal_me(sig, after)
  os.execute(string.format("(sleep %s; kill -%s %s) >/dev/null 2>&1 &", after, sig, PID))
end

for _, sig in ipairs{"INT", "TERM"} do
  T.case("SIG" .. sig .. " reaches the command's group, then interrupts here", function()
    local f = TMP .. "/" .. sig
    -- the inner shell is a grandchild; its trap writes only after a pause,
    -- and the outer shell dies at once: run must wait for the group
    local inner = "trap 'sleep 0.3; echo inner >> " .. shq(f) .. "; exit 5' " .. sig ..
      "; i=0; while [ $i -lt 300 ]; do sleep 0.05; i=$((i + 1)); done"
    -- (its stderr dropped: the shells report the loop's sleep killed by SIGTERM)
    local cmd = "exec 2>/dev/null; sh -c " .. shq(inner) .. "; echo outer $? >> " .. shq(f)
    signal_me(sig, 0.5)
    local t0 = now()
    local ok, err = pcall(function()
      xsa._proc.run(cmd)
      for _ = 1, 100 do end -- the next instructions: the interrupt comes here
      error("not interrupted")
    end)
    local secs = now() - t0
    T.ok(not ok and xsa.sys.interrupted(err), "interrupted: " .. tostring(err))
    local h = io.open(f)
    local text = h and h:read("a") or ""
    if h then h:close() end
    T.ok(text:find("inner", 1, true), "the grandchild got SIG" .. sig .. " and had written when run returned: " .. text)
    T.ok(secs < 10, string.format("run returned after %.1f s, not when the loop ended", secs))
  end)
end

T.case("without a signal nothing is interrupted and the group is not waited for", function()
  local ok, err = pcall(function() return xsa._proc.run("true") end)
  T.ok(ok, tostring(err))
  local t0 = now()
  local r = pack(xsa._proc.run("(sleep 2) & exit 0"))
  T.eq(r[1], true)
  T.ok(now() - t0 < 1.5, "a background child does not hold run")
end)

T.done()
