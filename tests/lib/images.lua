-- images.lua: what the figure tests read back from gnuplot's output files,
-- parsed here from the file formats themselves (not from xsa.plot):
--   images.gif_palettes(bytes)  -> per frame, the set of "#RRGGBB" colours
--                                  it can draw (its local colour table, else
--                                  the global one)
--   images.svg_texts(svg)       -> every <text> element as the string it
--                                  shows (tags dropped, XML entities read)
--   images.svg_font_sizes(svg)  -> every font-size="..." value, as numbers
local M = {}

local function u16(s, i) return s:byte(i) + 256 * s:byte(i + 1) end

-- n colours from position i: a set of "#RRGGBB" and the position after them
local function color_table(s, i, n)
  local set = {}
  for k = 0, n - 1 do
    local r, g, b = s:byte(i + 3 * k, i + 3 * k + 2)
    set[string.format("#%02X%02X%02X", r, g, b)] = true
  end
  return set, i + 3 * n
end

-- position after the data sub-blocks starting at i (size byte, data, ..., 0)
local function skip_blocks(s, i)
  while true do
    local n = s:byte(i)
    if not n then error("gif: truncated sub-blocks") end
    i = i + 1 + n
    if n == 0 then return i end
  end
end

function M.gif_palettes(s)
  assert(s:sub(1, 3) == "GIF", "not a GIF")
  local packed = s:byte(11)
  local global, i = nil, 14
  if packed & 0x80 ~= 0 then global, i = color_table(s, 14, 2 ^ ((packed & 7) + 1) // 1) end
  local frames = {}
  while i <= #s do
    local b = s:byte(i)
    if b == 0x3B then break end -- trailer
    if b == 0x21 then -- extension: label, sub-blocks
      i = skip_blocks(s, i + 2)
    elseif b == 0x2C then -- image: descriptor, local table, LZW size, data
      local p = s:byte(i + 9)
      local palette = global
      i = i + 10
      if p & 0x80 ~= 0 then palette, i = color_table(s, i, 2 ^ ((p & 7) + 1) // 1) end
      frames[#frames + 1] = palette or {}
      i = skip_blocks(s, i + 1)
    else
      error(string.format("gif: unexpected block 0x%02X at byte %d", b, i))
    end
  end
  return frames
end

local ENTITIES = {lt = "<", gt = ">", amp = "&", quot = '"', apos = "'"}

local function unentity(s)
  return (s:gsub("&(#?x?)(%w+);", function(kind, v)
    if kind == "" then return ENTITIES[v] end
    return utf8.char(tonumber(v, kind == "#x" and 16 or 10))
  end))
end

function M.svg_texts(svg)
  local out = {}
  for body in svg:gmatch("<text[^>]*>(.-)</text>") do out[#out + 1] = unentity(body:gsub("<[^>]*>", "")) end
  return out
end

function M.svg_font_sizes(svg)
  local out = {}
  for v in svg:gmatch('font%-size="([%d.]+)"') do out[#out + 1] = tonumber(v) end
  return out
end

return M
