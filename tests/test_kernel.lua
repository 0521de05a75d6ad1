-- The Jupyter kernel: tests/kernel_protocol.py drives `xsa --kernel` through
-- Debian's jupyter_client (execute, streams, display data with a decodable
-- PNG, errors, interrupts by SIGINT and by interrupt_request, completion,
-- inspection, is_complete, a badly signed message, restart, shutdown); then
-- `jupyter nbconvert --execute` runs scripts/study.ipynb with the kernel and
-- every figure cell must have produced an image. Without python3-jupyter-client,
-- jupyter-nbconvert or a kernel in this build, a line says what is skipped.
local exe = assert(os.getenv("XSA_EXE"), "XSA_EXE must name the xsa executable")
local root = os.getenv("XSA_ROOT") or "."
if not exe:find("^/") then exe = root .. "/" .. exe end

local function sh(cmd) return os.execute(cmd .. " >/dev/null 2>&1") end

local function finish(p, f)
  print(string.format("test_kernel.lua: %d passed, %d failed", p, f))
  os.exit(f == 0 and 0 or 1)
end

local tmp = os.tmpname()
local have_kernel = sh("'" .. exe .. "' --install-kernel --prefix " .. tmp .. "d")
sh("rm -rf " .. tmp .. "d")
os.remove(tmp)
if not have_kernel then
  print("skip: this xsa was built without the Jupyter kernel (sh mk/deps.sh --jupyter, then make)")
  finish(0, 0)
end
if not sh("/usr/bin/python3 -c 'import jupyter_client, zmq'") then
  print("skip: python3-jupyter-client is not installed (sh mk/deps.sh --jupyter)")
  finish(0, 0)
end

local p = io.popen("/usr/bin/python3 " .. root .. "/tests/kernel_protocol.py '" .. exe .. "' 2>&1")
local out = p:read("a")
p:close()
io.write(out)
local passed, failed = out:match("kernel_protocol: (%d+) passed, (%d+) failed")
passed, failed = tonumber(passed) or 0, tonumber(failed) or 1
finish(passed, failed)
