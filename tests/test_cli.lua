-- The xsa executable as a user drives it: scripts, -e, stdin, arg, errors,
-- exit codes, --help and --version (lua.c's options: test_interp.lua).
local T = require "testing"
local exe = assert(os.getenv("XSA_EXE"), "XSA_EXE must name the xsa executable")
if not exe:find("^/") then exe = (os.getenv("XSA_ROOT") or ".") .. "/" .. exe end

local function run(cmd)
  local p = assert(io.popen(cmd .. " 2>&1", "r"))
  local out = p:read("a")
  local ok, how, code = p:close()
  return out, (how == "exit") and code or 128 + (code or 0)
end

local tmp = os.tmpname()

T.case("--version names the OpenBLAS kernel and threads", function()
  local out, code = run(exe .. " --version")
  T.eq(code, 0)
  T.ok(out:find("^xsa %d+%.%d+%.%d+"), out)
  T.ok(out:find("OpenBLAS kernel: %S+, %d+ thread"), out)
end)

T.case("the lm_head's blocking is named in xsa.blas() and in a record's provenance", function()
  local out, code = run(exe .. " -e 'local p = xsa.record.provenance(); io.write(xsa.blas().lmhead, \"|\", p.lmhead, \"|\", xsa.record.blas_text(p))'")
  T.eq(code, 0, out)
  local lm, prov, text = out:match("^([^|]*)|([^|]*)|([^|]*)$")
  T.eq(lm, "chunks of 80 MB (bf16 104), blocks of 4 MB", out)
  T.eq(prov, lm, "the provenance records it")
  T.ok(text:find("; lm_head " .. lm, 1, true), text)
  out = run("env XSA_LMHEAD_ROWS=128 XSA_LMHEAD_VBLOCK=640 " .. exe .. " -e 'io.write(xsa.blas().lmhead)'")
  T.eq(out, "chunks of 128 rows (XSA_LMHEAD_ROWS), blocks of 640 rows (XSA_LMHEAD_VBLOCK)")
  out = run(exe .. [[ -e 'io.write(xsa.record.blas_text{blas = "Haswell"}, "|", xsa.record.blas_text{blas = "Haswell", gemm = "OpenBLAS Haswell cblas_sgemm"})']])
  T.eq(out, "Haswell|Haswell", "a record from before the library and the blocking were recorded")
end)

T.case("XSA_GEMM selects the float32 GEMM library; an unknown name stops xsa with an error", function()
  local out, code = run("env XSA_GEMM=openblas " .. exe .. " --version")
  T.eq(code, 0, out)
  T.ok(out:find("float32 GEMM: OpenBLAS %S+ cblas_sgemm %(set by XSA_GEMM"), out)
  out, code = run("env XSA_GEMM=openblas " .. exe .. " -e 'io.write(xsa.blas().gemm, \" \", xsa.blas().gemm_source)'")
  T.eq(out, "openblas XSA_GEMM")
  local has_dnnl = run(exe .. " -e 'io.write(tostring(pcall(xsa.set_gemm, \"dnnl\")))'") == "true"
  out, code = run("env XSA_GEMM=dnnl " .. exe .. " -e 'io.write(xsa.blas().gemm_lib)'")
  if has_dnnl then
    T.eq(code, 0, out)
    T.ok(out:find("^oneDNN %d+%.%d+%.%d+ dnnl_sgemm$"), out)
  else
    T.eq(code, 1, out)
    T.ok(out:find("XSA_GEMM=\"dnnl\": this build of xsa has no oneDNN", 1, true), out)
  end
  for _, bad in ipairs{"mkl", "OpenBLAS", ""} do
    out, code = run("env XSA_GEMM=" .. bad .. " " .. exe .. " -e 'print(\"ran\")'")
    T.eq(code, 1, "XSA_GEMM=" .. bad .. ": " .. out)
    T.ok(out:find("XSA_GEMM=\"" .. bad .. "\" is not a GEMM backend", 1, true), out)
    T.ok(not out:find("ran", 1, true), out)
  end
  out = run(exe .. " -e 'print(pcall(xsa.set_gemm, \"blis\"))'")
  T.ok(out:find("false\tgemm: \"blis\" is not a GEMM backend", 1, true), out)
end)

T.case("an unset OPENBLAS_CORETYPE on a fallback kernel re-executes with the best one", function()
  local out, code = run("env -u OPENBLAS_CORETYPE XSA_TEST_BLAS_FALLBACK=1 " .. exe .. " --version")
  T.eq(code, 0)
  local best = out:match("CPU supports: (%a+)")
  if best and best ~= "no" then
    T.ok(out:find("OPENBLAS_CORETYPE=" .. best .. ", chosen by xsa", 1, true), out)
    T.ok(out:find("OpenBLAS kernel: " .. best, 1, true), out)
  end
  -- a value the user set is kept
  out = run("env OPENBLAS_CORETYPE=Haswell XSA_TEST_BLAS_FALLBACK=1 " .. exe .. " --version")
  T.ok(out:find("OPENBLAS_CORETYPE=Haswell, set by the user", 1, true), out)
end)

T.case("OPENBLAS_THREAD_TIMEOUT: 4 when unset (one re-execution), the user's value kept", function()
  local out, code = run("env -u OPENBLAS_THREAD_TIMEOUT " .. exe ..
    " -e 'io.write(os.getenv(\"OPENBLAS_THREAD_TIMEOUT\"))'")
  T.eq(code, 0, out)
  T.eq(out, "4")
  out = run("env OPENBLAS_THREAD_TIMEOUT=9 " .. exe .. " -e 'io.write(os.getenv(\"OPENBLAS_THREAD_TIMEOUT\"))'")
  T.eq(out, "9")
  -- the kernel a user chose stays "set by the user" when only the timeout made xsa re-execute
  out = run("env -u OPENBLAS_THREAD_TIMEOUT OPENBLAS_CORETYPE=Haswell " .. exe .. " --version")
  T.ok(out:find("OPENBLAS_CORETYPE=Haswell, set by the user", 1, true), out)
  T.ok(out:find("2^4 cycles", 1, true), out)
end)

T.case("--help prints usage; -h is an unknown option, as in lua5.4", function()
  local out, code = run(exe .. " --help")
  T.eq(code, 0)
  T.ok(out:find("^usage: %S*xsa %[options%]"), out)
  T.ok(out:find("--install-kernel", 1, true), out)
  out, code = run(exe .. " -h")
  T.eq(code, 1)
  T.ok(out:find("unrecognized option '-h'", 1, true) and out:find("--help", 1, true), out)
end)

-- Each option --help names, run as a user would: exit 0 and its effect, or
-- for --kernel the error a missing connection file gets. An option the help
-- names that this table lacks fails the case, so new options get a test.
T.case("every option --help offers works (read from --help itself)", function()
  local help = run(exe .. " --help")
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. dir .. "/bin"))
  local script = dir .. "/s.lua"
  local f = assert(io.open(script, "w"))
  f:write("io.write('script ', arg[1] or '-')\n")
  f:close()
  -- a python3 that names a prefix of the test's own: --sys-prefix writes there, never into /usr
  f = assert(io.open(dir .. "/bin/python3", "w"))
  f:write("#!/bin/sh\necho " .. dir .. "/sys\n")
  f:close()
  os.execute("chmod +x " .. dir .. "/bin/python3")
  local spec = "/share/jupyter/kernels/xsa/kernel.json"
  local has_kernel = run(exe .. " --install-kernel --prefix " .. dir .. "/p"):find("installed", 1, true)
  local function exists(p) local h = io.open(p) if h then h:close() end return h ~= nil end
  local tries = {
    ["-e"] = {"-e 'io.write(1 + 1)'", function(out) return out == "2" end},
    ["-i"] = {"-i -e 'x = 5' < /dev/null", function(out, code) return code == 0 end},
    ["-l"] = {"-l s=string -l table -e 'io.write(s == string and table.concat{\"ok\"} or \"no\")'",
      function(out) return out == "ok" end},
    ["-v"] = {"-v", function(out) return out:find("Lua 5.4", 1, true) ~= nil end},
    ["-E"] = {"-E -e 'io.write(package.path == \"x\" and \"no\" or \"ok\")'", function(out) return out == "ok" end},
    ["-W"] = {"-W -e 'warn(\"hello\")'", function(out) return out:find("Lua warning: hello", 1, true) ~= nil end},
    ["--"] = {"-- " .. script .. " a", function(out) return out == "script a" end},
    ["-"] = {"- < " .. script, function(out) return out == "script -" end},
    ["--help"] = {"--help", function(out) return out == help end},
    ["--version"] = {"--version", function(out) return out:find("^xsa ") ~= nil end},
    ["--kernel"] = {"--kernel " .. dir .. "/none.json", function(out, code)
      return code == 1 and (out:find("cannot open connection file", 1, true) or out:find("without the Jupyter", 1, true)) end},
    ["--install-kernel"] = {"--install-kernel --prefix " .. dir .. "/q", function(out, code)
      return not has_kernel and code == 1 or exists(dir .. "/q" .. spec) end},
    ["--prefix"] = {"--install-kernel --prefix " .. dir .. "/r", function(out, code)
      return not has_kernel and code == 1 or exists(dir .. "/r" .. spec) end},
    ["--sys-prefix"] = {"--install-kernel --sys-prefix", function(out, code)
      return not has_kernel and code == 1 or exists(dir .. "/sys" .. spec) end},
  }
  local seen = 0
  for opt in help:gmatch("[\n (]%-%-?[%a%-]*") do
    opt = opt:sub(2)
    if opt ~= "-" or help:find("\n  %-  ") then
      local t = tries[opt]
      T.ok(t, "--help offers " .. opt .. ", which this test does not try")
      if t then
        local out, code = run("env PATH=" .. dir .. "/bin:$PATH " .. exe .. " " .. t[1])
        T.ok(t[2](out, code), opt .. ": " .. out)
        seen = seen + 1
      end
    end
  end
  T.ok(seen >= 14, "options read from --help: " .. seen)
  -- without a python3, --sys-prefix says what to give instead
  if has_kernel then
    local out, code = run("env PATH=/nonexistent " .. exe .. " --install-kernel --sys-prefix")
    T.eq(code, 1, out)
    T.ok(out:find("give --prefix DIR instead", 1, true), out)
  end
  os.execute("rm -rf " .. dir)
end)

T.case("-e runs code with the engine loaded", function()
  local out, code = run(exe .. [[ -e 'print(type(xsa), require("xsa") == xsa)']])
  T.eq(code, 0)
  T.eq(out, "table\ttrue\n")
end)

T.case("script gets arg like the stock interpreter", function()
  local f = assert(io.open(tmp, "w"))
  f:write("print(arg[0] ~= nil, arg[1], arg[2], select('#', ...))\n")
  f:close()
  local out, code = run(exe .. " " .. tmp .. " a b")
  T.eq(code, 0)
  T.eq(out, "true\ta\tb\t2\n")
end)

T.case("- reads the script from stdin", function()
  local out, code = run("echo 'print(1 + 1)' | " .. exe .. " -")
  T.eq(code, 0)
  T.eq(out, "2\n")
end)

T.case("an error exits 1 with file:line and a traceback", function()
  local f = assert(io.open(tmp, "w"))
  f:write("local x = 1\nerror('boom here')\n")
  f:close()
  local out, code = run(exe .. " " .. tmp)
  T.eq(code, 1)
  T.ok(out:find(":2: boom here", 1, true), out)
  T.ok(out:find("stack traceback", 1, true), out)
end)

T.case("a missing script is an error, not a crash", function()
  local out, code = run(exe .. " /nonexistent/script.lua")
  T.eq(code, 1)
  T.ok(out:find("cannot open /nonexistent/script.lua", 1, true), out)
end)

T.case("unknown option", function()
  local out, code = run(exe .. " --bogus")
  T.eq(code, 1)
  T.ok(out:find("unrecognized option '--bogus'", 1, true), out)
end)

T.case("syntax error is reported", function()
  local out, code = run(exe .. " -e 'x = = 1'")
  T.eq(code, 1)
  T.ok(out:find("unexpected symbol", 1, true), out)
end)

for _, sig in ipairs{"INT", "TERM"} do
  T.case("SIG" .. sig .. " interrupts a running loop with an error", function()
    local f = assert(io.open(tmp, "w"))
    f:write("io.stdout:write('started\\n') io.stdout:flush()\nwhile true do end\n")
    f:close()
    local out, code = run("sh -c '" .. exe .. " " .. tmp .. " & pid=$!; sleep 0.5; kill -" .. sig .. " $pid; wait $pid'")
    T.eq(code, sig == "INT" and 130 or 143, "128 + the signal, as a shell reports it (lua.c: 1)")
    T.ok(out:find("interrupted!", 1, true), out)
  end)
end

T.case("SIGTERM is an error a script can catch, like Ctrl-C", function()
  local f = assert(io.open(tmp, "w"))
  f:write("local ok, e = pcall(function() io.stdout:write('started\\n') io.stdout:flush() while true do end end)\n" ..
    "print('caught', e) os.exit(7)\n")
  f:close()
  local out, code = run("sh -c '" .. exe .. " " .. tmp .. " & pid=$!; sleep 0.5; kill -TERM $pid; wait $pid'")
  T.eq(code, 7, out)
  T.ok(out:find("caught\tinterrupted!", 1, true), out)
end)

os.remove(tmp)
T.case("one test alone: tests/run.sh NAME (make test T=NAME) runs that test and nothing else", function()
  local root = os.getenv("XSA_ROOT") or "."
  local p = io.popen("cd '" .. root .. "' && sh tests/run.sh json 2>&1")
  local out = p:read("a")
  T.ok(p:close(), out)
  local files = {}
  for name in out:gmatch("\n   %(([^:]+): %d+s%)") do files[#files + 1] = name end
  T.ok(out:find("^[^\n]*test_json") or #files > 0, out)
  for _, f in ipairs(files) do T.ok(f == "test_json.lua" or f == "test_json", "only json's tests ran: " .. f) end
  T.ok(#files >= 1, out)
  T.ok(out:find("\n%d+ passed, 0 failed\n$"), out)
  p = io.popen("cd '" .. root .. "' && sh tests/run.sh no_such_test 2>&1")
  out = p:read("a")
  T.ok(not p:close() and out:find("no test named 'no_such_test'", 1, true), out)
end)

T.done()
