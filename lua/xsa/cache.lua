-- xsa.cache: results cached on disk, keyed by their full configuration.
--
-- An entry is DIR/NAME-HASH.json holding {key = <canonical config text>,
-- config = <config>, result = <result>, saved_at = <time>}, where HASH is the
-- 64-bit FNV-1a hash of the canonical text (cache.key: the configuration as
-- xsa.json writes it, keys sorted, numbers exact, 300 and 300.0 alike). Any
-- change in the configuration (a flag, the data size, the seed) gives another
-- key and so a new entry, never a stale hit; the stored key is compared in
-- full on load, so a hash collision is a miss. Writes are atomic
-- (xsa.write_file_atomic). An entry that does not parse, has another key or
-- fails the caller's check is reported as corrupt and recomputed.
--
--   local res, status = xsa.cache.fetch("cache", "mine", config, function()
--     return train_something(config)
--   end, {no_cache = opts.no_cache})
--   -- status: "hit", "miss", "refresh" (--no-cache) or "corrupt"
--
-- Non-goals: eviction, locking between concurrent writers (last one wins,
-- atomically), caching tensors (checkpoints are separate files whose names
-- carry the same HASH: cache.path(dir, name, config, ".safetensors")).
local sys = require "xsa.sys"

local M = {}

local core = require "xsa.core" -- the C functions and libraries

-- A copy of v in which every float with an integer value (|v| < 2^53) is that
-- integer, so that 300 and 300.0 (a flag given as "1" or defaulting to 1.0)
-- are the same key. Metatables are kept (xsa.json.array marks lists).
local function integral(v)
  if type(v) == "table" then
    local out = {}
    for k, x in pairs(v) do out[k] = integral(x) end
    return setmetatable(out, getmetatable(v))
  end
  if math.type(v) == "float" and v == math.floor(v) and math.abs(v) < 2^53 then
    return math.tointeger(v)
  end
  return v
end

-- The canonical text of a configuration: xsa.json.encode of it (keys sorted
-- bytewise, floats in the shortest form that reads back to the same double,
-- see lua/l_safetensors.c) after integral(). A configuration JSON cannot hold
-- (NaN, an infinity, a function, a mixed or sparse table) raises.
function M.key(config)
  local encode = core.json.encode
  local ok, text = pcall(function() return encode(integral(config)) end)
  if not ok then
    local hint = tostring(text):find("of type function", 1, true) and "; an attention written in Lua is keyed by " ..
      "its name and code: xsa.attention.register(name, f), then arms = {\"sa\", name} (ex:group)" or ""
    error("cache.key: " .. tostring(text) .. hint, 2)
  end
  return text
end

-- 64-bit FNV-1a of a string, as 16 hex digits.
function M.hash(s)
  local h = 0xcbf29ce484222325
  for i = 1, #s do
    h = h ~ s:byte(i)
    h = h * 0x100000001b3
  end
  return string.format("%016x", h)
end

-- DIR/NAME-HASH<ext> (ext defaults to ".json").
function M.path(dir, name, config, ext)
  return string.format("%s/%s-%s%s", dir, name, M.hash(M.key(config)):sub(1, 12), ext or ".json")
end

local function read(path) return (core.read_file(path)) end

-- The cached result for config, or nil and why: "missing" or "corrupt: ...".
-- check(result) -> true | false, reason: the caller's validation.
function M.load(dir, name, config, check)
  local path = M.path(dir, name, config)
  local s = read(path)
  if not s then return nil, "missing" end
  local ok, entry = pcall(core.json.decode, s)
  if not ok or type(entry) ~= "table" then
    return nil, "corrupt: not valid JSON (" .. tostring(entry):gsub("\n", " ") .. ")"
  end
  if entry.key ~= M.key(config) then return nil, "corrupt: stored key does not match the configuration" end
  if type(entry.result) ~= "table" then return nil, "corrupt: no result" end
  if check then
    local good, why = check(entry.result)
    if not good then return nil, "corrupt: " .. (why or "failed validation") end
  end
  return entry.result
end

-- Writes the entry atomically; returns its path.
function M.store(dir, name, config, result)
  sys.mkdir(dir)
  local path = M.path(dir, name, config)
  local text = core.json.encode({key = M.key(config), config = config, result = result,
    saved_at = os.date("!%Y-%m-%dT%H:%M:%SZ")}, {indent = true})
  core.write_file_atomic(path, text)
  return path
end

-- The result for config: from the cache, or computed by compute(config)
-- and stored. opts: no_cache (recompute and overwrite), check (validation),
-- label (for messages), quiet. Messages go to stderr: "cache hit: ...",
-- "cache miss: ...", "cache: corrupt entry ... recomputing".
-- Returns result, status ("hit" | "miss" | "refresh" | "corrupt"), path.
function M.fetch(dir, name, config, compute, opts)
  opts = opts or {}
  local path = M.path(dir, name, config)
  local label = opts.label or name
  local function say(fmt, ...)
    if not opts.quiet then io.stderr:write(string.format(fmt, ...), "\n") end
  end
  local status
  if opts.no_cache then
    status = "refresh"
    say("cache: --no-cache, recomputing %s (%s)", label, path)
  else
    local res, why = M.load(dir, name, config, opts.check)
    if res then
      say("cache hit: %s (%s)", label, path)
      return res, "hit", path
    end
    if why == "missing" then
      status = "miss"
      say("cache miss: %s, computing (%s)", label, path)
    else
      status = "corrupt"
      say("warning: cache entry %s is %s; recomputing %s", path, why, label)
    end
  end
  local result = compute(config)
  M.store(dir, name, config, result)
  return result, status, path
end

return M
