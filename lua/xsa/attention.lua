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
-- A registered name is what xsa.gpt's attention takes for f (the binding
-- asks M._lookup), and a checkpoint of such a model records the name and
-- the identity, so xsa.gpt.load finds f again by its name, and refuses an
-- edited one (M._checkpoint_attention).
-- Non-goals: saving the code (a checkpoint of a model whose function is
-- not registered here needs it again: xsa.gpt.load(path, {attention = f}));
-- keying the globals f reads.
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

----------------------------------------------------------------------------
-- for the binding (lua/l_gpt.c, lua/l_attention.c): a registered name as
-- xsa.gpt's attention, and what a checkpoint records of a Lua attention
--
-- A checkpoint of a model whose attention is a Lua function f says
-- attention = "function" (core/gpt.h) and, beside it, which function:
--   attention.name     the name f is registered under (the smallest, if
--                      several), absent for an unnamed function
--   attention.version  the version it was registered with, if any
--   attention.code     its identity as registered (M.code for an unnamed
--                      one), or "unidentified" when it has none
-- A checkpoint from before these keys has none of them. The file is
-- untrusted: each recorded value is checked before it is used or shown.

-- The function registered as `name`, or nil and the registered names (as
-- a message lists them: "gated", "mine"; "" when there are none).
function M._lookup(name)
  local r = type(name) == "string" and registry[name]
  if r then return r.fn end
  local names = {}
  for n in pairs(registry) do names[#names + 1] = string.format("%q", n) end
  table.sort(names)
  return nil, table.concat(names, ", ")
end

local function identity_of(f) -- {name =, code =, version =} of what a checkpoint of f records
  local name
  for n, r in pairs(registry) do
    if rawequal(r.fn, f) and (not name or n < name) then name = n end
  end
  if name then return {name = name, code = registry[name].code, version = registry[name].version} end
  local lua = type(f) == "function" and debug.getinfo(f, "S").what ~= "C"
  return {code = lua and M.code(f) or "unidentified"}
end

-- The metadata a checkpoint of a model with Lua attention f records, as a
-- list of keys and values in turn (in this order: the file's bytes do not
-- depend on a table's traversal).
function M._checkpoint_meta(f)
  local id, out = identity_of(f), {}
  for _, k in ipairs{"name", "version", "code"} do
    if id[k] then out[#out + 1], out[#out + 2] = "attention." .. k, id[k] end
  end
  return out
end

-- A value from the file, safe to print: at most 40 bytes, quoted, every
-- byte that is not printable ASCII as \ddd.
local function shown(s)
  return '"' .. s:sub(1, 40):gsub('[^ -~]', function(c) return string.format("\\%d", c:byte()) end)
    :gsub('"', '\\"') .. '"' .. (#s > 40 and "..." or "")
end

-- rec (the checkpoint's attention.* values) checked: nil, or what is wrong.
local function malformed(rec)
  local name, code, version = rec.name, rec.code, rec.version
  if code == nil then
    return (name ~= nil or version ~= nil) and "attention.name or attention.version without attention.code" or nil
  end
  if code ~= "unidentified" and not code:match("^" .. ("%x"):rep(16) .. "$") then
    return "attention.code = " .. shown(code) .. " is not 16 hexadecimal digits or \"unidentified\""
  end
  if name ~= nil and (#name > M.MAX_NAME or not name:match(M.NAME) or builtin(name) or name == "function") then
    return "attention.name = " .. shown(name) .. " is not a Lua variant's name (a letter, then letters, digits or _, " ..
      "at most " .. M.MAX_NAME .. " bytes, not a built-in's)"
  end
  if name ~= nil and code == "unidentified" then return "attention.name with an unidentified attention.code" end
  if version ~= nil and (name == nil or version == "" or #version > M.MAX_VERSION or not version:match("^[ -~]+$")) then
    return "attention.version = " .. shown(version) .. " is not a registered variant's version (printable text of 1 to " ..
      M.MAX_VERSION .. " bytes, with attention.name)"
  end
end

-- How a message names a variant's identity (its values already checked).
local function code_of(id)
  local code = id.code == "unidentified" and "code that cannot be identified" or "code " .. id.code
  return code .. (id.version and ", version " .. shown(id.version) or "")
end
local function described(id)
  if id.name then return string.format("the Lua variant %q (%s)", id.name, code_of(id)) end
  return "an unnamed Lua function (" .. code_of(id) .. ")"
end

local LOAD_FIX = "give the function to the loader: xsa.gpt.load(path, {attention = f})"

-- The function to load the checkpoint at path with (rec: its attention.*
-- values; f: the caller's function or nil) and a warning when f's identity
-- is not the recorded one; an error for what is refused. nil (and no f):
-- the checkpoint records nothing (written before these keys).
function M._checkpoint_attention(path, rec, f)
  local bad = malformed(rec)
  if bad then error(string.format("%s: the checkpoint's record of its attention is malformed: %s", path, bad), 0) end
  if rec.code == nil then return f end
  if f ~= nil then
    local now = identity_of(f)
    if now.code == rec.code and now.version == rec.version then return f end
    return f, string.format("%s: the checkpoint was saved with %s; loaded with the function given, %s",
      path, described(rec), described(now))
  end
  if not rec.name then
    error(string.format('%s: the model\'s attention was a function (metadata attention = "function", %s), ' ..
      "which a checkpoint cannot hold: %s (or register it under a name before saving)", path, described(rec), LOAD_FIX), 0)
  end
  local r = registry[rec.name]
  if not r then
    local _, names = M._lookup(rec.name)
    error(string.format("%s: the model's attention is %s, which is not registered in this process (registered: %s): " ..
      "xsa.attention.register(%q, f) before loading, or %s", path, described(rec), names ~= "" and names or "none",
      rec.name, LOAD_FIX), 0)
  end
  if r.code ~= rec.code or r.version ~= rec.version then
    error(string.format("%s: the model's attention was %s, but the variant registered as %q now has %s: it changed " ..
      "since the checkpoint was saved; to load these weights with the present code anyway, give it to the loader: " ..
      "xsa.gpt.load(path, {attention = xsa.attention.get(%q)}) (it then warns)", path, described(rec), rec.name,
      code_of(r), rec.name), 0)
  end
  return r.fn
end

-- A model with base's weights and the attention of variant `name`
-- (lambda: a built-in variant's that takes one; a Lua variant takes none).
function M.clone(base, name, lambda)
  local att = M.get(name)
  if type(att) == "function" then return base:clone{attention = att} end
  return base:clone{attention = att, lambda = lambda}
end

return M
