-- xsa.options: the one check of the options tables that xsa's Lua functions
-- take, and "did you mean" for any name a user can mistype.
--
--   local options = require "xsa.options"
--   opts = options.check("train.pair", opts, {"steps", "lr", ...})
--   -- train.pair: unknown option 'stepz' (did you mean 'steps'?)
--   options.suggest("reprot", {"train", ..., "report"})   --> "report"
--   options.unknown("run_all: --skip", "reprot", names)    -- the message text
--
-- The rule (every function of lua/xsa/ that takes an options table follows
-- it; the C bindings follow the same rule in xsa_lua_checkkeys, l_bind.c):
--   * opts is nil (no options) or a plain table; anything else is an error;
--   * every key is a string naming an option the function reads: an unknown
--     key is an error naming it, with the nearest known name when one is
--     close (Damerau-Levenshtein distance at most 1 + #name // 4, after
--     lower-casing and reading '-' as '_'), else the list of known names;
--   * the table is walked with next (raw): no __pairs, __index or other
--     metamethod of the user's table runs during the check;
--   * options that contradict each other (lambda with SA attention, say) are
--     refused by the function itself, naming both.
-- An option that is nil is absent, as everywhere in Lua.
-- Non-goals: type or range checks of the values (each function knows its
-- own), default values.
local M = {}

-- The optimal-string-alignment distance (Damerau-Levenshtein with adjacent
-- transpositions) between a and b, byte-wise.
function M.distance(a, b)
  local la, lb = #a, #b
  if la == 0 then return lb end
  if lb == 0 then return la end
  local prev2, prev, cur = {}, {}, {}
  for j = 0, lb do prev[j] = j end
  for i = 1, la do
    cur = {[0] = i}
    local ca = a:byte(i)
    for j = 1, lb do
      local cb = b:byte(j)
      local cost = ca == cb and 0 or 1
      local d = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
      if i > 1 and j > 1 and ca == b:byte(j - 1) and a:byte(i - 1) == cb then
        d = math.min(d, prev2[j - 2] + 1)
      end
      cur[j] = d
    end
    prev2, prev = prev, cur
  end
  return prev[lb]
end

local function norm(s) return (s:lower():gsub("-", "_")) end

-- The candidate nearest to word, or nil when none is close enough (see the
-- header). candidates: a list of strings. Ties go to the earlier candidate.
function M.suggest(word, candidates)
  if type(word) ~= "string" then return nil end
  local w = norm(word)
  local best, best_d
  for _, c in ipairs(candidates) do
    local d = M.distance(w, norm(c))
    if d <= 1 + #w // 4 and (best_d == nil or d < best_d) then best, best_d = c, d end
  end
  return best
end

local function show(k)
  if type(k) == "string" then return "'" .. k .. "'" end
  return "[" .. tostring(math.type(k) and k or type(k)) .. "]"
end

-- The message for an unknown name: "WHAT 'name' (did you mean 'x'?)" or
-- "WHAT 'name' (known: a, b, c)". `what` is e.g. "train.pair: unknown option".
function M.unknown(what, name, candidates)
  local sorted = {}
  for i, c in ipairs(candidates) do sorted[i] = c end
  table.sort(sorted)
  local near = M.suggest(name, candidates)
  local hint = near and ("did you mean '" .. near .. "'?") or ("known: " .. table.concat(sorted, ", "))
  return string.format("%s %s (%s)", what, show(name), hint)
end

-- Checks opts against `allowed` (a list of option names) for function fn and
-- returns opts, or {} when it is nil. Raises at `level` (default 3: the
-- caller of the function that calls check) otherwise.
function M.check(fn, opts, allowed, level)
  level = level or 3
  if opts == nil then return {} end
  if type(opts) ~= "table" then
    error(string.format("%s: options must be a table (got %s)", fn, type(opts)), level)
  end
  local set = {}
  for _, name in ipairs(allowed) do set[name] = true end
  local k = next(opts)
  while k ~= nil do
    if type(k) ~= "string" or not set[k] then
      error(M.unknown(fn .. ": unknown option", k, allowed), level)
    end
    k = next(opts, k)
  end
  return opts
end

return M
