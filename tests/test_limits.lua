-- test_limits.lua: resources that are not what a reader or writer expects.
-- Files that are a FIFO, a device or a directory are refused at once by every
-- reader (a FIFO would block forever, /dev/zero never ends); a model or batch
-- that cannot fit in memory is refused before anything is allocated; a full or
-- read-only output folder gives an error and leaves the old file as it was,
-- with no temporary file behind. Readers run in a child process under
-- timeout(1), so a hang is a failure, not a stuck suite.
local T = require "testing"
local xsa = require "xsa"

local EXE = os.getenv("XSA_EXE") or "build/xsa"
local ROOT = os.getenv("XSA_ROOT") or "."
if EXE:sub(1, 1) ~= "/" then EXE = ROOT .. "/" .. EXE end

local function shq(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local TMP = os.tmpname()
os.remove(TMP)
assert(os.execute("mkdir -p " .. shq(TMP)))

-- Runs Lua code in a child xsa under `timeout 20`; returns status, output.
local function child(code)
  local f = TMP .. "/child.lua"
  T.writefile(f, code)
  local p = io.popen("timeout 20 " .. shq(EXE) .. " " .. shq(f) .. " 2>&1")
  local out = p:read("a")
  local _, _, status = p:close()
  return status, out
end

local fifo = TMP .. "/fifo"
assert(os.execute("mkfifo " .. shq(fifo)))

local readers = {
  {"xsa.read_file", "return assert(xsa.read_file(P))"},
  {"xsa.data.read_text", "return assert(xsa.data.read_text(P))"},
  {"xsa.safetensors.load", "return xsa.safetensors.load(P)"},
  {"xsa.gpt.load", "return xsa.gpt.load(P)"},
  {"xsa.json.read_file", "return assert(xsa.json.read_file(P))"},
  {"xsa.tokenizer.load", "return xsa.tokenizer.load(P, P)"},
  {"xsa.data.tinystories", "return xsa.data.tinystories{path = P, cache = false}"},
}
local specials = {
  {fifo, "is a pipe (FIFO), not a regular file"},
  {"/dev/zero", "is a device, not a regular file"},
  {TMP, "Is a directory"},
}

for _, r in ipairs(readers) do
  T.case(r[1] .. " refuses a FIFO, /dev/zero and a directory at once", function()
    for _, sp in ipairs(specials) do
      local status, out = child(string.format(
        "local xsa = require 'xsa'\nlocal P = %q\nlocal ok, err = pcall(function() %s end)\n" ..
        "assert(not ok, 'no error')\nio.write(tostring(err))\n", sp[1], r[2]))
      T.eq(status, 0, r[1] .. " on " .. sp[1] .. " (124 = hung): " .. out)
      T.ok(out:find(sp[2], 1, true), r[1] .. " on " .. sp[1] .. ": " .. out)
    end
  end)
end

T.case("a model that cannot fit in memory is refused before allocation", function()
  -- 13.3e9 parameters: 106 GB of weights and gradients
  T.raises(function() xsa.gpt{vocab = 50257, d_model = 8192, n_layer = 16, n_head = 1, seq_len = 64} end,
    "more than this machine's")
  T.raises(function() xsa.gpt{vocab = 50257, d_model = 65536, n_layer = 1024, n_head = 1, seq_len = 64} end,
    "parameters is too many")
  -- a batch whose activations cannot fit
  local m = xsa.gpt{vocab = 64, d_model = 16, n_layer = 1, n_head = 1, seq_len = 1 << 20}
  local x = xsa.zeros({64, 1 << 20}, "int32")
  T.raises(function() m:loss(x, x) end, "gpt:")
end)

-- A small tmpfs when we may mount one (root); else the case says why it skips.
local function small_fs(opts)
  local d = TMP .. "/fs" .. tostring(math.random(1 << 30))
  os.execute("mkdir -p " .. shq(d))
  local ok = os.execute("mount -t tmpfs -o " .. opts .. " tmpfs " .. shq(d) .. " 2>/dev/null")
  if not ok then return nil end
  return d
end
local function unmount(d) os.execute("umount " .. shq(d) .. " 2>/dev/null") end

local function listing(d)
  local p = io.popen("ls -A " .. shq(d))
  local s = p:read("a")
  p:close()
  return s
end

T.case("a full disk: checkpoints, results and caches fail cleanly, old files intact", function()
  local d = small_fs("size=128k")
  if not d then print("skip: cannot mount a tmpfs here (needs root); full-disk case not run") return end
  local ok, err = pcall(function()
    local good = d .. "/model.safetensors"
    local small = xsa.gpt{vocab = 64, d_model = 16, n_layer = 1, n_head = 1, seq_len = 8, seed = 1}
    small:save(good)
    local before = T.readfile(good)
    local big = xsa.gpt{vocab = 2000, d_model = 64, n_layer = 1, n_head = 1, seq_len = 8}
    T.raises(function() big:save(good) end, "No space left on device")
    T.eq(T.readfile(good), before, "the old checkpoint is unchanged")
    T.raises(function() xsa.write_file_atomic(d .. "/r.json", string.rep("x", 1 << 20)) end, "No space left")
    T.raises(function() xsa.json.write_file(d .. "/r.json", {x = string.rep("y", 1 << 20)}) end, "No space left")
    T.eq(listing(d), "model.safetensors\n", "no temporary or partial file left")
  end)
  unmount(d)
  assert(ok, err)
end)

T.case("a read-only folder: writes fail with the reason; a token cache is skipped with a warning", function()
  local d = small_fs("ro,size=64k")
  if not d then print("skip: cannot mount a tmpfs here (needs root); read-only case not run") return end
  local ok, err = pcall(function()
    local m = xsa.gpt{vocab = 64, d_model = 16, n_layer = 1, n_head = 1, seq_len = 8}
    T.raises(function() m:save(d .. "/m.safetensors") end, "Read-only file system")
    -- training data still loads when its cache cannot be written
    local status, out = child(string.format(
      "local xsa = require 'xsa'\nlocal tr = xsa.data.tinystories{max_tokens = 20000, batch = 4, seq_len = 8, cache = %q}\n" ..
      "io.write('windows ', tr.num_windows)\n", d .. "/c.cache"))
    T.eq(status, 0, out)
    T.ok(out:find("token cache not written", 1, true) and out:find("windows ", 1, true), out)
  end)
  unmount(d)
  assert(ok, err)
end)

os.execute("rm -rf " .. shq(TMP))
T.done()
