-- xsa.help: help at the REPL (where it is also the global `help`) and the
-- REPL's tab completion.
--
--   help()                 the modules, one line each
--   help(xsa.gpt)          a module or table: its entry and its functions
--   help(t.matmul)         a function value: its signature, description, example
--   help(model)            a value of a type: the type's entry and its methods
--   help(r)                a training result or paired summary: what returned it, its fields (xsa.show)
--   help("adamw")          a name: exact ("xsa.optim.adamw"), last part, or words to search
--   xsa.help.text(x)       the same text as a string
--   xsa.help.complete("xsa.gpt.lo")  -> {"xsa.gpt.load"}  (what Tab offers)
--
-- The entries live in one table, lua/xsa/help_db.lua, keyed by qualified name:
-- "xsa.zeros", "xsa.nn.linear", "tensor:matmul" (methods are "TYPE:name" with
-- the receiver names of M.RECEIVERS). scripts/gen_api_doc.lua writes
-- doc/api-index.md from it, and a test checks every public function has one
-- (M.public_names enumerates them).
--
-- Completion evaluates nothing: it walks globals and fields with rawget and
-- looks at metatables (debug.getmetatable, __index tables, a type's `methods`),
-- so no __index function or module loader runs while you press Tab.
-- help(x) follows the same rule for the value it is given: it is looked up
-- by identity (rawequal), tables are walked with next and rawget, metatables
-- read with debug.getmetatable, so none of x's metamethods (__eq, __index,
-- __pairs, __len, __tostring, __name, ...) runs, and every loop is over a
-- finite table of the module's own (tests/test_reliability.lua gives help a
-- value with every metamethod set to raise or loop forever).
-- Non-goals: help for Lua's own standard library.
local M = {}

-- help documents the facade itself (what a user reaches as xsa.NAME), so it
-- alone of the modules reads it, when it is asked for an index
local function facade() return require "xsa" end

-- Receiver names of the methods of each type: registry metatable names for
-- userdata, module.Class for Lua classes.
M.RECEIVERS = {
  ["xsa.tensor"] = "tensor", ["xsa.generator"] = "generator", ["xsa.gpt"] = "model",
  ["xsa.adamw"] = "optimizer", ["xsa.tokenizer"] = "tokenizer", ["xsa.kv_cache"] = "cache",
  ["xsa.data.loader"] = "loader", ["xsa.plot.Figure"] = "figure", ["xsa.plot.Panel"] = "panel",
  ["xsa.progress.Bar"] = "bar",
}

-- The pure-Lua modules of lua/xsa/ (xsa.NAME loads them on first use).
M.MODULES = {"args", "attention", "cache", "checkpoint", "data", "endpoints", "executor", "experiment", "generate", "group",
  "help", "notebook", "numbers", "options", "pair", "plot", "progress", "provenance", "record", "report", "reuse", "runs",
  "samples", "schedule", "show", "state_files", "stats", "store", "study", "sys", "text", "tokenizer", "train"}

local function db() return require("xsa.help_db") end

-- Methods of a metatable: its __index table, or its `methods` table (types
-- whose __index is a function keep one for introspection).
local function methods_of(mt)
  if type(mt) ~= "table" then return nil end
  local idx = rawget(mt, "__index")
  if type(idx) == "table" then return idx end
  local m = rawget(mt, "methods")
  if type(m) == "table" then return m end
  return nil
end

local function sorted_keys(t)
  local ks = {}
  for k in next, t do if type(k) == "string" then ks[#ks + 1] = k end end
  table.sort(ks)
  return ks
end

-- Every public function: qualified name -> value. `modules` (default: the
-- loaded ones) lists the Lua modules to include; the test passes them all.
function M.public_names(modules)
  local xsa = facade()
  local out = {}
  local function add(name, v) if out[name] == nil then out[name] = v end end
  local lua_mods = {}
  for _, m in ipairs(modules or M.MODULES) do
    local mod = modules and require("xsa." .. m) or rawget(package.loaded, "xsa." .. m)
    if type(mod) == "table" then lua_mods[m] = mod end
  end
  for _, k in ipairs(sorted_keys(xsa)) do
    local v = rawget(xsa, k)
    if k:sub(1, 1) ~= "_" and not lua_mods[k] then
      if type(v) == "function" then add("xsa." .. k, v)
      elseif type(v) == "table" then
        add("xsa." .. k, v)
        for _, kk in ipairs(sorted_keys(v)) do
          if type(rawget(v, kk)) == "function" and kk:sub(1, 1) ~= "_" then add("xsa." .. k .. "." .. kk, rawget(v, kk)) end
        end
      end
    end
  end
  for m, mod in pairs(lua_mods) do
    add("xsa." .. m, mod)
    for _, k in ipairs(sorted_keys(mod)) do
      local v = rawget(mod, k)
      if k:sub(1, 1) ~= "_" then
        if type(v) == "function" then add("xsa." .. m .. "." .. k, v)
        elseif type(v) == "table" and rawequal(rawget(v, "__index"), v) then -- a class
          local recv = M.RECEIVERS["xsa." .. m .. "." .. k] or k:lower()
          for _, mk in ipairs(sorted_keys(v)) do
            if type(rawget(v, mk)) == "function" and mk:sub(1, 2) ~= "__" then add(recv .. ":" .. mk, rawget(v, mk)) end
          end
        end
      end
    end
  end
  for name, mt in next, debug.getregistry() do
    if type(name) == "string" and name:match("^xsa%.") and type(mt) == "table" and rawget(mt, "__name") == name then
      local meths = methods_of(mt)
      if meths then
        local recv = M.RECEIVERS[name] or name:match("([^.]+)$")
        for _, mk in ipairs(sorted_keys(meths)) do
          if type(rawget(meths, mk)) == "function" and mk:sub(1, 1) ~= "_" then add(recv .. ":" .. mk, rawget(meths, mk)) end
        end
      end
    end
  end
  return out
end

-- The receiver name of a value's type ("tensor" for a tensor), or nil.
local function receiver_of(v)
  local mt = debug.getmetatable(v)
  if type(mt) ~= "table" then return nil end
  local name = rawget(mt, "__name")
  if type(name) == "string" and M.RECEIVERS[name] then return M.RECEIVERS[name] end
  for m, mod in next, package.loaded do
    if type(m) == "string" and m:match("^xsa%.") and type(mod) == "table" then
      for k, cls in next, mod do
        if rawequal(cls, mt) and type(k) == "string" then return M.RECEIVERS[m .. "." .. k] or k:lower() end
      end
    end
  end
  return nil
end

-- s in lines of `width` display columns, each after `indent` (xsa.text).
local function wrap(s, width, indent)
  local lines = require("xsa.text").wrap((s:gsub("%s", " ")), width - #indent)
  if #lines == 1 and lines[1] == "" then return "" end
  for i, l in ipairs(lines) do lines[i] = indent .. l end
  return table.concat(lines, "\n")
end

-- The full text of one entry.
function M.entry_text(name, e)
  local out = {e.sig or name, "", wrap(e.desc or "", 78, "  ")}
  if e.example then
    out[#out + 1] = ""
    out[#out + 1] = "  Example:"
    for line in (e.example .. "\n"):gmatch("(.-)\n") do out[#out + 1] = "    " .. line end
  end
  if e.see then out[#out + 1] = "\n  See also: " .. e.see end
  return table.concat(out, "\n")
end

-- One line: the signature, or name plus the first sentence.
local function short(name, e)
  return e.sig or name
end

-- Entries whose names start with prefix (".", ":" included), sorted.
local function members(prefix)
  local out = {}
  for name in pairs(db()) do
    if name:sub(1, #prefix) == prefix and not name:sub(#prefix + 1):find("[.:]") then out[#out + 1] = name end
  end
  table.sort(out)
  return out
end

local function listing(title, names)
  local out = {title}
  for _, n in ipairs(names) do out[#out + 1] = "  " .. short(n, db()[n]) end
  return table.concat(out, "\n")
end

local function entry_with_members(name)
  local D = db()
  local parts = {}
  if D[name] then parts[#parts + 1] = M.entry_text(name, D[name]) end
  local fs = members(name .. ".")
  if #fs > 0 then parts[#parts + 1] = listing("\nFunctions (help(\"NAME\") for one):", fs) end
  local ms = members((name:match("^xsa%.(.*)") and "" or name) .. ":")
  if not name:match("^xsa") and #ms > 0 then parts[#parts + 1] = listing("\nMethods:", ms) end
  return table.concat(parts, "\n")
end

-- The overview: help() with no argument.
local function overview()
  local D = db()
  local out = {"xsa " .. facade().version() .. ": help(x) takes a module, a function, a value or a name.",
    "  help(xsa.gpt)  help(t.matmul)  help(model)  help(\"adamw\")  help(\"tensor\")   Tab completes names.", "",
    "Modules:"}
  for _, n in ipairs(D._modules) do
    local e = D[n]
    out[#out + 1] = string.format("  %-17s %s", n, e and e.summary or "")
  end
  out[#out + 1] = ""
  out[#out + 1] = "Types (their methods: help(\"tensor\"), help(model), ...):"
  for _, n in ipairs(D._types) do
    local e = D[n]
    out[#out + 1] = string.format("  %-17s %s", n, e and e.summary or "")
  end
  return table.concat(out, "\n")
end

-- Names an argument of help may refer to.
local function find_value(x)
  local names = M.public_names()
  local found = {}
  for name, v in next, names do if rawequal(v, x) then found[#found + 1] = name end end
  local D = db()
  local function alias(n)
    local d = D[n] and D[n].desc or ""
    return d:match("^Alias") ~= nil or d:match("^The same as") ~= nil
  end
  table.sort(found, function(a, b)
    -- prefer a documented name over an alias, a method over a function, then the shorter
    if alias(a) ~= alias(b) then return alias(b) end
    local am, bm = a:find(":", 1, true) ~= nil, b:find(":", 1, true) ~= nil
    if am ~= bm then return am end
    if #a ~= #b then return #a < #b end
    return a < b
  end)
  return found
end

function M.text(x)
  local D = db()
  if x == nil then return overview() end
  if type(x) == "string" then
    if D[x] then return entry_with_members(x) end
    if D["xsa." .. x] then return entry_with_members("xsa." .. x) end
    local hits = {}
    for name in pairs(D) do
      if name:sub(1, 1) ~= "_" and (name:match("[.:]([%w_]+)$") == x) then hits[#hits + 1] = name end
    end
    table.sort(hits)
    if #hits == 1 then return entry_with_members(hits[1]) end
    if #hits == 0 then
      local lx = x:lower()
      for name, e in pairs(D) do
        if name:sub(1, 1) ~= "_" and (name:lower():find(lx, 1, true) or (e.desc or ""):lower():find(lx, 1, true)) then
          hits[#hits + 1] = name
        end
      end
      table.sort(hits)
      if #hits == 0 then return "no help for '" .. x .. "' (help() lists the modules)" end
      if #hits > 40 then
        local n = #hits
        for i = 41, n do hits[i] = nil end
        hits[#hits + 1] = "... (" .. (n - 40) .. " more)"
      end
    end
    local out = {"'" .. x .. "' matches:"}
    for _, n in ipairs(hits) do out[#out + 1] = "  " .. (D[n] and short(n, D[n]) or n) end
    return table.concat(out, "\n")
  end
  local names = find_value(x)
  if #names > 0 then
    local t = entry_with_members(names[1])
    if #names > 1 then t = t .. "\n\n  Also reachable as: " .. table.concat(names, ", ", 2) end
    return t
  end
  local recv = receiver_of(x)
  if recv then return entry_with_members(recv) end
  local kind = require("xsa.show").kind(x) -- a plain-table result: what returned it, its fields
  if kind then
    return string.format("a %s of %s\n\n  Fields: %s\n\n%s", kind.what, kind.name, kind.fields, entry_with_members(kind.name))
  end
  return "no help for this " .. type(x) .. " (help() lists the modules)"
end

-- Prints M.text(x).
function M.help(x)
  print(M.text(x))
end

-- doc/api-index.md: every entry, grouped by module and type, one line each
-- (scripts/gen_api_doc.lua writes it; a test checks the committed file).
function M.api_index()
  local D = db()
  local groups, order = {}, {}
  for _, g in ipairs(D._modules) do groups[g] = {}; order[#order + 1] = g end
  for _, g in ipairs(D._types) do groups[g] = {}; order[#order + 1] = g end
  for name in pairs(D) do
    if name:sub(1, 1) ~= "_" and not groups[name] then
      local g = name:match("^(.*)[.:][^.:]*$")
      while g and not groups[g] do g = g:match("^(.*)%.[^.]*$") end
      assert(g, "help_db: no module or type for " .. name)
      table.insert(groups[g], name)
    end
  end
  local function cell(s) return (s:gsub("|", "\\|"):gsub("\n", " ")) end
  local out = {"# API index", "",
    "Every public function and method of xsa with its signature and what it does. Generated from",
    "`lua/xsa/help_db.lua` by `xsa scripts/gen_api_doc.lua`: edit the entries there, not this file",
    "(`tests/test_help.lua` checks that this file is current and that every function has an entry).",
    "At the REPL, `help(x)` prints an entry with its example; [lua-api.md](lua-api.md) is the guide.", ""}
  local toc = {}
  for _, g in ipairs(order) do
    toc[#toc + 1] = string.format("[%s](#%s)", g, (g:gsub("%.", "")))
  end
  out[#out + 1] = "Modules and types: " .. table.concat(toc, " · ")
  for _, g in ipairs(order) do
    local names = groups[g]
    table.sort(names)
    local e = D[g]
    out[#out + 1] = ""
    out[#out + 1] = "## " .. g
    out[#out + 1] = ""
    out[#out + 1] = e.desc
    if D[g].sig ~= g then
      out[#out + 1] = ""
      out[#out + 1] = "`" .. D[g].sig .. "`"
    end
    if #names > 0 then
      out[#out + 1] = ""
      out[#out + 1] = "| " .. (g:match("^xsa") and "function" or "method") .. " | |"
      out[#out + 1] = "|---|---|"
      for _, n in ipairs(names) do
        out[#out + 1] = string.format("| `%s` | %s |", cell(D[n].sig or n), cell(D[n].desc or ""))
      end
    end
  end
  return table.concat(out, "\n") .. "\n"
end

----------------------------------------------------------------------------
-- completion

local KEYWORDS = {"and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto",
  "if", "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while"}

-- Keys of a table without invoking anything (raw next).
local function raw_keys(t, out)
  for k in next, t do if type(k) == "string" then out[k] = true end end
end

-- The value of a dotted path from the globals, with rawget only; nil when a
-- step is missing or would need a metamethod.
local function resolve(path)
  local v = _G
  for part in path:gmatch("[^.]+") do
    if type(v) == "table" then
      v = rawget(v, part)
    elseif type(v) == "userdata" then
      local meths = methods_of(debug.getmetatable(v))
      v = meths and rawget(meths, part)
    else
      return nil
    end
    if v == nil then return nil end
  end
  return v
end

-- Candidates completing `word` (what the REPL's Tab sees: an identifier
-- path such as "xsa.gpt.lo", "t:ma" or "pri").
function M.complete(word)
  local cands = {}
  local base, sep, partial = word:match("^([%a_][%w_%.]*)([%.:])([%w_]*)$")
  local keys = {}
  if not base then
    partial = word:match("^([%a_][%w_]*)$") or (word == "" and "" or nil)
    if not partial then return {} end
    raw_keys(_G, keys)
    for _, k in ipairs(KEYWORDS) do keys[k] = true end
    base, sep = "", ""
  else
    if base:find("%.%.") or base:sub(-1) == "." then return {} end
    local v = resolve(base)
    if v == nil then
      -- a module of xsa not loaded yet: offer the names the help knows
      local ok, D = pcall(db)
      if ok then
        for name in pairs(D) do
          local rest = name:sub(#base + 2)
          if sep == "." and name:sub(1, #base + 1) == base .. "." and not rest:find("[.:]") then keys[rest] = true end
        end
      end
    elseif sep == "." then
      if type(v) == "table" then raw_keys(v, keys) end
      if rawequal(v, rawget(_G, "xsa")) then for _, m in ipairs(M.MODULES) do keys[m] = true end end
    else -- ":" methods: own function fields, then the __index chain / methods table
      if type(v) == "table" then
        for k, f in next, v do if type(k) == "string" and type(f) == "function" then keys[k] = true end end
      end
      local mt, depth = debug.getmetatable(v), 0
      while type(mt) == "table" and depth < 5 do
        local meths = methods_of(mt)
        if not meths then break end
        for k, f in next, meths do if type(k) == "string" and type(f) == "function" then keys[k] = true end end
        mt, depth = debug.getmetatable(meths), depth + 1
        if rawequal(rawget(mt or {}, "__index"), meths) then break end
      end
    end
  end
  for k in pairs(keys) do
    if k:sub(1, #partial) == partial and (partial:sub(1, 1) == "_" or k:sub(1, 1) ~= "_") and k:match("^[%a_][%w_]*$") then
      cands[#cands + 1] = base .. sep .. k
    end
  end
  table.sort(cands)
  return cands
end

return setmetatable(M, {__call = function(_, x) return M.help(x) end})
