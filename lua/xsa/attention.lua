-- xsa.attention: attention variants written in Lua under a name, so that
-- the experiment layer (caches, records, saved states: xsa.group keys a
-- run by its configuration) can key a run of one by its name and by the
-- identity of its code, as it keys a built-in variant by its name.
--
--   local function gated(a) return a.y * 0.5 + a.v * 0.5 end
--   xsa.attention.register("gated", gated)      --> the code's identity, "5c0e...9a1f"
--   local f, id = xsa.attention.get("gated")    -- f for xsa.gpt{attention = f}
--   -- an experiment's arms: {"sa", "gated"} (xsa.experiment: ex:group)
--
-- The identity of a function (M.code): FNV-1a 64 of its bytecode without
-- debug information (string.dump(f, true): comments and local names do
-- not count, its body does, and so do the lines it starts and ends at,
-- which Lua keeps in a stripped dump: moving it in its file is a miss) and
-- of its upvalues, each in
-- turn: a number, string, boolean or nil by value; a library value (a
-- module of Lua's or xsa's, or a field of one) by its name, as
-- "math.sqrt", since the engine's code is not in a built-in run's key
-- either; any other Lua function by its own identity (recursively); _ENV
-- is not part of it (the globals f reads are not). Any
-- other upvalue (a table of its own, a tensor, a C function of no module)
-- cannot be identified: register refuses f unless the caller names a
-- version ({version = "v2"}), which is then part of the key instead of
-- that upvalue's value. What changes the identity is a miss, never a stale
-- hit; what may change it without changing the function (another Lua
-- build compiling it differently, a library function renamed) is a miss
-- too.
-- Non-goals: saving the code (a checkpoint of such a model says
-- attention = "function": xsa.gpt.load(path, {attention = f})); keying
-- the globals f reads.
local cache = require "xsa.cache"
local options = require "xsa.options"

local M = {}

local core = require "xsa.core" -- the C functions and libraries

-- names: letters, digits and _ (they reach file names, records and
-- Markdown tables), of at most MAX_NAME bytes; versions: printable ASCII
M.NAME = "^[%a][%w_]*$"
M.MAX_NAME = 32
M.MAX_VERSION = 64
local MAX_DEPTH = 16 -- functions nested through upvalues

local registry = {} -- name -> {fn =, code =, version =}

-- The modules whose values count as the engine's (keyed by name, as the
-- engine's code is not in a built-in run's key): Lua's standard libraries
-- and xsa's own; a value of any other module (yours) is keyed by its code.
local STD = {string = true, table = true, math = true, utf8 = true, coroutine = true, io = true, os = true,
  debug = true, package = true, _G = true}
local function library(mod) return STD[mod] or mod == "xsa" or mod:match("^xsa%.") ~= nil end

-- The name of a library value (a module, or a field of one; of _G only C
-- functions: a global Lua function or table is the script's own), the
-- smallest in byte order so that it does not depend on the order of a
-- table's traversal; nil when it is none.
local function library_name(v)
  local best
  local own = type(v) ~= "function" or debug.getinfo(v, "S").what ~= "C"
  for mod, t in pairs(package.loaded) do
    if type(mod) == "string" and type(t) == "table" and library(mod) and not (mod == "_G" and own) then
      if t == v and (not best or mod < best) then best = mod end
      for k, x in next, t do
        if x == v and type(k) == "string" then
          local n = mod .. "." .. k
          if not best or n < best then best = n end
        end
      end
    end
  end
  return best
end

-- Appends the identity text of Lua function f to out; returns nil, or the
-- upvalue that cannot be identified (a path of names, "f.W").
local function identify(f, out, seen, depth, path)
  if seen[f] then out[#out + 1] = "ref:" .. seen[f] .. ";" return nil end
  if depth > MAX_DEPTH then return path .. " (functions nested deeper than " .. MAX_DEPTH .. ")" end
  seen.n = seen.n + 1
  seen[f] = seen.n
  local code = string.dump(f, true)
  out[#out + 1] = "fn:" .. #code .. ":" .. code
  local bad
  for i = 1, 255 do
    local name, v = debug.getupvalue(f, i)
    if not name then break end
    local t, at = type(v), path .. "." .. name
    if name == "_ENV" then out[#out + 1] = "env;"
    elseif t == "number" or t == "boolean" or t == "nil" then out[#out + 1] = string.format("%s:%q;", t, v)
    elseif t == "string" then out[#out + 1] = "string:" .. #v .. ":" .. v .. ";"
    else
      local lib = library_name(v)
      if lib then out[#out + 1] = "lib:" .. lib .. ";"
      elseif t == "function" and debug.getinfo(v, "S").what ~= "C" then
        bad = identify(v, out, seen, depth + 1, at) or bad
      else
        out[#out + 1] = "unidentified;"
        bad = bad or string.format("%s (a %s)", at, t == "function" and "C function of no module" or t)
      end
    end
  end
  return bad
end

local function check_function(what, f)
  if type(f) ~= "function" then
    error(string.format("%s: f must be a function written in Lua (got %s)", what, type(f)), 3)
  end
  if debug.getinfo(f, "S").what == "C" then
    error(what .. ": f must be a function written in Lua (got a C function: its code cannot be identified)", 3)
  end
end

-- The identity of Lua function f (16 hex digits; see the header), or nil
-- and the upvalue that cannot be identified.
function M.code(f)
  check_function("xsa.attention.code", f)
  local out = {}
  local bad = identify(f, out, {n = 0}, 1, "f")
  if bad then return nil, bad end
  return cache.hash(table.concat(out))
end

-- Whether name is one of the core's variants ("sa", "xsa", ...).
local function builtin(name)
  for _, n in ipairs(core.gpt.variants()) do if n == name then return true end end
  return false
end

local function check_name(what, name)
  if type(name) ~= "string" or #name > M.MAX_NAME or not name:match(M.NAME) then
    error(string.format("%s: a variant's name is a letter, then letters, digits or _, at most %d bytes (got %s)",
      what, M.MAX_NAME, type(name) == "string" and string.format("%q", name:sub(1, 40)) or type(name)), 3)
  end
  if builtin(name) or name == "function" then
    error(string.format("%s: %q is the name of a built-in variant (%s): choose another", what, name,
      table.concat(core.gpt.variants(), ", ")), 3)
  end
end

-- Registers f as the variant `name` (registering a name again replaces
-- it: a new identity, a new key). o.version: a string that stands for
-- what of f cannot be identified. Returns the identity of the code.
function M.register(name, f, o)
  o = options.check("xsa.attention.register", o, {"version"})
  check_name("xsa.attention.register", name)
  check_function("xsa.attention.register", f)
  local v = o.version
  if v ~= nil and (type(v) ~= "string" or v == "" or #v > M.MAX_VERSION or not v:match("^[ -~]+$")) then
    error(string.format("xsa.attention.register: version must be printable text of 1 to %d bytes (got %s)",
      M.MAX_VERSION, type(v) == "string" and string.format("%q", v:sub(1, 70)) or type(v)), 2)
  end
  local out = {}
  local bad = identify(f, out, {n = 0}, 1, "f")
  if bad and not v then
    error(string.format("xsa.attention.register: %q: its upvalue %s cannot be part of its identity, so editing " ..
      "it would not be a cache miss; capture numbers or strings instead, or name the version of what it holds: " ..
      "xsa.attention.register(%q, f, {version = \"...\"})", name, bad, name), 2)
  end
  registry[name] = {fn = f, code = cache.hash(table.concat(out)), version = v}
  return registry[name].code
end

-- The variant `name`: what xsa.gpt's attention takes (the name of a
-- built-in, a registered variant's function) and, for a registered one,
-- {name =, code =, version =}. An unknown name is an error naming them all.
function M.get(name)
  if type(name) == "string" and builtin(name) then return name, nil end
  local r = type(name) == "string" and registry[name]
  if not r then
    local names = {}
    for _, n in ipairs(core.gpt.variants()) do names[#names + 1] = n end
    for n in pairs(registry) do names[#names + 1] = n end
    table.sort(names)
    error(string.format("xsa.attention: no variant named %s (built-in or registered: %s; " ..
      "xsa.attention.register(name, f) adds one)", type(name) == "string" and string.format("%q", name:sub(1, 40))
      or type(name), table.concat(names, ", ")), 2)
  end
  return r.fn, {name = name, code = r.code, version = r.version}
end

-- The registered variant `name`'s identity ({name =, code =, version =}),
-- or nil: it is built in, or not registered.
function M.registered(name)
  local r = type(name) == "string" and registry[name]
  return r and {name = name, code = r.code, version = r.version} or nil
end

-- A model with base's weights and the attention of variant `name`
-- (lambda: a built-in variant's that takes one; a Lua variant takes none).
function M.clone(base, name, lambda)
  local att = M.get(name)
  if type(att) == "function" then return base:clone{attention = att} end
  return base:clone{attention = att, lambda = lambda}
end

return M
