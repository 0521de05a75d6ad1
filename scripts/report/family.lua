-- family.lua: the report's view of the registered family of parts 8 and 9
-- (scripts/verdicts.lua decides it; doc/preregistration.md states it): a
-- claim's rows for scripts/claims.lua and the sentences of a section, from a
-- part's summary (its `family` rows once every cell has N seeds, else why not).
local xsa = xsa or require "xsa"
xsa.sys.library_file()

local M = {}
local fmt = string.format
-- Per claim: its endpoint, its unit and, for a trend, what it doubles.
local WHAT = {gain = {"final val loss: the mean gain over the five cells", "points"},
  length = {"final val loss: the slope of the gain per doubling of seq_len", "points per doubling", "seq_len"},
  size = {"final val loss: the slope of the gain per doubling of the non-embedding parameters", "points per doubling",
    "the non-embedding parameters"}}

-- What the estimate m says, in words; when its interval holds 0 (not
-- decided) the words lean neither way.
local function finding(key, m, decided)
  local of = WHAT[key][3]
  if not of then
    if not decided then return fmt("XSA's gain in final val loss, the mean over the five cells, is %+.2f points", m) end
    return fmt("XSA's final val loss is %s than SA's by %.2f points, the mean gain over the five cells",
      m >= 0 and "lower" or "higher", math.abs(m))
  end
  if not decided then return fmt("the slope of the gain is %+.2f points per doubling of %s", m, of) end
  return fmt("the gain %s by %.2f points per doubling of %s", m >= 0 and "grows" or "shrinks", math.abs(m), of)
end

local function row_of(s, key)
  for _, r in ipairs(s and s.family or {}) do if r.key == key then return r end end
end

-- A claim of the family for a section's `claims` list.
function M.claim(key, text, short)
  return {key = key, text = text, short = short, rows = function(s, _, claim)
    local w, r = WHAT[key], row_of(s, key)
    if not r then
      -- the table's cell stays short (the full reason would hide the verdict
      -- column); the claim's sentence carries `pending`, the whole reason
      if not s then
        return {{claim = claim, endpoint = w[1], n = 0, unit = w[2], word = "no records yet", registered = true}}
      end
      local why = s.n and (s.incomplete or "") or "the pilot has not fixed N"
      local word = s.total and fmt("not yet: %d of %d groups", s.recorded, s.total) or "not yet"
      return {{claim = claim, endpoint = w[1], n = 0, unit = w[2], word = word, registered = true,
        pending = why}}
    end
    -- the plan's own words: "supported", "contradicted", "not decided"
    return {{claim = claim, endpoint = w[1], n = r.n, unit = w[2], mean = r.mean, lo = r.lo, hi = r.hi,
      registered = true, p = r.p, p_holm = r.p_holm, holm_of = #s.family, seeds_rule = s.seeds_rule,
      finding = finding(key, r.mean, r.verdict ~= "not decided"),
      word = r.verdict == "not decided" and fmt("not decided at %d (the registered N)", r.n) or r.verdict}}
  end}
end

-- The sentences of a section about claim `key`: the verdict, or how far the grid is.
function M.words(key)
  return function(s)
    local r = row_of(s, key)
    if not r then return {s.incomplete or "No verdict yet."} end
    return {fmt("%s: %+.3f %s (95%% t interval %+.3f to %+.3f, %d seeds); raw p %.3g, Holm-adjusted %.3g: %s.",
      WHAT[key][1], r.mean, WHAT[key][2], r.lo, r.hi, r.n, r.p, r.p_holm, r.verdict)}
  end
end

return M
