-- help(), the API index and the REPL's tab completion: the entries of
-- lua/xsa/help_db.lua cover every public function (the xsa tables, the Lua
-- modules and the methods of every userdata type and Lua class), the
-- committed doc/api-index.md is what scripts/gen_api_doc.lua generates, and
-- help and completion work in the REPL driven through a pseudo-terminal
-- (script(1), util-linux, part of every Debian system).
local T = require "testing"

local root = os.getenv("XSA_ROOT") or "."
local exe = os.getenv("XSA_EXE") or "build/xsa"
if not exe:find("^/") then exe = root .. "/" .. exe end
local help = xsa.help
local db = require "xsa.help_db"

local function all_modules()
  local mods = {}
  local p = io.popen("ls " .. root .. "/lua/xsa/*.lua")
  for f in p:lines() do
    local m = f:match("([%w_]+)%.lua$")
    if m ~= "help_db" then mods[#mods + 1] = m end
  end
  p:close()
  return mods
end

T.case("completion walks globals, fields and methods without evaluating anything", function()
  local c = help.complete
  T.eq(table.concat(c("xsa.gpt.lo"), " "), "xsa.gpt.load")
  T.eq(table.concat(c("xsa.gpt.sample"), " "), "xsa.gpt.sample xsa.gpt.sample_probs")
  T.ok(table.concat(c("pri"), " "):find("print", 1, true))
  T.ok(table.concat(c("whi"), " "):find("while", 1, true), "keywords")
  _G.tt = xsa.zeros(2)
  T.eq(table.concat(c("tt:matm"), " "), "tt:matmul")
  T.ok(#c("tt:") > 60, "every tensor method")
  _G.mm = xsa.gpt{d_model = 8, n_head = 2, seq_len = 4, vocab = 16}
  T.eq(table.concat(c("mm:gen"), " "), "mm:generate")
  _G.ff = xsa.plot.figure{}
  T.eq(table.concat(c("ff:sh"), " "), "ff:show")
  -- nothing runs: an __index function that would raise, a module not loaded yet
  _G.trap = setmetatable({}, {__index = function() error("evaluated!") end})
  T.eq(#c("trap.x"), 0)
  T.eq(#c("trap.x.y"), 0)
  local loaded = package.loaded["xsa.stats"] ~= nil
  T.ok(not loaded, "xsa.stats is not loaded by the test harness")
  T.eq(table.concat(c("xsa.stats.me"), " "), "xsa.stats.mean")
  T.eq(package.loaded["xsa.stats"], nil, "completion did not load xsa.stats")
  T.ok(table.concat(c("xsa.pl"), " "):find("xsa.plot", 1, true), "modules of xsa before they load")
  T.eq(#c("1 +"), 0)
  _G.tt, _G.mm, _G.ff, _G.trap = nil, nil, nil, nil
end)

T.case("every public function and method has a help entry, and every entry names one", function()
  -- instances create nothing new: the types' metatables are in the registry from the start
  local names = help.public_names(all_modules())
  local missing, n = {}, 0
  for name in pairs(names) do
    n = n + 1
    if not db[name] then missing[#missing + 1] = name end
  end
  table.sort(missing)
  T.ok(n > 250, "only " .. n .. " public names found")
  T.eq(#missing, 0, "no help entry for: " .. table.concat(missing, ", "))
  local stale = {}
  local groups = {}
  for _, g in ipairs(db._modules) do groups[g] = true end
  for _, g in ipairs(db._types) do groups[g] = true end
  for name in pairs(db) do
    if name:sub(1, 1) ~= "_" and not groups[name] and names[name] == nil then stale[#stale + 1] = name end
  end
  table.sort(stale)
  T.eq(#stale, 0, "help entries for nothing: " .. table.concat(stale, ", "))
  for name, e in pairs(db) do
    if name:sub(1, 1) ~= "_" then
      T.ok(type(e.sig) == "string" and type(e.desc) == "string" and #e.desc > 3, "entry " .. name .. " needs sig and desc")
    end
  end
  -- the module list of the help is the folder's
  local listed = {}
  for _, m in ipairs(help.MODULES) do listed[m] = true end
  for _, m in ipairs(all_modules()) do T.ok(listed[m], "xsa.help.MODULES lacks " .. m) end
end)

T.case("doc/api-index.md is what scripts/gen_api_doc.lua generates", function()
  local committed = T.read(root .. "/doc/api-index.md")
  T.ok(committed, "doc/api-index.md missing")
  T.ok(committed == help.api_index(), "doc/api-index.md is stale: run  ./xsa scripts/gen_api_doc.lua")
  local p = io.popen(exe .. " " .. root .. "/scripts/gen_api_doc.lua --output -")
  T.ok(p:read("a") == committed, "the script prints the same text")
  p:close()
end)

T.case("help of a module, a function value, a value and a name", function()
  local t = help.text(xsa.gpt)
  T.ok(t:find("xsa.gpt{vocab=50257", 1, true) and t:find("xsa.gpt.load(path)", 1, true) and t:find("Example:", 1, true), t)
  local z = xsa.zeros(2)
  t = help.text(z.matmul)
  T.ok(t:find("^tensor:matmul%(b%)") and t:find("Also reachable as:", 1, true), t)
  t = help.text("adamw")
  T.ok(t:find("^xsa%.optim%.adamw%(params") and t:find("opt:step()", 1, true), t)
  t = help.text(z)
  T.ok(t:find("^tensor\n") and t:find("Methods:", 1, true) and t:find("tensor:softmax", 1, true), t)
  t = help.text(xsa.gpt{d_model = 8, n_head = 2, seq_len = 4, vocab = 16})
  T.ok(t:find("model:generate(prompt", 1, true), t)
  T.ok(help.text():find("Modules:", 1, true))
  T.ok(help.text("top_p"):find("matches", 1, true), "a word searches the descriptions")
  T.ok(help.text("no-such-thing-at-all"):find("no help for", 1, true))
  T.ok(help.text(xsa.plot.figure{}):find("figure:show", 1, true), "a Lua class instance")
end)

-- Runs the REPL in a pseudo-terminal with `input` typed in; returns what the
-- terminal showed (escape sequences and bells removed).
local function repl(input)
  local dir = T.tmpdir()
  T.writefile(dir .. "/in", input)
  local p = io.popen(string.format("cd %s && HOME=%s script -qc %s /dev/null < in 2>&1", dir, dir, exe))
  local out = p:read("a")
  p:close()
  os.execute("rm -rf '" .. dir .. "'")
  return (out:gsub("\27%[[%d;]*%a", ""):gsub("[\7\r]", ""))
end

local have_script = os.execute("command -v script >/dev/null 2>&1")
if not have_script then
  print("skip: script (util-linux) not installed: the REPL is not driven through a pseudo-terminal")
else
  T.case("the REPL: help() and tab completion in a pseudo-terminal", function()
    local out = repl(table.concat({
      "help()",
      "help(xsa.gpt)",
      "t = xsa.ones(2, 2)",
      "help(t.matmul)",
      'help("adamw")',
      "print(xsa.gpt.lo\t == xsa.gpt.load)",   -- completes to xsa.gpt.load
      "print(t:matm\t(t))",                     -- completes to t:matmul
      "", }, "\n"))
    T.ok(out:find("Modules:", 1, true) and out:find("xsa.nn            fused layer ops", 1, true), out)
    T.ok(out:find("xsa.gpt.load(path) -> model, optimizer | nil", 1, true), out)
    T.ok(out:find("tensor:matmul(b) -> tensor", 1, true), out)
    T.ok(out:find("xsa.optim.adamw(params [, {lr=1e-3", 1, true), out)
    T.ok(out:find("\ntrue\n", 1, true), "xsa.gpt.lo<Tab> completed: " .. out)
    T.ok(out:find("tensor([[2., 2.],", 1, true), "t:matm<Tab> completed: " .. out)
  end)

  T.case("plot.show sizes the text figure to the terminal (COLUMNS/LINES, else the tty)", function()
    local function lines_of(cmd)
      local p = io.popen(cmd)
      local out = p:read("a")
      p:close()
      local n, w = 0, 0
      for line in (out:gsub("[\f\r]", "")):gmatch("([^\n]*)\n") do
        n = n + 1
        w = math.max(w, #line)
      end
      return n, w, out
    end
    if not xsa.plot.gnuplot() then print("skip: gnuplot not installed"); return end
    local n, w = lines_of("COLUMNS=70 LINES=20 " .. exe .. " -e 'xsa.plot.show({1, 4, 9, 16})'")
    T.eq(w, 70)
    T.eq(n, 19, "one line less than the window")
    local cmd = string.format("env -u COLUMNS -u LINES script -qc \"stty cols 90 rows 30; %s -e 'local f = xsa.plot.figure{}; " ..
      "f:panel{}:line({1, 2}, {2, 1}); f:show()'\" /dev/null </dev/null", exe)
    local out
    n, w, out = lines_of(cmd)
    T.eq(w, 90, out)
    T.ok(n >= 29, out)
  end)
end

T.done()
