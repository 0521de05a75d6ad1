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

-- xsa._proc.pool: lists of words (no shell), at most `jobs` at a time
local function lines(f)
  local h = io.open(f)
  local out = {}
  if h then for l in h:lines() do out[#out + 1] = l end h:close() end
  return out
end

T.case("pool: every command's status in list order, 128 + N for a signal, 127 for no program", function()
  local codes = xsa._proc.pool({{"sh", "-c", "exit 0"}, {"sh", "-c", "exit 3"}, {"sh", "-c", "kill -9 $$"},
    {"/nonexistent/program"}, {"true"}}, 2)
  T.eq(#codes, 5)
  for i, want in ipairs{0, 3, 137, 127, 0} do T.eq(codes[i], want, "command " .. i) end
  T.eq(#xsa._proc.pool({}, 3), 0, "no commands, nothing run")
end)

T.case("pool: never more than `jobs` running, words passed as they are, env set", function()
  local f = TMP .. "/pool-log"
  local cmds = {}
  for i = 1, 6 do
    -- a word with spaces, quotes and $ reaches the program unchanged: no shell reads it
    cmds[i] = {"sh", "-c", 'echo "start $1 $XSA_POOL_TEST" >> "$2"; sleep 0.1; echo "end $1" >> "$2"', "sh",
      i .. " 'x' $HOME", f}
  end
  local codes = xsa._proc.pool(cmds, 2, {XSA_POOL_TEST = "set"})
  for i = 1, 6 do T.eq(codes[i], 0) end
  local running, most, starts = 0, 0, 0
  for _, l in ipairs(lines(f)) do
    if l:match("^start") then
      running, starts = running + 1, starts + 1
      T.ok(l:find(" 'x' $HOME set", 1, true), l)
    else
      running = running - 1
    end
    most = math.max(most, running)
  end
  T.eq(starts, 6)
  T.eq(most <= 2, true, "at most 2 at a time, saw " .. most)
end)

T.case("pool: bad input is refused before anything runs", function()
  local f = TMP .. "/pool-never"
  for _, bad in ipairs{{{{"touch", f}}, 0}, {{{"touch", f}, "sh"}, 1}, {{{"touch", f}, {}}, 1},
    {{{"touch", f}, {"sh", 3}}, 1}, {{{"touch", f}, {"a\0b"}}, 1}, {{{"touch", f}}, 1, {["A=B"] = "c"}},
    {{{"touch", f}}, 1, {A = 1}}, {{{"touch", f}}, 1, {A = "x\0y"}}} do
    local ok, err = pcall(xsa._proc.pool, bad[1], bad[2], bad[3])
    T.ok(not ok and tostring(err):find("bad argument", 1, true), tostring(err))
  end
  T.eq(io.open(f), nil, "nothing started")
end)

-- (in a child xsa of its own: this process has had its SIGINT, and a
-- second one kills, as in lua.c)
T.case("pool: SIGINT reaches the running commands, no other starts, then interrupts there", function()
  local f, g, script = TMP .. "/pool-int", TMP .. "/pool-int-later", TMP .. "/pool-int.lua"
  local inner = "trap 'sleep 0.3; echo trapped >> " .. shq(f) .. "; exit 5' INT; i=0; " ..
    "while [ $i -lt 300 ]; do sleep 0.05; i=$((i + 1)); done"
  T.writefile(script, string.format([[
local pid = io.open("/proc/self/stat"):read("a"):match("^(%%d+)")
os.execute("(sleep 0.5; kill -INT " .. pid .. ") >/dev/null 2>&1 &")
local ok, err = pcall(function()
  xsa._proc.pool({{"sh", "-c", %q}, {"touch", %q}}, 1)
  for _ = 1, 100 do end
  error("not interrupted")
end)
print(ok, xsa.sys.interrupted(err), err)
]], "exec 2>/dev/null; sh -c " .. shq(inner), g))
  local exe = os.getenv("XSA_EXE") or "./xsa"
  local t0 = now()
  local p = io.popen(shq(exe) .. " " .. shq(script) .. " 2>&1")
  local out = p:read("a")
  p:close()
  T.ok(out:find("^false\ttrue\t"), "interrupted: " .. out)
  T.eq(table.concat(lines(f), ","), "trapped", "the grandchild got SIGINT and had written when pool returned")
  T.eq(io.open(g), nil, "the second command never started")
  T.ok(now() - t0 < 10, "pool returned when the group was done, not when the loop ended")
end)

T.done()
