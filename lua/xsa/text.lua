-- xsa.text: text for a terminal: display width, wrapping, padding and
-- cutting that work on characters, not bytes.
--
--   local text = xsa.text                  -- or require "xsa.text"
--   text.width("λ = 中")                   --> 6 (中 is two columns wide)
--   text.wrap("a long line ...", 20)       --> {"a long line", ...}
--   text.pad("λ", 4) .. "|"                --> "λ   |"
--   text.cut("中文字", 5)                  --> "中文" (never half a character)
--
-- The rule (for every module that aligns or wraps text: samples, help):
-- text is cut only between characters, a character being one valid UTF-8
-- sequence or one invalid byte (generated text can end in half a
-- character), and a character of width 0 (a combining accent) stays with
-- the one before it; widths are display columns (core/text.h: wide and
-- fullwidth characters 2, combining marks and controls 0, invalid bytes 1),
-- so padded columns line up. A character wider than the whole width gets a
-- line of its own.
-- Non-goals: hyphenation, tabs (a tab is one space wide here), right-to-left text.
local M = {}

local function C() return require("xsa.core")._text end

local function check_width(fn, w)
  local n = math.tointeger(w)
  if not n or n < 1 then
    error(string.format("text.%s: width must be an integer >= 1 (got %s)", fn, tostring(w)), 3)
  end
  return n
end

local function check_string(fn, s)
  if type(s) ~= "string" then error(string.format("text.%s: expected a string (got %s)", fn, type(s)), 3) end
end

-- The display width of s in columns.
function M.width(s)
  check_string("width", s)
  return C().width(s)
end

-- The units a line may break between: each character with the zero-width
-- characters after it, and their widths.
local function units(s)
  local cs, ws = C().chars(s)
  local us, uw = {}, {}
  for i = 1, #cs do
    if ws[i] == 0 and #us > 0 then
      us[#us] = us[#us] .. cs[i]
    else
      us[#us + 1], uw[#us + 1] = cs[i], ws[i]
    end
  end
  return us, uw
end

-- s cut to at most w columns (a whole prefix of characters).
function M.cut(s, w)
  check_string("cut", s)
  w = check_width("cut", w)
  local us, uw = units(s)
  local out, used = {}, 0
  for i = 1, #us do
    if used + uw[i] > w then break end
    out[#out + 1], used = us[i], used + uw[i]
  end
  return table.concat(out)
end

-- s followed by spaces up to w columns (s unchanged when it is wider).
function M.pad(s, w)
  check_string("pad", s)
  if type(w) ~= "number" then check_width("pad", w) end
  return s .. string.rep(" ", math.max(0, w - C().width(s)))
end

-- A word wider than w as pieces of at most w columns (one unit per piece
-- when a unit alone is wider).
local function split_word(word, w)
  local us, uw = units(word)
  local pieces, cur, used = {}, {}, 0
  for i = 1, #us do
    if used > 0 and used + uw[i] > w then
      pieces[#pieces + 1] = table.concat(cur)
      cur, used = {}, 0
    end
    cur[#cur + 1], used = us[i], used + uw[i]
  end
  if #cur > 0 then pieces[#pieces + 1] = table.concat(cur) end
  return pieces
end

-- Lines of at most w columns, breaking at spaces (a longer word is cut
-- between characters); newlines in the text start new lines; trailing empty
-- lines are dropped.
function M.wrap(s, w)
  check_string("wrap", s)
  w = check_width("wrap", w)
  local width = C().width
  local lines = {}
  for para in (s .. "\n"):gmatch("(.-)\n") do
    local line, lw = "", 0
    for word in para:gmatch("%S+") do
      local ww = width(word)
      local pieces = ww > w and split_word(word, w) or {word}
      for _, piece in ipairs(pieces) do
        local pw = width(piece)
        if line == "" then
          line, lw = piece, pw
        elseif lw + 1 + pw <= w then
          line, lw = line .. " " .. piece, lw + 1 + pw
        else
          lines[#lines + 1] = line
          line, lw = piece, pw
        end
      end
    end
    lines[#lines + 1] = line
  end
  while #lines > 1 and lines[#lines] == "" do lines[#lines] = nil end
  return lines
end

return M
