-- xsa.numbers: whether numbers are usable, i.e. finite (not NaN, not an
-- infinity). The training loop stops on a loss that is not; the scripts'
-- cache checks reject a result holding one; plots and the report write
-- "NaN" or "n/a" in its place.
--
--   local numbers = require "xsa.numbers"
--   numbers.finite(0 / 0)                      -- false (also for non-numbers)
--   numbers.all_finite({a = {1, 1 / 0}})       -- false, "result.a.2 is inf"
--   numbers.text("%.4f", -1e-9)                -- "0.0000", never "-0.0000"
--   numbers.decimals(0.043, 1)                 -- 3: "0.021 (-0.022 to 0.064)", not "0.0 (-0.0 to 0.1)"
--   numbers.same({1, {2.0}}, {1, {2}})         -- false: 2.0 is a float, 2 an integer
-- Non-goals: tolerances, wording (see xsa.study.pct and compare_words).
local M = {}

-- x is a number and neither NaN nor an infinity.
function M.finite(x)
  return type(x) == "number" and x == x and x ~= math.huge and x ~= -math.huge
end

-- Whether a and b are the same data to the bit: numbers of one subtype
-- and the same bits (0.0 is not -0.0), strings and booleans equal, tables
-- with the same keys holding the same data (metatables not compared).
function M.same(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) == "number" then
    return math.type(a) == math.type(b) and (math.type(a) == "integer" and a == b or string.pack("d", a) == string.pack("d", b))
  end
  if type(a) ~= "table" then return a == b end
  for k, v in pairs(a) do if not M.same(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

-- Every number in t (a number or a nested table) is finite. Returns true, or
-- false and "PATH is VALUE" for the first one that is not, PATH starting
-- with `path` (default "result") and naming the keys down to it.
function M.all_finite(t, path)
  path = path or "result"
  if type(t) == "number" then
    if not M.finite(t) then return false, path .. " is " .. tostring(t) end
    return true
  end
  if type(t) ~= "table" then return true end
  for k, v in pairs(t) do
    local ok, why = M.all_finite(v, path .. "." .. tostring(k))
    if not ok then return false, why end
  end
  return true
end

-- string.format(fmt, x) without the sign of a value that rounds to zero:
-- "-0.0000" (or "+0.00%" from "%+.2f%%") reads as a value that is not
-- there, so a sign followed by nothing but zeros loses its sign. The rule of
-- every number in a table, a label or a sentence (plot.number_text is it).
function M.text(fmt, x)
  local t = string.format(fmt, x)
  local rest = t:match("^[%-+]0[%.0]*(.*)$") -- greedy: the zeros end where a digit or the rest starts
  if rest and not rest:match("^%d") then return t:sub(2) end
  return t
end

-- The decimals that show `scale` (the spread of the numbers printed
-- together: an interval's half-width, an sd) to two significant digits; at
-- least `min` (a unit's usual precision), at most 12; `min` when scale is 0
-- or not a finite number. Numbers printed with fewer digits than their
-- spread needs read as 0.0 (-0.0 to 0.1).
function M.decimals(scale, min)
  if not M.finite(scale) or scale == 0 then return min end
  local e = math.floor(math.log(math.abs(scale), 10) + 1e-9) -- 1e-9: 0.1 is -1, not a rounding below it
  return math.max(min, math.min(12, 1 - e))
end

return M
