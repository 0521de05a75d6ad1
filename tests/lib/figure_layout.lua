-- figure_layout.lua: where a figure's labels land, read from the files
-- xsa.plot writes (NAME.gp, NAME.dat) and from gnuplot itself, not from
-- xsa.plot's own layout code: each panel's plot command is followed by a
-- print of gnuplot's GPVAL_TERM_* (the frame, in SVG pixels), GPVAL_X/Y_*
-- (the ranges) and the character size, and every value label (`with
-- labels`) and text label (`set label ... at graph`) gets a box from its
-- text, font and offset. Checks, per panel:
--   * every label box lies inside the frame, 2 px clear of it;
--   * no label box meets a data point (a marker's radius around it), a line
--     segment, an error bar or a bar, nor another label;
--   * every key is outside the frame (set key outside) or unset.
--   local L = require "figure_layout"
--   local problems, panels = L.check("/tmp/figs/part6_lambda_sweep.gp")  -- {} when clean
-- Text boxes: 0.62 em a character (DejaVu Sans' digits are 0.64 em, most
-- letters narrower), 1.2 em a line; offsets in gnuplot's character height
-- (GPVAL_TERM_VCHAR). Markers: a quarter of the font per unit of point size.
local M = {}

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- The blocks of a .dat file: blocks[i] (index i - 1) = list of rows of numbers.
local function read_blocks(path)
  local text = assert(xsa.read_file(path))
  local blocks = {}
  for chunk in (text .. "\n\n\n"):gmatch("(.-)\n\n\n") do
    local rows = {}
    for line in chunk:gmatch("[^\n]+") do
      if not line:match("^#") then
        local row = {}
        for v in line:gmatch("%S+") do row[#row + 1] = tonumber(v) or (v == "NaN" and 0 / 0) or v end
        rows[#rows + 1] = row
      end
    end
    if chunk:match("%S") then blocks[#blocks + 1] = rows end
  end
  return blocks
end

-- Characters a label shows: UTF-8 code points, enhanced-text markup (_{ } ^ @) not counted.
local function shown_len(s)
  s = s:gsub("\\\\", "\\"):gsub("[_^]{", ""):gsub("[{}]", ""):gsub("[_^@]", "")
  local n = 0
  for _ in s:gmatch("[^\128-\191]") do n = n + 1 end
  return n
end

-- The panels of a script: per panel its plot clauses, labels, key lines and arrays.
local function parse_gp(text)
  local panels, cur, arrays = {}, nil, {}
  local lines = {}
  for l in (text .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = l end
  local i = 1
  while i <= #lines do
    local l = lines[i]
    if l:match("^# panel %d+") then
      cur = {clauses = {}, labels = {}, keys = {}}
      panels[#panels + 1] = cur
    elseif cur and l:match("^array ") then
      local name, body = l:match("^array ([%w_]+)%[%d+%] = %[(.*)%]$")
      local items = {}
      for q in body:gmatch('"(.-[^\\])"') do items[#items + 1] = q end
      for q in body:gmatch('""') do items[#items + 1] = "" end
      arrays[name] = items
    elseif cur and l:match("^set key") or (cur and l:match("^unset key")) then
      cur.keys[#cur.keys + 1] = l
    elseif cur and l:match('^set label %d* ?".-" at graph') and not l:match("^set label 9999") then
      -- p:text: set label [N] "text" at graph X, [graph] Y [left|right|center] font ",F"
      local txt, gx, after = l:match('^set label %d* ?"(.-)" at graph ([%d.eE+-]+),%s*(.*)$')
      local gy, rest = after:gsub("^graph ", ""):match("^([%d.eE+-]+)(.*)$")
      txt = txt:gsub("\\0?012", "\n"):gsub("\\n", "\n")
      cur.labels[#cur.labels + 1] = {graph = true, text = txt, x = tonumber(gx), y = tonumber(gy),
        align = rest:match("^%s*(%a+)") or "left", font = tonumber(rest:match('font ",([%d.]+)"'))}
    elseif cur and l:match("^plot ") then
      local cmd = l
      while cmd:match("\\%s*$") do
        i = i + 1
        cmd = cmd:gsub("\\%s*$", "") .. "\n" .. lines[i]
      end
      for clause in (cmd:gsub("^plot ", "") .. ",\n"):gmatch("%s*(.-),%s*\n") do cur.clauses[#cur.clauses + 1] = clause end
      cur.plot_line = i
    end
    i = i + 1
  end
  return panels, arrays, lines
end

-- gnuplot's frame and ranges per panel (SVG pixels, y up).
local function geometry(gp_path, lines, panels)
  local out = {}
  for i, l in ipairs(lines) do
    out[#out + 1] = l
    for k, p in ipairs(panels) do
      if p.plot_line == i then
        out[#out + 1] = string.format('print sprintf("XSA_PANEL %d %%.6g %%.6g %%.6g %%.6g %%.9g %%.9g %%.9g %%.9g %%.6g %%.6g", ' ..
          "GPVAL_TERM_XMIN, GPVAL_TERM_XMAX, GPVAL_TERM_YMIN, GPVAL_TERM_YMAX, GPVAL_X_MIN, GPVAL_X_MAX, GPVAL_Y_MIN, " ..
          "GPVAL_Y_MAX, GPVAL_TERM_HCHAR * 1.0 / GPVAL_TERM_SCALE, GPVAL_TERM_VCHAR * 1.0 / GPVAL_TERM_SCALE)", k)
      end
    end
  end
  local dir = gp_path:match("^(.*)/[^/]*$") or "."
  local probe = os.tmpname()
  local f = assert(io.open(probe, "w"))
  f:write(table.concat(out, "\n"), "\n")
  f:close()
  local p = io.popen(string.format("cd %s && gnuplot -e 'fmt=\"svg\"; out=\"/dev/null\"' %s 2>&1", sh_quote(dir), sh_quote(probe)))
  local log = p:read("a")
  p:close()
  os.remove(probe)
  local geo = {}
  for k, a, b, c, d, e, f2, g, h, hc, vc in log:gmatch("XSA_PANEL (%d+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+)") do
    geo[tonumber(k)] = {x0 = tonumber(a), x1 = tonumber(b), y0 = tonumber(c), y1 = tonumber(d), xmin = tonumber(e),
      xmax = tonumber(f2), ymin = tonumber(g), ymax = tonumber(h), hchar = tonumber(hc), vchar = tonumber(vc)}
  end
  return geo, log
end

local function term_font(text) return tonumber(text:match('set terminal svg size %d+,%d+ enhanced font "[^,"]*,([%d.]+)"')) end

-- Boxes and marks of one panel in pixels.
local function panel_shapes(p, g, blocks, arrays, tf)
  local function px(x) return g.x0 + (x - g.xmin) / (g.xmax - g.xmin) * (g.x1 - g.x0) end
  local function py(y) return g.y0 + (y - g.ymin) / (g.ymax - g.ymin) * (g.y1 - g.y0) end
  local boxes, dots, segs, rects = {}, {}, {}, {}
  local function box_at(cx, cy, text, font, align)
    -- DejaVu Sans: 0.55-0.64 em a character (digits 0.64), lines 1.17 em apart
    local cw, h = 0.62 * (font or tf), 1.2 * (font or tf)
    local n, rows = 0, 0
    for line in (text .. "\n"):gmatch("(.-)\n") do n = math.max(n, shown_len(line)); rows = rows + 1 end
    local w = n * cw
    local x0 = align == "right" and cx - w or align == "center" and cx - w / 2 or cx
    -- gnuplot centres a label's lines on its point vertically
    return {x0 = x0, x1 = x0 + w, y0 = cy - h * rows / 2, y1 = cy + h * rows / 2, text = text}
  end
  for _, l in ipairs(p.labels) do
    boxes[#boxes + 1] = box_at(g.x0 + l.x * (g.x1 - g.x0), g.y0 + l.y * (g.y1 - g.y0), l.text, l.font, l.align)
  end
  for _, c in ipairs(p.clauses) do
    local idx = tonumber(c:match(" index (%d+) "))
    local rows = idx and blocks[idx + 1] or {}
    local ps = tonumber(c:match(" ps ([%d.]+)")) or 1
    local r = ps * 0.25 * tf -- a marker's radius (point size 1: about a quarter of the font)
    if c:match("with labels") then
      local arr = c:match("%(([%w_]+)%[int%(%$3%)%]%)")
      local ox, oy = c:match("offset ([%d.eE+-]+),([%d.eE+-]+)")
      local font = tonumber(c:match('font ",([%d.]+)"'))
      for _, row in ipairs(rows) do
        local text = arrays[arr] and arrays[arr][math.tointeger(row[3])] or "?"
        boxes[#boxes + 1] = box_at(px(row[1]) + (tonumber(ox) or 0) * 0.7 * tf, py(row[2]) + (tonumber(oy) or 0) * g.vchar,
          text, font, "center")
      end
    elseif c:match("with boxes") then
      for _, row in ipairs(rows) do
        local w = row[3] or 0.8
        rects[#rects + 1] = {x0 = px(row[1] - w / 2), x1 = px(row[1] + w / 2), y0 = py(math.min(0, row[2])), y1 = py(math.max(0, row[2]))}
      end
    elseif c:match("with yerrorbars") then
      for _, row in ipairs(rows) do
        dots[#dots + 1] = {x = px(row[1]), y = py(row[2]), r = r}
        if row[3] == row[3] and row[4] == row[4] then segs[#segs + 1] = {px(row[1]), py(row[3]), px(row[1]), py(row[4])} end
      end
    elseif c:match("with points") or c:match("with linespoints") or c:match("with lines") then
      local prev
      for _, row in ipairs(rows) do
        local x, y = row[1], row[2]
        if x == x and y == y then
          if not c:match("with lines ") or c:match("linespoints") then dots[#dots + 1] = {x = px(x), y = py(y), r = r} end
          if prev and not c:match("with points") then segs[#segs + 1] = {prev[1], prev[2], px(x), py(y)} end
          prev = {px(x), py(y)}
        else
          prev = nil
        end
      end
    end
  end
  return boxes, dots, segs, rects
end

local function overlap(a, b) return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1 end

-- Whether segment (x1,y1)-(x2,y2) meets box b (Liang-Barsky clipping).
local function seg_hits(s, b)
  local x1, y1, x2, y2 = s[1], s[2], s[3], s[4]
  local dx, dy, t0, t1 = x2 - x1, y2 - y1, 0, 1
  for _, e in ipairs{{-dx, x1 - b.x0}, {dx, b.x1 - x1}, {-dy, y1 - b.y0}, {dy, b.y1 - y1}} do
    local pp, q = e[1], e[2]
    if pp == 0 then
      if q < 0 then return false end
    else
      local t = q / pp
      if pp < 0 then t0 = math.max(t0, t) else t1 = math.min(t1, t) end
      if t0 > t1 then return false end
    end
  end
  return true
end

-- The problems of the figure whose script is gp_path (its .dat beside it):
-- a list of sentences, and the panels' geometry.
function M.check(gp_path)
  local text = assert(xsa.read_file(gp_path))
  local panels, arrays, lines = parse_gp(text)
  local dat = text:match('plot "([^"]+%.dat)"')
  local dir = gp_path:match("^(.*)/[^/]*$") or "."
  local blocks = dat and read_blocks(dir .. "/" .. dat) or {}
  local geo, log = geometry(gp_path, lines, panels)
  local tf = term_font(text) or 12
  local problems = {}
  local function say(k, fmt, ...) problems[#problems + 1] = string.format("panel %d: " .. fmt, k, ...) end
  for k, p in ipairs(panels) do
    local g = geo[k]
    if not g and #p.clauses > 0 then say(k, "gnuplot gave no geometry (%s)", log:sub(1, 300)) end
    for _, kl in ipairs(p.keys) do
      if kl:match("^set key") and not kl:match(" outside ") then say(k, "a key inside the frame: %s", kl) end
    end
    if g then
      local boxes, dots, segs, rects = panel_shapes(p, g, blocks, arrays, tf)
      for i, b in ipairs(boxes) do
        local name = string.format("label %q", b.text)
        if b.x0 < g.x0 + 2 or b.x1 > g.x1 - 2 or b.y0 < g.y0 + 2 or b.y1 > g.y1 - 2 then
          say(k, "%s reaches the frame (box %.0f..%.0f x %.0f..%.0f, frame %.0f..%.0f x %.0f..%.0f)", name, b.x0, b.x1, b.y0, b.y1,
            g.x0, g.x1, g.y0, g.y1)
        end
        for _, d in ipairs(dots) do
          if overlap(b, {x0 = d.x - d.r, x1 = d.x + d.r, y0 = d.y - d.r, y1 = d.y + d.r}) then
            say(k, "%s covers a data point at (%.0f, %.0f)", name, d.x, d.y)
            break
          end
        end
        for _, s in ipairs(segs) do
          if seg_hits(s, b) then say(k, "%s crosses a line or error bar", name); break end
        end
        for _, r in ipairs(rects) do
          if overlap(b, r) then say(k, "%s overlaps a bar", name); break end
        end
        for j = i + 1, #boxes do
          if overlap(b, boxes[j]) then say(k, "%s overlaps label %q", name, boxes[j].text) end
        end
      end
    end
  end
  return problems, geo
end

return M
