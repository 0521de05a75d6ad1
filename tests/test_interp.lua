-- xsa as Lua 5.4's stand-alone interpreter: the behaviours Lua 5.4.4's own
-- testes/main.lua and testes/db.lua check (options, LUA_INIT, LUA_PATH,
-- the arg table, -i, warnings, error objects, no debug hook, Ctrl-C), plus
-- what xsa adds (its modules found whatever LUA_PATH says, `local` at the
-- prompt, xsa.size). With XSA_LUA_TESTES pointing at a copy of Lua 5.4.4's
-- testes/ folder it also runs all.lua (user mode) and main.lua there.
local T = require "testing"
local exe = assert(os.getenv("XSA_EXE"), "XSA_EXE must name the xsa executable")
if not exe:find("^/") then exe = (os.getenv("XSA_ROOT") or ".") .. "/" .. exe end
local X = "'" .. exe .. "'"

local prog, out = os.tmpname(), os.tmpname()

local function write(path, s)
  local f = assert(io.open(path, "w"))
  f:write(s)
  f:close()
end

-- runs a shell command line; returns stdout+stderr and the exit code
local function run(cmd)
  local p = assert(io.popen(cmd .. " 2>&1", "r"))
  local s = p:read("a")
  local _, how, code = p:close()
  return s, (how == "exit") and code or 128 + (code or 0)
end

T.case("-v prints Lua's copyright line and goes on; -e attached or not", function()
  local s, code = run(X .. [[ -v "-eprint(1)" -ea=3 -e "print(a)"]])
  T.eq(code, 0, s)
  T.ok(s:find("PUC%-Rio\n1\n3\n$"), s)
end)

T.case("bad options are named as lua.c names them", function()
  for opt, msg in pairs{["-h"] = "unrecognized option '-h'", ["---"] = "unrecognized option '---'",
    ["-Ex"] = "unrecognized option '-Ex'", ["-vv"] = "unrecognized option '-vv'",
    ["-iv"] = "unrecognized option '-iv'", ["-e"] = "'-e' needs argument", ["-l"] = "'-l' needs argument",
    ["-e a"] = "syntax error"} do
    local s, code = run(X .. " " .. opt)
    T.eq(code, 1, opt)
    T.ok(s:find(msg, 1, true), opt .. ": " .. s)
  end
end)

T.case("-l mod, -lmod and -l g=mod, in order with -e", function()
  write(prog, "print(1); a=2; return {x=15}")
  local dir, name = prog:match("^(.*)/([^/]*)$")
  local s, code = run(string.format("cd %s && env LUA_PATH='?;;' %s -l %s -lstring -l 'str=string' -e 'print(a, %s.x, str.upper(\"ok\"))'",
    dir, X, name, name))
  T.eq(code, 0, s)
  T.eq(s, "1\n2\t15\tOK\n")
end)

T.case("LUA_PATH, LUA_PATH_5_4, LUA_CPATH as lua.c reads them; ';;' is the default path", function()
  write(prog, "print(package.path)")
  T.eq(run("env LUA_INIT= LUA_PATH=x " .. X .. " " .. prog), "x\n")
  T.eq(run("env LUA_INIT= LUA_PATH_5_4=y LUA_PATH=x " .. X .. " " .. prog), "y\n")
  local default = run("env -i " .. X .. " " .. prog):sub(1, -2)
  T.ok(default:find("lua") and not default:find("xsa"), default)
  T.eq(run("env LUA_PATH='a;;b' " .. X .. " " .. prog), "a;" .. default .. ";b\n")
  write(prog, "print(package.cpath)")
  T.eq(run("env LUA_INIT= LUA_CPATH_5_4=yacc LUA_CPATH=x " .. X .. " " .. prog), "yacc\n")
end)

T.case("xsa's own modules load whatever LUA_PATH says", function()
  local s, code = run("env LUA_PATH=nowhere/?.lua " .. X ..
    " -e 'print(type(xsa.train.pair), require(\"xsa.stats\") ~= nil, package.path)'")
  T.eq(code, 0, s)
  T.eq(s, "function\ttrue\tnowhere/?.lua\n")
  s = run("env LUA_PATH=nowhere/?.lua " .. X .. " -e 'require \"xsa.no_such_module\"'")
  T.ok(s:find("module 'xsa.no_such_module' not found", 1, true) and s:find("no file 'nowhere/xsa/no_such_module.lua'", 1, true), s)
end)

T.case("LUA_INIT, LUA_INIT_5_4 and @file run first and see arg; -E ignores them", function()
  write(prog, "print(X)")
  T.eq(run("env LUA_INIT='X=tonumber(arg[1])' " .. X .. " " .. prog .. " 3.2"), "3.2\n")
  T.eq(run("env LUA_INIT_5_4='X=10' LUA_INIT='X=3' " .. X .. " " .. prog), "10\n")
  write(out, "X = 'from file'")
  T.eq(run("env LUA_INIT=@" .. out .. " " .. X .. " " .. prog), "from file\n")
  local s, code = run("env LUA_INIT=\"error('msg')\" " .. X)
  T.eq(code, 1)
  T.ok(s:find("LUA_INIT:1: msg", 1, true), s)
  write(prog, "print(package.path == P, X)")
  local default = run("env -i " .. X .. " -e 'io.write(package.path)'")
  T.eq(run("env LUA_INIT='error(10)' LUA_PATH=xxx " .. X .. " -E -e 'P=[[" .. default .. "]]' " .. prog), "true\tnil\n")
end)

T.case("the arg table: options below 0, what -e leaves in it goes to the script", function()
  write(prog, "assert(#arg == 3 and arg[1] == 'a' and arg[-1] == '--' and arg[-2] == '-e ')\n" ..
    "local a, b, c = ... assert(a == 'a' and c == 'c') print('ok')")
  T.eq(run(X .. " '-e ' -- " .. prog .. " a b c"), "ok\n")
  T.eq(run("echo 'print(...)' | " .. X .. " -e 'arg[1] = 100' -"), "100\n")
  local s, code = run("echo '' | " .. X .. " -e 'arg = 1' -")
  T.eq(code, 1)
  T.ok(s:find("'arg' is not a table", 1, true), s)
end)

T.case("-W turns warnings on; off by default", function()
  T.eq(run("echo 'io.stderr:write(1); warn[[XXX]]' | " .. X), "1")
  write(prog, "warn('@off') warn('hidden') warn('@on') warn('Z', 'Z')")
  T.eq(run(X .. " -W " .. prog), "Lua warning: ZZ\n")
end)

T.case("error objects: __tostring is used, a table says what it is", function()
  write(prog, "error(setmetatable({}, {__tostring = function() return 'custom' end}))")
  local s, code = run(X .. " " .. prog)
  T.eq(code, 1)
  T.eq(s, exe .. ": custom\n")
  write(prog, "error{}")
  T.ok(run(X .. " " .. prog):find("error object is a table value", 1, true))
end)

T.case("-i reads stdin as a REPL: prompts, continuation lines, =expr, results", function()
  write(prog, "(6*2-6) -- ===\na =\n10\nprint(a)\n=a\nt = xsa.zeros(2, 3)\nt:shape()")
  local s, code = run(X .. [[ -e"_PROMPT='P1 ' _PROMPT2='P2 '" -i < ]] .. prog)
  T.eq(code, 0, s)
  T.ok(s:find("P1 (6*2-6) -- ===\n6\nP1 a =\nP2 10\nP1 print(a)\n10\nP1 =a\n10\n", 1, true), s)
  T.ok(s:find("xsa.size{2, 3}\n", 1, true), s)
  s = run("echo 10 | " .. X .. " -e 'print=nil' -i")
  T.ok(s:find("error calling 'print'", 1, true), s)
end)

T.case("a `local` at the prompt declares a global: a script pastes line by line", function()
  write(prog, table.concat({
    "local a = xsa.tensor{{1, 2}, {3, 4}}",
    "local b, c = a:sum(), 7",
    "local d",
    "local function twice(x) return 2 * x end",
    "print(a:shape(), b, c, d, twice(c))",
    "local x <const> = 5",
    "x",
    "for i = 1, 2 do local y = i end",
    "y",
  }, "\n"))
  local s = run(X .. [[ -e"_PROMPT='' _PROMPT2=''" -i < ]] .. prog)
  T.ok(s:find("xsa.size{2, 2}\ttensor(10.)\t7\tnil\t14\n", 1, true), s)
  -- an attribute keeps it local (closed at the end of its line); inner locals stay local
  T.ok(s:find("\nx\nnil\n", 1, true), s)
  T.ok(s:find("\ny\nnil\n", 1, true), s)
end)

T.case("no debug hook is installed: debug.gethook() is nil, a user's hook runs", function()
  local s = run(X .. [[ -e "print(debug.gethook()); print(coroutine.wrap(function() return debug.gethook() end)())
    local n = 0; debug.sethook(function() n = n + 1 end, 'l'); local x = 1
    x = 2
    debug.sethook(); print(n > 0, debug.gethook())"]])
  T.eq(s, "nil\nnil\ntrue\tnil\n")
end)

-- Starts `code` in the background; returns the pipe of its output and its pid
-- (main.lua's runback).
local function runback(code)
  write(prog, code)
  local f = assert(io.popen(string.format("%s %s 2>&1 & echo $!", X, prog), "r"))
  return f, f:read("l")
end

local function kill(pid) return os.execute("kill -INT " .. pid .. " 2>/dev/null") end

T.case("SIGINT in a protected Lua loop: pcall catches it and the script goes on", function()
  local f, pid = runback("pcall(function() print(12) io.stdout:flush() while true do end end) print(42)")
  T.eq(f:read("l"), "12")
  kill(pid)
  T.eq(f:read("l"), "42")
  T.ok(f:close())
end)

-- (one signal per process: as in lua.c, a second Ctrl-C kills)
T.case("SIGINT reaches a loop inside a coroutine.wrap", function()
  local f, pid = runback([[
    local co = coroutine.wrap(function() print('in') io.stdout:flush() while true do end end)
    print(pcall(co))]])
  T.eq(f:read("l"), "in")
  kill(pid)
  local line = f:read("l")
  T.ok(line and line:find("^false\t.*interrupted!$"), tostring(line))
  T.ok(f:close())
end)

T.case("SIGINT stops a loop that ignores coroutine.resume's results", function()
  local f, pid = runback([[
    local c2 = coroutine.create(function() while true do coroutine.yield() end end)
    local ok, e = pcall(function() print('in') io.stdout:flush() while true do coroutine.resume(c2) end end)
    print(ok, e, debug.gethook())]])
  T.eq(f:read("l"), "in")
  kill(pid)
  local line = f:read("l")
  T.ok(line and line:find("^false\t.*interrupted!\tnil$"), tostring(line))
  T.ok(f:close())
end)

T.case("SIGINT stops a loop of C calls (matrix products), a user's hook comes back", function()
  local f, pid = runback([[
    local a = xsa.rand(300, 300)
    local function h() end
    debug.sethook(h, "", 1000000)
    local ok, e = pcall(function() print('in') io.stdout:flush() while true do a:matmul(a) end end)
    print(ok, e, debug.gethook() == h)]])
  T.eq(f:read("l"), "in")
  kill(pid)
  local line = f:read("l")
  T.ok(line and line:find("^false\t.*interrupted!\ttrue$"), tostring(line))
  T.ok(f:close())
end)

-- 130, not lua.c's 1: a shell's status for SIGINT, which a --jobs parent reads as "interrupted"
T.case("an unprotected interrupt ends the script with status 130; a second SIGINT kills", function()
  local s, status = run("sh -c '" .. exe .. " -e \"while true do end\" & pid=$!; sleep 0.5; kill -INT $pid; wait $pid'")
  T.eq(status, 130, s)
  T.ok(s:find("interrupted!", 1, true), s)
  -- a long C call does not look at the hook: the second signal ends it (sh: 128 + SIGINT)
  s, status = run("sh -c '" .. exe .. " -e \"string.find(string.rep([[a]], 100000), [[.*b]])\" & pid=$!; " ..
    "sleep 0.5; kill -INT $pid; sleep 0.2; kill -INT $pid; wait $pid'")
  T.eq(status, 130, s)
end)

os.remove(prog)
os.remove(out)

local testes = os.getenv("XSA_LUA_TESTES")
if not testes or testes == "" then
  print("skip: Lua 5.4.4's testes/ not run (set XSA_LUA_TESTES to a copy of the folder to run all.lua and main.lua)")
else
  T.case("Lua 5.4.4's testes/all.lua (user mode) under xsa", function()
    local s, code = run("cd '" .. testes .. "' && " .. X .. " -e '_U=true' all.lua")
    T.eq(code, 0, s:sub(-2000))
    T.ok(s:find("final OK !!!", 1, true), s:sub(-2000))
  end)
  T.case("Lua 5.4.4's testes/main.lua with xsa as the interpreter", function()
    local s, code = run("cd '" .. testes .. "' && " .. X .. " main.lua")
    T.eq(code, 0, s:sub(-2000))
    T.ok(s:find("\nOK\n", 1, true), s:sub(-2000))
  end)
end
T.done()
