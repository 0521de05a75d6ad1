-- The LuaRocks package: `luarocks make` of xsa-scm-1.rockspec builds and
-- installs into a fresh rocks tree, and from another folder, with only that
-- tree on the Lua paths, a stock lua5.4 can `require "xsa"`, load the Lua
-- modules, tokenize (the tokenizer files travel with the rock) and generate;
-- the installed `xsa` executable finds its modules too. Skipped with a line
-- when luarocks or lua5.4 is missing, and under sanitizer builds (luarocks
-- builds the plain tree).
local T = require "testing"

local root = os.getenv("XSA_ROOT") or "."
local sh = xsa.sys.shell_quote

local function run(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  local ok, _, code = p:close()
  return ok, out, code
end

if not os.execute("command -v luarocks >/dev/null 2>&1") then
  print("skip: luarocks not installed (mk/deps.sh installs it)")
elseif not os.execute("command -v lua5.4 >/dev/null 2>&1") then
  print("skip: lua5.4 not installed")
elseif os.getenv("XSA_SANITIZED") then
  print("skip: luarocks make under a sanitizer build")
else
  T.case("luarocks make installs a module that stock lua5.4 requires from any folder", function()
    local tree = T.tmpdir()
    local ok, out = run(string.format("cd %s && luarocks --lua-version 5.4 --tree %s make xsa-scm-1.rockspec",
      sh(root), sh(tree)))
    T.ok(ok, out)
    T.ok(out:find("xsa scm%-1 is now installed"), out)
    local away = T.tmpdir()
    local env = string.format("cd %s && eval \"$(luarocks --lua-version 5.4 --tree %s path)\" && env -u XSA_ROOT -u XSA_DATA ",
      sh(away), sh(tree))
    T.writefile(away .. "/check.lua", [[
local xsa = require "xsa"
local tok = xsa.tokenizer.gpt2()
local m = xsa.gpt{d_model = 16, n_head = 2, seq_len = 8}
local text = m:generate("Hello", {max_new_tokens = 3, seed = 1})
local train = package.searchpath("xsa.train", package.path)
print(xsa.version(), tok:encode_table("Hello world")[2], type(text), xsa.stats.mean({1, 2}),
  train:sub(1, #arg[1]) == arg[1])
]])
    ok, out = run(env .. "lua5.4 check.lua " .. sh(tree))
    T.ok(ok, out)
    T.eq(out, "0.1.0\t995\tstring\t1.5\ttrue\n", out)
    ok, out = run(env .. sh(tree .. "/bin/xsa") .. " -e " .. sh("print(xsa.help.text('adamw'):match('^%S+'))"))
    T.ok(ok, out)
    T.eq(out, "xsa.optim.adamw(params\n")
    os.execute("rm -rf " .. sh(tree) .. " " .. sh(away))
  end)
end

T.done()
