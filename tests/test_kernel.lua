-- The Jupyter kernel: tests/kernel_protocol.py drives `xsa --kernel` through
-- Debian's jupyter_client (execute, streams, display data with a decodable
-- PNG, errors, interrupts by SIGINT and by interrupt_request, completion,
-- inspection, is_complete, a badly signed message, restart, shutdown); then
-- `jupyter nbconvert --execute` runs scripts/study.ipynb with the kernel and
-- every figure cell must have produced an image, after which plots/,
-- results/ and cache/summary/ must be byte for byte what they were. Without python3-jupyter-client,
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

-- a hung kernel or client is a failure after 10 minutes, never a CI run that waits out its limit
local p = io.popen("timeout -k 10 600 /usr/bin/python3 " .. root .. "/tests/kernel_protocol.py '" .. exe .. "' 2>&1")
local out = p:read("a")
p:close()
io.write(out)
local passed, failed = out:match("kernel_protocol: (%d+) passed, (%d+) failed")
passed, failed = tonumber(passed) or 0, tonumber(failed) or 1

-- what `sh mk/deps.sh --jupyter` installs is enough for `jupyter kernelspec
-- list` to list the installed kernel (jupyter-client has that command;
-- python3-jupyter-client, its library, does not)
local lm = io.popen("sh " .. root .. "/mk/deps.sh --jupyter --list-missing 2>/dev/null")
local missing = lm:read("a")
lm:close()
if missing:match("^%s*$") then
  local kdir = os.tmpname()
  os.remove(kdir)
  local kp = io.popen(string.format("'%s' --install-kernel --prefix %s >/dev/null 2>&1 && JUPYTER_PATH=%s/share/jupyter " ..
    "jupyter kernelspec list 2>&1", exe, kdir, kdir))
  local listing = kp:read("a")
  local kok = kp:close()
  os.execute("rm -rf " .. kdir)
  if kok and listing:find(kdir .. "/share/jupyter/kernels/", 1, true) then passed = passed + 1
  else failed = failed + 1; print("FAIL jupyter kernelspec list after mk/deps.sh --jupyter: " .. listing) end
else
  print("skip: mk/deps.sh --jupyter would install" .. missing .. ": jupyter kernelspec list not checked")
end

-- scripts/study.ipynb executed by nbconvert with this kernel: every cell
-- that runs a part or draws has an image/png output, and no cell failed
if not sh("command -v jupyter && jupyter nbconvert --version") then
  print("skip: jupyter-nbconvert is not installed: scripts/study.ipynb not executed (sh mk/deps.sh --jupyter)")
  finish(passed, failed)
end
-- after `make run`, running the notebook leaves every file of plots/,
-- results/ and cache/summary/ as it was (its runs write to runs/notebook-quick/)
local function snapshot()
  local p = io.popen("cd " .. root .. " && find plots results cache/summary -type f 2>/dev/null | LC_ALL=C sort | " ..
    "xargs -r sha256sum")
  local t = p:read("a")
  p:close()
  return t
end
local function run_quiet(c)
  local p = io.popen(c .. " 2>&1")
  local o = p:read("a")
  return p:close(), o
end
if not xsa.sys.exists(root .. "/plots/part3_loss.png") then -- what make run writes, from part 3's record
  local ok, o = run_quiet(string.format("cd %s && '%s' scripts/part3_train.lua --results %s/results", root, exe, root))
  if not ok then failed = failed + 1; print("FAIL make run's part 3 from its record: " .. o) end
end
local had_runs = xsa.sys.abspath(root .. "/runs/notebook-quick")
had_runs = os.execute("test -e '" .. had_runs .. "'")
local before = snapshot()
local dir = os.tmpname()
os.remove(dir)
local cmd = string.format("mkdir -p %s && cd %s && env JUPYTER_PATH=%s/share/jupyter timeout -k 10 1200 sh -c \"'%s' --install-kernel --prefix %s " ..
  ">/dev/null && jupyter nbconvert --to notebook --execute --ExecutePreprocessor.timeout=900 --output %s/out.ipynb " ..
  "%s/scripts/study.ipynb\" 2>&1", dir, dir, dir, exe, dir, dir, root)
local p2 = io.popen(cmd)
local log = p2:read("a")
local ok = p2:close()
local check = io.popen("/usr/bin/python3 -c \"" .. [[
import base64, json, sys
nb = json.load(open(sys.argv[1]))
bad = []
for i, c in enumerate(nb['cells']):
    if c['cell_type'] != 'code': continue
    src = ''.join(c['source'])
    pngs = [o['data']['image/png'] for o in c['outputs'] if 'image/png' in o.get('data', {})]
    errors = [o for o in c['outputs'] if o['output_type'] == 'error']
    wants = 'part(' in src and 'function part' not in src or src.rstrip().endswith('fig')
    if errors or (wants and not pngs) or any(base64.b64decode(p)[1:4] != b'PNG' for p in pngs):
        bad.append(i)
print('cells without their figure or with an error:', bad)
]] .. "\" " .. dir .. "/out.ipynb 2>&1")
local verdict = check:read("a")
check:close()
os.execute("rm -rf " .. dir)
local after = snapshot()
if before ~= "" and before == after and before:find("plots/part3_loss.png", 1, true) then passed = passed + 1
else
  failed = failed + 1
  print("FAIL the notebook changed plots/, results/ or cache/summary/:\n" .. before .. "\n---\n" .. after)
end
if not had_runs then os.execute("rm -rf '" .. root .. "/runs/notebook-quick'; rmdir '" .. root .. "/runs' 2>/dev/null") end
if ok and verdict:find("error: []", 1, true) then
  passed = passed + 1
else
  failed = failed + 1
  print("FAIL scripts/study.ipynb under nbconvert: " .. verdict .. "\n" .. log:sub(-3000))
end
finish(passed, failed)
