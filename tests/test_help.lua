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

-- The signatures written in doc/lua-api.md (a call whose arguments have an
-- option without spaces, "lr=1e-3", or an optional part, "[, level]"),
-- each against the help entries its name can mean (exact, xsa.NAME, or any
-- entry of that last name: the doc's tables name methods without receiver).
local function doc_signatures(md)
  local out, pos = {}, 1
  while true do
    local _, e, name, open = md:find("([%a_][%w_.:]*)([({])", pos)
    if not e then break end
    pos = e + 1
    local bs, be = md:find(open == "(" and "%b()" or "%b{}", e)
    if bs == e then
      local args = md:sub(bs, be):gsub("\\|", "|")
      local value = args:find("^%(%[*[%d%-]") -- "tensor([3, 3], dtype=int32)" prints a value
      if not value and (args:find("[%w_]=[^=]") or args:find("%[,")) then out[#out + 1] = {name = name, args = args} end
    end
  end
  return out
end

local function sig_options(sig)
  local o = {}
  for k, v in sig:gmatch("([%w_]+)=([^,}%]]*)") do o[k] = v:match("^%s*(.-)%s*$") end
  return o
end

-- positional arguments: names, with a table, "opts" or quoted alternatives matching anything
local function positional(args)
  local t = {}
  if args:sub(1, 1) == "{" then return t end -- f{a=, b=}: options only, compared as options
  for w in args:sub(2, -2):gsub("%b{}", "{}"):gsub("%b()", ""):gmatch("[^,%[%]]+") do
    w = w:match("^%s*(.-)%s*$")
    if w ~= "" then t[#t + 1] = (w == "{}" or w == "opts" or w:find('^"')) and "*" or (w:match("^([%w_]+)") or w) end
  end
  return t
end

-- nil when doc and entry agree, else why
local function disagreement(args, sig)
  local hargs = sig:match("^[^({]*(%b())") or sig:match("^[^({]*(%b{})")
  if not hargs or hargs:sub(1, 1) ~= args:sub(1, 1) then return "not a signature of this entry (" .. sig .. ")" end
  local a, b = positional(args), positional(hargs)
  if #a ~= #b then return string.format("%d positional arguments, help has %d (%s)", #a, #b, sig) end
  for i = 1, #a do
    if a[i] ~= b[i] and a[i] ~= "*" and b[i] ~= "*" then return string.format("argument %d is %s, help says %s", i, a[i], b[i]) end
  end
  local ho = sig_options(sig)
  for k, v in pairs(sig_options(args)) do
    if ho[k] == nil then return "option " .. k .. "= is not in help's " .. sig end
    if v ~= "" and ho[k] ~= v then return string.format("%s=%s, help says %s=%s", k, v, k, ho[k]) end
  end
  return nil
end

T.case("doc/lua-api.md's signatures and defaults are help's (one signature everywhere)", function()
  local md = assert(xsa.read_file(root .. "/doc/lua-api.md"))
  local sigs = doc_signatures(md)
  local checked, bad = 0, {}
  for _, d in ipairs(sigs) do
    local cands = {}
    for _, n in ipairs{d.name, "xsa." .. d.name} do if db[n] then cands[#cands + 1] = n end end
    local last = d.name:match("([%w_]+)$")
    if not d.name:find(".", 1, true) then -- "split(...)" in a table of methods, "loss:backward(...)": any entry of that name
      for k in pairs(db) do
        if k:sub(1, 1) ~= "_" and k:match("[.:]([%w_]+)$") == last and k ~= d.name and k ~= "xsa." .. d.name then cands[#cands + 1] = k end
      end
    end
    for i = #cands, 1, -1 do if not (db[cands[i]].sig or ""):find("[({]") then table.remove(cands, i) end end -- "tensor(...)" prints a value
    table.sort(cands)
    local why
    for _, c in ipairs(cands) do
      local w = "no signature"
      if db[c].sig and db[c].sig:find("[({]") then w = disagreement(d.args, db[c].sig) end
      if not w then why = nil; break end
      why = why or (c .. ": " .. w)
    end
    if #cands > 0 then
      checked = checked + 1
      if why and not why:find("not a signature of this entry", 1, true) then bad[#bad + 1] = d.name .. d.args .. "  -- " .. why end
    elseif d.name:find("^xsa%.") then
      bad[#bad + 1] = d.name .. ": no help entry"
    end
  end
  T.ok(checked >= 25, "the doc's signatures were found: " .. checked)
  T.eq(#bad, 0, "doc/lua-api.md and help disagree:\n  " .. table.concat(bad, "\n  "))
  -- the checker sees a wrong default, a missing option and a wrong argument count
  T.ok(disagreement("(xs [, {level=0.9}])", "f(xs [, {level=0.95}])"), "a default")
  T.ok(disagreement("(xs [, {lvl=}])", "f(xs [, {level=0.95}])"), "an option")
  T.ok(disagreement("(xs, ys [, {level=}])", "f(xs [, {level=0.95}])"), "an argument")
  T.eq(disagreement("(xs [, opts])", "f(xs [, {level=0.95}])"), nil, "opts is the table")
end)

T.case("help of a module, a function value, a value and a name", function()
  local t = help.text(xsa.gpt)
  T.ok(t:find("xsa.gpt{vocab=50257", 1, true) and t:find("xsa.gpt.load(path [, {attention=}])", 1, true) and t:find("Example:", 1, true), t)
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
-- terminal showed (escape sequences and bells removed). The REPL is left by
-- os.exit() typed after the input, not by the end of the input: script(1)
-- passes that on as an end-of-file only once the REPL has read everything
-- typed within 2 s, and drops it otherwise (util-linux's write_eof_to_child),
-- so a slow REPL (under ASan, on a busy machine) waited forever. A REPL still
-- running after 300 s is ended: the case fails with what it showed.
local function repl(input)
  local dir = T.tmpdir()
  T.writefile(dir .. "/in", input .. "os.exit(0)\n")
  local p = io.popen(string.format("cd %s && HOME=%s timeout -k 5 300 script -qc %s /dev/null < in 2>&1", dir, dir, exe))
  local out = p:read("a")
  p:close()
  os.execute("rm -rf '" .. dir .. "'")
  return (out:gsub("\27%[[%d;]*%a", ""):gsub("[\7\r]", ""))
end

T.case("help is the same global in scripts, -e and stdin as at the REPL", function()
  local dir = T.tmpdir()
  T.writefile(dir .. "/h.lua", "print(rawequal(help, xsa.help)); help(xsa.numbers.decimals)")
  for _, cmd in ipairs{exe .. " " .. dir .. "/h.lua", exe .. " -e 'print(rawequal(help, xsa.help)); help(xsa.numbers.decimals)'",
    exe .. " - < " .. dir .. "/h.lua"} do
    local p = io.popen(cmd .. " 2>&1")
    local out = p:read("a")
    p:close()
    T.ok(out:find("^true\nxsa.numbers.decimals%(scale, min%) %-> integer"), cmd .. ": " .. out)
  end
  os.execute("rm -rf '" .. dir .. "'")
end)

T.case("xsa.show: results by their fields, never running a metamethod", function()
  local show = xsa.show
  T.eq(show.text(1.5), "1.5")
  T.eq(show.text("x"), "x")
  T.ok(show.text({}):find("^table: 0x"))
  local r = {steps = {0, 5}, sa = {final_val = 0 / 0}, xsa = {final_val = 5}}
  T.eq(show.kind(r), nil, "a NaN final loss is not a finished result")
  r.sa.final_val = 6
  T.eq(show.kind(r).name, "xsa.train.pair")
  T.ok(show.text(r):find("^xsa.train.pair result: 5 steps; final val loss SA 6.0000, XSA 5.0000"), show.text(r))
  local runs = {runs = {{label = "A", final_val = 5}, {label = "B", final_val = 4.5}}}
  T.ok(show.text(runs):find("^xsa.train.runs result: 2 runs; final val loss A 5.0000, B 4.5000"), show.text(runs))
  T.eq(show.line(1, nil, "a"), "1\tnil\ta")
  local hostile = setmetatable({verdict = "x", n = 1, d = {}}, {__index = function() error("ran") end,
    __tostring = function() return "own" end})
  T.eq(show.kind(hostile), nil, "a table with a metatable is its own")
  T.eq(show.text(hostile), "own")
end)

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
    T.ok(out:find("xsa.gpt.load(path [, {attention=}]) -> model, optimizer | nil", 1, true), out)
    T.ok(out:find("tensor:matmul(b) -> tensor", 1, true), out)
    T.ok(out:find("xsa.optim.adamw(params [, {lr=1e-3", 1, true), out)
    T.ok(out:find("\ntrue\n", 1, true), "xsa.gpt.lo<Tab> completed: " .. out)
    T.ok(out:find("tensor([[2., 2.],", 1, true), "t:matm<Tab> completed: " .. out)
  end)

  T.case("the REPL: results print as results, help knows them, the banner names help(), nothing stray", function()
    local out = repl(table.concat({
      "s = xsa.stats.paired_summary({4.0, 4.1, 4.2}, {3.9, 4.0, 4.1}, {resamples = 100})",
      "s",
      "help(s)",
      "r = {steps = {0, 10, 20}, sa = {final_val = 6.25}, xsa = {final_val = 5.88}, improvement_pct = 5.9, elapsed_s = 12}",
      "r",
      "help(r)",
      "f = xsa.plot.figure{}; f:panel{}:line({1, 2}, {2, 1})",
      "f:show({width = 40, height = 10})",
      "print('SAVED', f:save(os.tmpname() .. '.png'))",
      "{}",
      "", }, "\n"))
    T.ok(out:find("help() lists the modules, help(x) explains x", 1, true), "the banner names help(): " .. out)
    T.ok(out:find("\npaired summary: XSA better by 2.44% (95% CI 2.29 to 2.59, N=3)", 1, true), "a summary prints its verdict: " .. out)
    T.ok(out:find("a summary of xsa.stats.paired_summary\n", 1, true) and out:find("Fields: n, d (per seed)", 1, true), out)
    T.ok(out:find("\nxsa.train.pair result: 20 steps; final val loss SA 6.2500, XSA 5.8800 (XSA +5.90%); 12.0 s of training", 1, true), out)
    T.ok(out:find("a result of xsa.train.pair\n", 1, true), out)
    T.ok(not out:find("\ntrue\n", 1, true), "fig:show() echoes nothing: " .. out)
    T.ok(out:find("\nSAVED\t/[^\n]*%.png\n"), "fig:save returns the path alone: " .. out)
    T.ok(out:find("\ntable: 0x", 1, true), "an unknown table still prints as Lua prints it")
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
