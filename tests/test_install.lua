-- An installed xsa used as a new user would (issue 37): `make install
-- PREFIX=TMP/p`, then from another folder, with no XSA_ROOT, LUA_PATH,
-- XSA_DATA or XSA_RESULTS: the tokenizer, model:generate("text"),
-- scripts/sample.lua on a checkpoint, the corpus (installed; a clear
-- message naming XSA_DATA and data/fetch.sh when it is not, and no word of
-- a checkout), and the experiment of doc/study.md ("your own experiment"),
-- which writes its cache, plots and records beside itself: nothing appears in
-- the checkout. The checkout's own xsa running that script from outside
-- writes beside it too. Skipped under sanitizer builds (the install is the
-- plain build).
local T = require "testing"

local ROOT = xsa.sys.abspath(xsa.sys.root())
local sh = xsa.sys.shell_quote
local EXE = xsa.experiment.exe()

local function run(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  local ok = p:close()
  return ok, out
end

-- what the checkout's folders a run could write into hold (git's view of them)
local function checkout_state()
  local _, out = run("cd " .. sh(ROOT) .. " && git status --porcelain --ignored -- cache plots results data 2>/dev/null; " ..
    "find cache plots results -newer " .. sh(ROOT .. "/Makefile") .. " -type f 2>/dev/null | sort")
  return out
end

if os.getenv("XSA_SANITIZED") then
  print("skip: make install under a sanitizer build")
  T.done()
end

local tmp = xsa.sys.mkdtemp("xsa-test-install")
local prefix, away, home = tmp .. "/p", tmp .. "/away", tmp .. "/home"
local ok, out = run(string.format("cd %s && env -u MAKEFLAGS -u MFLAGS make -s install PREFIX=%s", sh(ROOT), sh(prefix)))
assert(ok, out)
assert(os.execute("mkdir -p " .. sh(away) .. " " .. sh(home)))
local XSA = prefix .. "/bin/xsa"
local ENV = string.format("cd %s && env -u XSA_ROOT -u LUA_PATH -u LUA_CPATH -u XSA_DATA -u XSA_RESULTS -u XSA_CACHE " ..
  "-u XDG_CACHE_HOME HOME=%s ", sh(away), sh(home))
local before = checkout_state()

T.case("the installed tokenizer and generation work from another folder", function()
  local ok2, o = run(ENV .. sh(XSA) .. [[ -e '
local tok = xsa.tokenizer.gpt2()
local ids = tok:encode_table("Hello world, once upon a time")
assert(tok:decode(ids) == "Hello world, once upon a time")
local m = xsa.gpt{d_model = 16, n_head = 2, seq_len = 8, n_layer = 1, seed = 1}
local text, new = m:generate("Once upon", {max_new_tokens = 4, seed = 1})
assert(type(text) == "string" and new:numel() == 4 and text == tok:decode(new))
m:save("m.safetensors")
io.write("ok ", #ids)']])
  T.ok(ok2 and o:find("^ok %d+$"), o)
  -- scripts/sample.lua, run by the installed xsa on a checkpoint of the user's folder
  local ok3, o3 = run(ENV .. sh(XSA) .. " " .. sh(ROOT .. "/scripts/sample.lua") .. " m.safetensors --tokens 5 --seed 2")
  T.ok(ok3 and o3:find("Once upon a time", 1, true), o3)
  T.ok(not o3:find("checkout", 1, true), o3)
end)

T.case("the corpus is installed; without it the message says what to set, not 'checkout'", function()
  local ok2, o = run(ENV .. sh(XSA) .. " -e 'local tr = xsa.data.tinystories{seq_len = 8, max_tokens = 2000, batch = 2} " ..
    "io.write(tostring(tr), \" \", xsa.data.cache_dir())'")
  T.ok(ok2 and o:find("xsa.data loader", 1, true), o)
  T.ok(o:find(home .. "/.cache/xsa", 1, true), "token caches in the user's cache folder: " .. o)
  local xz = prefix .. "/share/lua/5.4/xsa/data/tinystories.txt.xz"
  assert(os.rename(xz, xz .. ".away"))
  local ok3, o3 = run(ENV .. sh(XSA) .. " -e 'xsa.data.tinystories{max_tokens = 2000}'")
  assert(os.rename(xz .. ".away", xz))
  T.ok(not ok3, o3)
  T.ok(o3:find("XSA_DATA", 1, true) and o3:find("data/fetch.sh", 1, true) and o3:find("tinystories.txt.xz", 1, true), o3)
  T.ok(not o3:find("checkout", 1, true), o3)
end)

-- doc/study.md's own example, as a user copies it
local example = assert(xsa.read_file(ROOT .. "/doc/study.md")):match("```lua\n(%-%- my_lambda%.lua.-)```")
assert(example, "doc/study.md's my_lambda.lua example")

T.case("a user's experiment writes beside itself (installed xsa and the checkout's), never into the checkout", function()
  for i, exe in ipairs{XSA, EXE} do
    local dir = away .. "/exp" .. i
    assert(os.execute("mkdir -p " .. sh(dir)))
    T.writefile(dir .. "/my_lambda.lua", example)
    -- not --quick: its records go where a real run's go (results/), on tiny settings
    local ok2, o = run(string.format("cd %s && env -u XSA_ROOT -u LUA_PATH -u XSA_RESULTS HOME=%s %s %s/my_lambda.lua " ..
      "--steps 2 --eval-every 1 --eval-batches 1 --max-tokens 6000 --batch 2 --seq-len 16", sh(away), sh(home), sh(exe), sh(dir)))
    T.ok(ok2, o)
    T.ok(not o:find("checkout", 1, true), o)
    for _, sub in ipairs{"cache/summary/mine.json", "plots/my_lambda.png"} do
      T.ok(xsa.sys.exists(dir .. "/" .. sub), exe .. ": " .. sub .. " beside the script\n" .. o)
    end
    local _, recs = run("ls " .. sh(dir .. "/results/mine"))
    T.ok(recs:find("%.json"), exe .. ": its record in its own results/: " .. recs)
  end
  T.eq(checkout_state(), before, "nothing new in the checkout's cache/, plots/, results/, data/")
end)

os.execute("rm -rf " .. sh(tmp))
T.done()
