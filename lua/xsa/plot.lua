-- xsa.plot: figures drawn by gnuplot.
--
-- A figure is a grid of panels; each panel holds series (lines, points,
-- bands, bars, vectors, text labels). fig:save("plots/name.png") writes
--   plots/name.dat   the data, one gnuplot "index" block per series
--   plots/name.gp    a self-contained gnuplot script reading name.dat
-- and then runs a gnuplot process on the script, so every figure can be
-- re-rendered or restyled by hand:
--   cd plots && gnuplot name.gp                  # PNG (pngcairo)
--   cd plots && gnuplot -e 'fmt="svg"' name.gp   # SVG
--   gnuplot -e 'fmt="dumb"' name.gp              # text, in the terminal
-- Without gnuplot the .dat and .gp files are still written and save()
-- returns nil plus a message saying how to render them. gnuplot errors are
-- raised with gnuplot's own message; its warnings are returned.
--
--   local plot = xsa.plot
--   local fig = plot.figure{cols = 2, width = 1200, height = 450, title = "loss"}
--   local p = fig:panel{title = "train", xlabel = "step", ylabel = "loss"}
--   p:line(steps, sa_loss, {label = "SA", color = plot.colors.sa})
--   p:band(steps, sa_loss, xsa_loss, {color = "#888888", alpha = 0.2, label = "gap"})
--   fig:save("plots/loss.png")        -- or {format = "svg"}
--   fig:show()                        -- REPL: gnuplot's text terminal, window-sized
--
-- Text prints as written: every title, label, legend entry, tic label and
-- footer is escaped for gnuplot's enhanced-text mode (seq_len prints
-- "seq_len", not "seq" and a subscript l). Markup is asked for, per text:
-- plot.markup("mean a_{ii}") is gnuplot enhanced text (a_{ii} a subscript,
-- x^2 a superscript), with plot.escape(s) to put a literal s inside it.
--
-- Text that reaches gnuplot (the rule; tests/test_plot.lua checks it for
-- every byte): every title, label, legend entry, tic label, font, colour,
-- file name and folder goes into the script only through M.gp_string (a
-- double-quoted literal in which \, ", the backquote and every control byte
-- are escapes, so gnuplot neither runs a command nor ends the string early)
-- or, in comments, through gp_comment (one line); in a tic label, which
-- gnuplot reads as a format, % is doubled first. Labels of data points live
-- in gnuplot arrays in the script, never as strings in the .dat file (whose
-- quoted fields have no escapes). Style options that gnuplot reads as words
-- (key position, align, dash, numbers) must match a fixed pattern or are
-- refused. A NUL byte cannot be written in a script and is refused.
-- Panel:command(s) is the one way to pass raw gnuplot: s is the caller's own
-- command, written as given. The shell sees only words from
-- xsa.sys.shell_quote. Options tables are checked by xsa.options.
-- Non-goals: interactive windows, 3-D plots, image data.
local sys = require "xsa.sys"
local finite = require("xsa.numbers").finite
local options = require "xsa.options"

local M = {}

M.colors = {
  sa = "#E74C3C", xsa = "#2471A3",
  metric1 = "#E74C3C", metric2 = "#E67E22", metric3 = "#7D3C98",
  untrained = "#999999",
}

local shq = sys.shell_quote

-- The script's name as a shell word for the hints that say how to render:
-- as is when it is plain, else quoted (and "./" first: never an option).
local function script_word(name)
  local f = name .. ".gp"
  if f:match("^[%w_][%w_.%-]*$") then return f end
  return shq("./" .. f)
end

-- s (a string or number) as a gnuplot double-quoted string literal: gnuplot
-- reads back exactly the bytes of s. Backslash escapes are gnuplot's own:
-- \\ and \" for themselves, \0ooo for the backquote (gnuplot runs `...`
-- inside double quotes, even after a backslash) and for every control byte
-- (a newline would end the command): four digits with a leading 0, the form
-- gnuplot reads whole, so a digit after it is never taken in. Raises for a
-- NUL byte (gnuplot's strings end there) and for other types.
function M.gp_string(s)
  local ts = type(s)
  if ts == "number" then s = tostring(s)
  elseif ts ~= "string" then error("plot: text for gnuplot must be a string (got " .. ts .. ")", 3) end
  if s:find("\0", 1, true) then error("plot: text for gnuplot contains a NUL byte, which gnuplot cannot read", 3) end
  return '"' .. s:gsub('[\\"`%c]', function(c)
    if c == "\\" or c == '"' then return "\\" .. c end
    return string.format("\\0%03o", c:byte())
  end) .. '"'
end
local gq = M.gp_string

-- s on one line of a script comment: control bytes (a newline would start a
-- command) become '?'.
local function gp_comment(s)
  return (tostring(s):gsub("%c", "?"))
end

-- A word gnuplot reads as a style keyword (key position, align): letters,
-- digits, spaces, commas, dots, minus; anything else is refused.
local function gp_word(fn, what, v)
  if type(v) ~= "string" or not v:match("^[%w ,.%-]*$") then
    error(string.format("plot.%s: %s must be gnuplot words (letters, digits, spaces), got %s", fn, what,
      type(v) == "string" and string.format("%q", v) or type(v)), 3)
  end
  return v
end

-- A finite number option (nil allowed), else an error naming it.
local function opt_num(fn, what, v)
  if v ~= nil and not finite(v) then
    error(string.format("plot.%s: %s must be a finite number, got %s", fn, what, tostring(v)), 3)
  end
  return v
end

-- A positive integer option (nil allowed).
local function opt_int(fn, what, v)
  if v ~= nil and not (math.tointeger(v) and v >= 1) then
    error(string.format("plot.%s: %s must be a positive integer, got %s", fn, what, tostring(v)), 3)
  end
  return v and math.tointeger(v)
end

-- A number as a label: string.format(fmt, x), without the sign of a value
-- that rounds to zero ("-0.000" reads as a negative value that is not there);
-- the rule of xsa.numbers.text.
M.number_text = require("xsa.numbers").text

-- s with every character that enhanced text reads as markup (_ ^ { } @ &
-- ~ and the backslash, which escapes and starts octal codes) escaped, so it
-- prints as written; for literal pieces of plot.markup text.
function M.escape(s)
  return (tostring(s):gsub("([\\_%^{}@&~])", "\\%1"))
end

-- Markup: text the caller wrote as gnuplot enhanced text (plot.markup).
local Markup = {}
Markup.__index = Markup
Markup.__tostring = function(m) return m.text end
-- markup .. "plain" (or the other way) stays markup, the plain part literal
Markup.__concat = function(a, b)
  local function part(v) return getmetatable(v) == Markup and v.text or M.escape(v) end
  return setmetatable({text = part(a) .. part(b)}, Markup)
end

-- plot.markup(s): s is gnuplot enhanced text, written as given (a_{ii},
-- x^2, {/:Bold b}); plain strings elsewhere print literally.
function M.markup(s)
  if type(s) ~= "string" and type(s) ~= "number" then
    error("plot.markup: expects a string (got " .. type(s) .. ")", 2)
  end
  return setmetatable({text = tostring(s)}, Markup)
end

-- Whether v is plot.markup text.
function M.is_markup(v) return getmetatable(v) == Markup end

-- The enhanced text of a text value: markup as written, a string or number
-- escaped; anything else is an error.
local function enhanced(v)
  if getmetatable(v) == Markup then return v.text end
  local t = type(v)
  if t == "number" then return tostring(v) end
  if t ~= "string" then error("plot: text must be a string, a number or plot.markup(s) (got " .. t .. ")", 4) end
  return M.escape(v)
end

-- A text value as a gnuplot string literal that prints it (see the header).
local function gtext(v) return gq(enhanced(v)) end

-- font ",N" at n points times the figure's scale s (fontscale)
local function font(n, s) return string.format('font ",%.4g"', n * s) end

local function num(v)
  if not finite(v) then return "NaN" end
  if math.type(v) == "integer" then return tostring(v) end
  return string.format("%.9g", v)
end

local function dirname(path)
  return path:match("^(.*)/[^/]*$") or "."
end

local function basename(path)
  return path:match("([^/]+)$") or path
end

----------------------------------------------------------------------------
-- panels and series

local Panel = {}
Panel.__index = Panel
-- a REPL line like p:line(...) prints its result: say what it is, not an address
Panel.__tostring = function(p) return string.format("xsa.plot panel (%d series)", #p.series) end

local function add_series(panel, s)
  panel.series[#panel.series + 1] = s
  return panel
end

-- the data range of a panel (for bar panels, whose y range is computed here)
local function extend(panel, ys)
  for _, y in ipairs(ys) do
    if finite(y) then
      panel.ymin = math.min(panel.ymin or y, y)
      panel.ymax = math.max(panel.ymax or y, y)
    end
  end
end

local function check_xy(fn, xs, ys)
  if type(xs) ~= "table" or type(ys) ~= "table" then
    error(string.format("plot.%s: expected two lists of numbers", fn), 3)
  end
  if #xs ~= #ys then
    error(string.format("plot.%s: %d x values but %d y values", fn, #xs, #ys), 3)
  end
end

local function style(o, default_color)
  local parts = {}
  parts[#parts + 1] = "lc rgb " .. gq(o.color or default_color or "#333333")
  parts[#parts + 1] = "lw " .. num(o.width or 2)
  if o.dash then
    if o.dash ~= true and not math.tointeger(o.dash) then
      error("plot: dash must be true or a gnuplot dash type number, got " .. tostring(o.dash), 4)
    end
    parts[#parts + 1] = "dt " .. (o.dash == true and "2" or tostring(math.tointeger(o.dash)))
  end
  return table.concat(parts, " ")
end

-- The options of each series kind (xsa.options.check).
local SERIES_OPTIONS = {
  line = {"label", "color", "width", "dash", "points", "pointsize"},
  points = {"label", "color", "pointsize", "pointtype"},
  band = {"color", "alpha", "label"},
  errorbars = {"color", "width", "pointsize", "pointtype", "label"},
  bars = {"color", "barwidth", "alpha", "label", "values", "value_color", "fontsize"},
  labels = {"color", "fontsize", "offset"},
  vector = {"color", "width", "dash", "label", "head"},
  text = {"color", "align", "fontsize", "graph"},
}
local function series_opts(kind, o)
  o = options.check("panel:" .. kind, o, SERIES_OPTIONS[kind], 4)
  for _, k in ipairs{"width", "pointsize", "alpha", "barwidth", "fontsize"} do opt_num(kind, k, o[k]) end
  if o.pointtype ~= nil then opt_int(kind, "pointtype", o.pointtype) end
  return o
end

local function title_of(o)
  return o.label and ("title " .. gtext(o.label)) or "notitle"
end

-- p:line(xs, ys, {label=, color=, width=, dash=, points=true, pointsize=})
function Panel:line(xs, ys, o)
  check_xy("line", xs, ys)
  o = series_opts("line", o)
  local rows = {}
  extend(self, ys)
  for i = 1, #xs do rows[i] = num(xs[i]) .. " " .. num(ys[i]) end
  local with = o.points and ("linespoints pt 7 ps " .. num(o.pointsize or 1)) or "lines"
  return add_series(self, {rows = rows, clause = "using 1:2 with " .. with .. " " .. style(o) .. " " .. title_of(o)})
end

-- p:points(xs, ys, {label=, color=, pointsize=, pointtype=})
function Panel:points(xs, ys, o)
  check_xy("points", xs, ys)
  o = series_opts("points", o)
  local rows = {}
  extend(self, ys)
  for i = 1, #xs do rows[i] = num(xs[i]) .. " " .. num(ys[i]) end
  return add_series(self, {rows = rows, clause = string.format("using 1:2 with points pt %d ps %s lc rgb %s %s",
    math.tointeger(o.pointtype) or 7, num(o.pointsize or 1.2), gq(o.color or "#333333"), title_of(o))})
end

-- p:band(xs, lo, hi, {color=, alpha=0.25, label=}): the area between two curves
function Panel:band(xs, lo, hi, o)
  check_xy("band", xs, lo)
  check_xy("band", xs, hi)
  o = series_opts("band", o)
  local rows = {}
  for i = 1, #xs do rows[i] = num(xs[i]) .. " " .. num(lo[i]) .. " " .. num(hi[i]) end
  return add_series(self, {rows = rows, clause = string.format(
    "using 1:2:3 with filledcurves lc rgb %s fs transparent solid %s noborder %s",
    gq(o.color or "#888888"), num(o.alpha or 0.25), title_of(o))})
end

-- p:errorbars(xs, ys, lo, hi, {color=, width=1.5, pointsize=0.9, pointtype=7,
-- label=}): a marker at (x, y) with a vertical bar from lo to hi (e.g. a mean
-- and its 95% interval); a non-finite lo/hi draws the marker alone.
function Panel:errorbars(xs, ys, lo, hi, o)
  check_xy("errorbars", xs, ys)
  check_xy("errorbars", xs, lo)
  check_xy("errorbars", xs, hi)
  o = series_opts("errorbars", o)
  local rows = {}
  extend(self, ys)
  extend(self, lo)
  extend(self, hi)
  for i = 1, #xs do
    local l, h = lo[i], hi[i]
    if not (finite(l) and finite(h)) then l, h = ys[i], ys[i] end
    rows[i] = num(xs[i]) .. " " .. num(ys[i]) .. " " .. num(l) .. " " .. num(h)
  end
  return add_series(self, {rows = rows, clause = string.format(
    "using 1:2:3:4 with yerrorbars pt %d ps %s lw %s lc rgb %s %s", math.tointeger(o.pointtype) or 7, num(o.pointsize or 0.9),
    num(o.width or 1.5), gq(o.color or "#333333"), title_of(o))})
end

-- p:bars(xs, ys, {color=, width=0.35, label=, values=true|"%.3f"}): boxes
-- centred on xs; values= writes each value above (or below) its bar.
function Panel:bars(xs, ys, o)
  check_xy("bars", xs, ys)
  o = series_opts("bars", o)
  local w = o.barwidth or 0.35
  local rows = {}
  extend(self, ys)
  for i = 1, #xs do rows[i] = num(xs[i]) .. " " .. num(ys[i]) .. " " .. num(w) end
  self.has_bars = true
  add_series(self, {rows = rows, clause = string.format(
    "using 1:2:3 with boxes lc rgb %s fs solid %s border lc rgb %s %s",
    gq(o.color or "#333333"), num(o.alpha or 0.85), gq(o.color or "#333333"), title_of(o))})
  if o.values then
    local f = type(o.values) == "string" and o.values or "%.3f"
    local texts = {}
    for i = 1, #ys do texts[i] = (ys[i] == ys[i]) and M.number_text(f, ys[i]) or "n/a" end
    self:labels(xs, ys, texts, {color = o.value_color or "#222222", fontsize = o.fontsize})
  end
  return self
end

-- p:labels(xs, ys, texts, {color=, fontsize=, offset=}): text at data points;
-- by default above non-negative values and below negative ones.
function Panel:labels(xs, ys, texts, o)
  check_xy("labels", xs, ys)
  check_xy("labels", xs, texts)
  o = series_opts("labels", o)
  local fnt = font(o.fontsize or 9, self.fs)
  local function block(sign)
    local rows, strs = {}, {}
    for i = 1, #xs do
      local y = ys[i]
      if (y ~= y and sign > 0) or (y == y and ((sign > 0 and y >= 0) or (sign < 0 and y < 0))) then
        local yy = (y == y) and y or 0
        -- gnuplot reads backslash escapes once more in a label's string
        -- from a using column: each backslash is doubled for that pass
        strs[#strs + 1] = gq((enhanced(texts[i]):gsub("\\", "\\\\")))
        rows[#rows + 1] = num(xs[i]) .. " " .. num(yy) .. " " .. #strs
      end
    end
    if #rows > 0 then
      local off = o.offset or {0, sign * 0.8}
      -- the texts in a script array (see the header), column 3 their index
      local rest = string.format("with labels center offset %s,%s %s textcolor rgb %s notitle",
        num(off[1]), num(off[2]), fnt, gq(o.color or "#222222"))
      add_series(self, {rows = rows, texts = strs, clause = function(arr)
        return "using 1:2:(" .. arr .. "[int($3)]) " .. rest
      end})
    end
  end
  block(1)
  block(-1)
  return self
end

-- p:vector(x, y, dx, dy, {color=, width=, dash=, label=, head=true}): an arrow
-- as a plotted series (so it can have a legend entry).
function Panel:vector(x, y, dx, dy, o)
  o = series_opts("vector", o)
  local head = (o.head == false) and "nohead" or "head filled size screen 0.015,20"
  return add_series(self, {rows = {num(x) .. " " .. num(y) .. " " .. num(dx) .. " " .. num(dy)},
    clause = "using 1:2:3:4 with vectors " .. head .. " " .. style(o) .. " " .. title_of(o)})
end

-- p:text(x, y, s, {color=, align="left"|"center"|"right", fontsize=}): a label
-- at graph coordinates x,y (first axes; use {graph=true} for 0..1 coordinates).
function Panel:text(x, y, s, o)
  o = series_opts("text", o)
  local coords = o.graph and "graph " or "first "
  local align = o.align or "left"
  if align ~= "left" and align ~= "center" and align ~= "right" then
    error("plot.text: align must be \"left\", \"center\" or \"right\", got " .. tostring(align), 2)
  end
  self.commands[#self.commands + 1] = string.format("set label %s at %s%s,%s %s %s textcolor rgb %s front",
    gtext(s), coords, num(x), num(y), align, font(o.fontsize or 10, self.fs), gq(o.color or "#222222"))
  return self
end

-- Any gnuplot command for this panel (applied before its plot command),
-- written as given: raw gnuplot, the caller's own (see the header).
function Panel:command(s)
  if type(s) ~= "string" or s:find("[%z\n\r]") then
    error("plot.command: expects one line of gnuplot (no newline or NUL)", 2)
  end
  self.commands[#self.commands + 1] = s
  return self
end

----------------------------------------------------------------------------
-- figures

local Figure = {}
Figure.__index = Figure
Figure.__tostring = function(f)
  return string.format("xsa.plot figure%s (%d panel%s)", f.title and (" \"" .. tostring(f.title) .. "\"") or "",
    #f.panels, #f.panels == 1 and "" or "s")
end

-- The width (pixels) at which a figure's text has its nominal size (11 pt
-- ticks, 12 pt panel titles). A wider figure scales its text and lines up
-- by width / PAGE_WIDTH: figures are shrunk to the width of the page that
-- shows them (the report's column is about 1,100 px), and a 1,900 px figure
-- drawn at nominal size would show its text at half the body text's size.
M.PAGE_WIDTH = 960

local FIGURE_OPTIONS = {"rows", "cols", "width", "height", "title", "font", "footer", "fontscale"}

-- plot.figure{rows=1, cols=1, width=, height=, title=, font=, footer=, fontscale=}
function M.figure(o)
  o = options.check("plot.figure", o, FIGURE_OPTIONS, 3)
  for _, k in ipairs{"rows", "cols", "width", "height"} do opt_int("figure", k, o[k]) end
  opt_num("figure", "fontscale", o.fontscale)
  if o.fontscale ~= nil and not (o.fontscale >= 0.25 and o.fontscale <= 8) then
    error("plot.figure: fontscale must be between 0.25 and 8, got " .. tostring(o.fontscale), 2)
  end
  if o.title ~= nil then gtext(o.title) end
  if o.font ~= nil then gq(o.font) end
  local width = o.width or (520 * (o.cols or 1) + 80)
  local fig = setmetatable({
    rows = o.rows or 1, cols = o.cols or 1, width = width, height = o.height or (440 * (o.rows or 1) + 60),
    title = o.title, panels = {}, font = o.font or "DejaVu Sans",
    fontscale = o.fontscale or math.max(1, width / M.PAGE_WIDTH),
  }, Figure)
  if o.footer ~= nil then fig:set_footer(o.footer) end
  return fig
end

-- fig:set_footer(text): one small line under the panels, at the right (what
-- the numbers were measured with, say); nil removes it. Returns fig.
function Figure:set_footer(text)
  if text ~= nil then gtext(text) end
  self.footer = text
  return self
end

-- fig:panel{title=, xlabel=, ylabel=, xrange={a,b}, yrange={a,b},
--   xtics={ {"label", x}, ... } or a step, key=true|false (any position word
--   is accepted; the key is always drawn above the panel, outside its frame,
--   where it covers no data), grid=true, equal=true (same unit on both axes),
--   zero=true (draw y = 0), headroom=share (no yrange: the y range ends that
--   share of the data's span above the data; bars 0.14 unless given, 0.22
--   with value labels, which then stay clear of the frame)}
local PANEL_OPTIONS = {"title", "xlabel", "ylabel", "xrange", "yrange", "xtics", "key", "grid", "equal", "zero",
  "logy", "headroom"}

function Figure:panel(o)
  o = options.check("fig:panel", o, PANEL_OPTIONS, 3)
  for _, k in ipairs{"title", "xlabel", "ylabel"} do if o[k] ~= nil then gtext(o[k]) end end
  if o.key ~= nil and o.key ~= false and o.key ~= true then gp_word("panel", "key", o.key) end
  opt_num("panel", "headroom", o.headroom)
  if o.xtics ~= nil and type(o.xtics) ~= "table" then opt_num("panel", "xtics", o.xtics) end
  for _, pair in ipairs(type(o.xtics) == "table" and o.xtics or {}) do
    if type(pair) ~= "table" or not (type(pair[1]) == "string" or type(pair[1]) == "number" or M.is_markup(pair[1]))
      or not finite(pair[2]) then
      error("plot.panel: xtics must be a step or a list of {label, x}", 2)
    end
  end
  if #self.panels >= self.rows * self.cols then
    error(string.format("plot.panel: the figure has room for %d panels", self.rows * self.cols), 2)
  end
  -- room: the width its title and x label may take, in pixels
  local p = setmetatable({opts = o, series = {}, commands = {}, fs = self.fontscale, room = 0.92 * self.width / self.cols},
    Panel)
  self.panels[#self.panels + 1] = p
  return p
end

local function range(r)
  if not r then return "[*:*]" end
  return "[" .. (r[1] and num(r[1]) or "*") .. ":" .. (r[2] and num(r[2]) or "*") .. "]"
end

-- The terminal lines of a script: fmt/out variables with defaults, so the
-- same script renders PNG, SVG, GIF or text.
local function header(S, name, dir, fig, gif_opts)
  local width, height, cols, rows = fig.width, fig.height, fig.cols, fig.rows
  local cdir, cname = gp_comment(sys.shell_quote(dir)), gp_comment(sys.shell_quote("./" .. name .. ".gp"))
  S("# %s.gp: written by xsa.plot; re-render with", gp_comment(name))
  S("#   cd %s && gnuplot %s                 (PNG)", cdir, cname)
  S("#   cd %s && gnuplot -e 'fmt=\"svg\"' %s  (SVG; fmt=\"dumb\" draws in the terminal)", cdir, cname)
  S('if (!exists("fmt")) fmt = %s', gq(gif_opts and "gif" or "png"))
  -- by hand, from any directory, the figure lands next to its script
  S('if (!exists("out")) out = %s . "." . fmt', gq(dir .. "/" .. name))
  -- text and lines grow with the width (M.PAGE_WIDTH): every font size is
  -- written scaled (the terminals' own fontscale leaves the SVG terminal
  -- laying out for the unscaled size), the lines by the terminal. A point
  -- is a pixel in SVG but 4/3 of one in PNG and GIF (96 dpi): those two
  -- scale their text by 3/4, so every format draws the same figure.
  local f = gq(string.format("%s,%.4g", fig.font, 11 * fig.fontscale))
  local sc = "linewidth " .. num(fig.fontscale)
  local px = "fontscale 0.75 " .. sc
  -- text: the size show() passes (the terminal's), else one that fits most
  S('cols = exists("cols") ? cols : %d', math.min(200, 60 * cols + 20))
  S('lines = exists("lines") ? lines : %d', 30 * rows)
  S('if (fmt eq "png") {')
  S('  set terminal pngcairo size %d,%d enhanced font %s %s background rgb "white"', width, height, f, px)
  S('} else { if (fmt eq "svg") {')
  S('  set terminal svg size %d,%d enhanced font %s %s background rgb "white"', width, height, f, sc)
  S('} else { if (fmt eq "gif") {')
  S('  set terminal gif %s size %d,%d enhanced font %s %s background rgb "white"', gif_opts or "", width, height, f, px)
  S('} else {')
  S('  set terminal dumb size cols,lines enhanced')
  S('}}}')
  S('if (fmt ne "dumb") set output out')
  -- the data is found from any working directory while the folder stays put
  S("set loadpath %s", gq(dir))
  S("set datafile missing \"NaN\"")
  S("set encoding utf8")
end

local function ulen(s) return utf8.len(s) or #s end

-- Text v set in lines that fit `width` pixels at `pt` points times the
-- scale s: a string longer than that is broken at spaces (DejaVu Sans
-- averages about 0.58 em a character), so no title runs off its figure or
-- over its neighbour. Text with line breaks of its own, and markup with
-- braces (a space inside {...} is no place to break), stay as written.
local function fit(v, width, pt, s)
  if getmetatable(v) == Markup and not v.text:find("[{}]") then
    return setmetatable({text = fit(v.text, width, pt, s)}, Markup)
  end
  if type(v) ~= "string" or v:find("\n", 1, true) then return v end
  local max = math.max(12, math.floor(width / (pt * s * 0.58)))
  if ulen(v) <= max then return v end
  local lines, line = {}, ""
  for word in v:gmatch("%S+") do
    if line ~= "" and ulen(line) + 1 + ulen(word) > max then
      lines[#lines + 1], line = line, word
    else
      line = line == "" and word or (line .. " " .. word)
    end
  end
  lines[#lines + 1] = line
  return table.concat(lines, "\n")
end

-- The axes of panel p: titles, ranges, tics.
local function panel_axes(S, p)
  local o = p.opts
  S("set title %s %s", gtext(fit(o.title or "", p.room, 12, p.fs)), font(12, p.fs))
  S("set xlabel %s", gtext(fit(o.xlabel or "", p.room, 11, p.fs)))
  S("set ylabel %s", gtext(o.ylabel or ""))
  S("set xrange %s", range(o.xrange))
  if not o.yrange and p.ymin and (p.has_bars or o.headroom) then
    -- bars start at zero: keep it in view, with room for the value labels;
    -- o.headroom (any panel): room above the data, a share of the span
    local lo, hi = p.ymin, p.ymax
    if p.has_bars then lo, hi = math.min(0, lo), math.max(0, hi) end
    local span = (hi - lo > 0) and (hi - lo) or 1
    -- bars with value labels: room for a label above the tallest, clear of the frame
    local labelled = false
    for _, s in ipairs(p.series) do if s.texts then labelled = true end end
    local top = hi + span * (o.headroom or (labelled and 0.22 or 0.14))
    local bottom = lo < 0 and (lo - span * 0.12) or lo
    S("set yrange [%s:%s]", num(bottom), num(top))
  else
    S("set yrange %s", range(o.yrange))
  end
  if type(o.xtics) == "table" then
    local t = {}
    -- a tic label is a format for its value to gnuplot: % stands for itself as %%
    for i, pair in ipairs(o.xtics) do
      t[i] = gq((enhanced(pair[1]):gsub("%%", "%%%%"))) .. " " .. num(pair[2])
    end
    S("set xtics (%s)", table.concat(t, ", "))
  elseif type(o.xtics) == "number" then
    S("set xtics %s", num(o.xtics))
  else
    S("set xtics autofreq")
  end
  S("set ytics autofreq")
  if o.logy then S("set logscale y") end
end

-- The look of panel p: grid, key, offsets, the zero line, its own commands.
local function panel_style(S, p)
  local o = p.opts
  -- no grid in the text terminal, where it is only clutter
  if o.grid == false then S("unset grid") else S('if (fmt ne "dumb") { set grid lc rgb "#dddddd" lw 1 } else { unset grid }') end
  if o.key == false then
    S("unset key")
  else
    -- above the panel, in its own margin: inside the frame a key covers data, or touches the
    -- frame; every entry shows its series' line (dash included) and marker (samplen 3)
    S("set key outside top center horizontal Left reverse width 1 samplen 3 spacing 1.1 %s", font(10, p.fs))
  end
  -- room above and below bars for their value labels
  local has_labels = false
  for _, s in ipairs(p.series) do if s.texts then has_labels = true end end
  if has_labels and not o.yrange and not p.has_bars then S("set offsets 0, 0, graph 0.12, graph 0.06") else S("set offsets 0, 0, 0, 0") end
  if o.zero then S('set arrow from graph 0, first 0 to graph 1, first 0 nohead lc rgb "#888888" dt 3 back') end
  for _, c in ipairs(p.commands) do S("%s", c) end
end

-- The plot command of panel pi (its series as data blocks from `block`);
-- returns the next free block.
local function panel_plot(S, p, pi, data, datafile, block)
  if #p.series == 0 then
    -- an empty panel still takes its place in the layout
    S("set xrange [0:1]; set yrange [0:1]")
    S('plot NaN notitle')
    return block
  end
  local clauses = {}
  for _, s in ipairs(p.series) do
    data[#data + 1] = string.format("# block %d (panel %d)", block, pi)
    for _, r in ipairs(s.rows) do data[#data + 1] = r end
    data[#data + 1] = ""
    data[#data + 1] = ""
    local clause = s.clause
    if s.texts then
      local arr = "xsa_text_" .. block
      S("array %s[%d] = [%s]", arr, #s.texts, table.concat(s.texts, ", "))
      clause = clause(arr)
    end
    clauses[#clauses + 1] = string.format("%s index %d %s", gq(datafile), block, clause)
    block = block + 1
  end
  S("plot %s", table.concat(clauses, ", \\\n     "))
  return block
end

-- The strips of the canvas the title (top) and footer (bottom) take, as
-- gnuplot expressions of the screen's fraction: from their font sizes in
-- pixels, or in lines of the text terminal.
local function strips(S, fig, title)
  local sc, h = fig.fontscale, fig.height
  local tl = title and select(2, enhanced(title):gsub("\n", "")) + 1 or 0
  S("xsa_top = (fmt eq \"dumb\") ? %d.0 / lines : %s", tl > 0 and tl + 1 or 0, num(tl > 0 and (tl * 14 * 1.45 + 8) * sc / h or 0))
  S("xsa_bottom = (fmt eq \"dumb\") ? %d.0 / lines : %s", fig.footer and 1 or 0, num(fig.footer and (9 * 1.6 + 4) * sc / h or 0))
end

-- Appends the multiplot of this figure to the script (S) and data lists,
-- numbering data blocks from `block`; returns the next free block. Panels
-- fill a grid between the title and the footer.
function Figure:body(S, data, datafile, block)
  local title = self.title and fit(self.title, 0.96 * self.width, 14, self.fontscale)
  strips(S, self, title)
  S("set multiplot%s", title and (" title " .. gtext(title) .. " " .. font(14, self.fontscale)) or "")
  S("xsa_h = (1 - xsa_top - xsa_bottom) / %d.0", self.rows)
  for pi, p in ipairs(self.panels) do
    local row, col = (pi - 1) // self.cols, (pi - 1) % self.cols
    S("# panel %d", pi)
    S("unset label; unset arrow; unset object; unset logscale; set margins -1, -1, -1, -1")
    S("set origin %s, xsa_bottom + %d * xsa_h", num(col / self.cols), self.rows - 1 - row)
    S("set size %s %s, xsa_h", p.opts.equal and "ratio -1" or "noratio", num(1 / self.cols))
    if pi == 1 and self.footer then
      S('set label 9999 %s at screen 0.995, screen xsa_bottom * 0.45 right %s textcolor rgb "#555555" front',
        gtext(self.footer), font(9, self.fontscale))
    end
    panel_axes(S, p)
    panel_style(S, p)
    block = panel_plot(S, p, pi, data, datafile, block)
  end
  S("unset multiplot")
  return block
end

local function collector()
  local script = {}
  local function S(fmt, ...)
    script[#script + 1] = select("#", ...) > 0 and string.format(fmt, ...) or fmt
  end
  return S, script
end

-- The gnuplot script text and the data text of the figure whose output
-- basename (no extension) is `name` and whose data file sits in `dir`.
function Figure:render(name, dir)
  local S, script = collector()
  local data = {}
  header(S, name, dir, self)
  self:body(S, data, name .. ".dat", 0)
  return table.concat(script, "\n") .. "\n", table.concat(data, "\n") .. "\n"
end

----------------------------------------------------------------------------
-- running gnuplot

-- Files go through the engine's atomic write and whole-file read.
local function put(path, s) require("xsa.core").write_file_atomic(path, s) end
local function read_all(path) return require("xsa.core").read_file(path) or "" end

-- The gnuplot program: $XSA_GNUPLOT (unless empty) or "gnuplot"; nil when not
-- installed.
function M.gnuplot()
  local gp = sys.env("XSA_GNUPLOT") or "gnuplot"
  local ok = sys.execute("command -v " .. shq(gp) .. " >/dev/null 2>&1") -- a Ctrl-C meanwhile is not lost
  if not ok then return nil end
  return gp
end

-- Runs gnuplot on dir/script with the variables `vars` (a table name -> string),
-- in dir. Returns stdout text (dumb terminal), or nil, message. Raises on a
-- gnuplot error (message includes gnuplot's stderr).
local function run(dir, script, vars, inherit_stdout)
  local gp = M.gnuplot()
  if not gp then return nil, "gnuplot not found" end
  local sets = {}
  for k, v in pairs(vars or {}) do sets[#sets + 1] = k .. "=" .. (math.type(v) == "integer" and tostring(v) or gq(v)) end
  table.sort(sets)
  local errf = os.tmpname()
  -- "./" keeps a script named like an option (-e.gp) a file name
  local cmd = string.format("cd -- %s && %s %s %s 2>%s", shq(dir), shq(gp),
    #sets > 0 and ("-e " .. shq(table.concat(sets, "; "))) or "", shq("./" .. script), shq(errf))
  local out = ""
  local ok
  if inherit_stdout then
    ok = os.execute(cmd)
  else
    local p = io.popen(cmd, "r")
    out = p:read("a")
    ok = p:close()
  end
  local err = read_all(errf)
  os.remove(errf)
  if not ok then
    error(string.format("plot: gnuplot failed on %s/%s:\n%s", dir, script, err ~= "" and err or "(no message)"), 0)
  end
  return out, err
end

-- gnuplot's SVG terminal writes an escaped & of enhanced text (a legend
-- "R&D") as a bare &, which is not XML: a browser refuses the file. Every &
-- that does not start an entity (&lt; &#38; ...) becomes &amp;. (A text
-- that spells an entity itself, "&lt;", shows as the character.)
function M.svg_fix_amp(svg)
  return (svg:gsub("&([^&]*)", function(rest)
    if rest:match("^#%d+;") or rest:match("^#x%x+;") or rest:match("^%a%w*;") then return nil end
    return "&amp;" .. rest
  end))
end

local function fix_svg_file(path)
  local svg = read_all(path)
  local fixed = M.svg_fix_amp(svg)
  if fixed ~= svg then put(path, fixed) end
end

-- Writes name.dat and name.gp next to `path` and renders it.
-- opts: {format = "png"|"svg"|"gif"} (default from the extension of path, else png;
-- quiet = true: not shown in a notebook even with plot.show_saved).
-- Returns path, warnings (gnuplot's non-fatal messages, or nil); nil, message
-- when gnuplot is not installed (the files are still written).
function Figure:save(path, opts)
  opts = options.check("fig:save", opts, {"format", "quiet"}, 3)
  if type(path) ~= "string" then error("plot.save: expected a path string", 2) end
  if #self.panels == 0 then error("plot.save: the figure has no panels", 2) end
  local ext = path:match("%.(%w+)$")
  local fmt = opts.format or ((ext == "svg" or ext == "png" or ext == "gif") and ext) or "png"
  if fmt ~= "png" and fmt ~= "svg" and fmt ~= "gif" and fmt ~= "dumb" then
    error("plot.save: format must be \"png\", \"svg\", \"gif\" or \"dumb\", got " .. tostring(fmt), 2)
  end
  local dir = dirname(sys.abspath(path))
  local name = basename(path):gsub("%.%w+$", "")
  sys.mkdir(dir)
  local script, data = self:render(name, dir)
  put(dir .. "/" .. name .. ".dat", data)
  put(dir .. "/" .. name .. ".gp", script)
  local outname = name .. "." .. fmt
  local res, err = run(dir, name .. ".gp", {fmt = fmt, out = outname})
  if not res then
    return nil, string.format("%s: data and script written to %s/%s.{dat,gp}; install gnuplot and render with: cd %s && gnuplot%s %s",
      err, dir, name, shq(dir), fmt ~= "png" and (" -e 'fmt=\"" .. fmt .. "\"'") or "", script_word(name))
  end
  local out = dir .. "/" .. outname
  local f = io.open(out, "rb")
  if not f then error("plot: gnuplot wrote no " .. out .. "\n" .. (err or ""), 0) end
  f:close()
  if fmt == "svg" then fix_svg_file(out) end
  -- a notebook that asked for it shows every saved figure too (scripts/study.ipynb)
  if M.inline and M.show_saved and not opts.quiet then M.inline(self) end
  if err ~= "" then return out, err end
  return out -- one value: at the REPL, the path alone
end

-- An animated GIF with one figure per frame (all the size of the first):
-- plot.animate({fig1, fig2, ...}, "plots/sweep.gif", {delay = 10 (1/100 s), loop = 0}).
-- Writes sweep.dat and sweep.gp like save(); returns path or nil, message.
function M.animate(figs, path, opts)
  opts = options.check("plot.animate", opts, {"delay", "loop"}, 3)
  if type(figs) ~= "table" or type(path) ~= "string" then error("plot.animate: expected a list of figures and a path", 2) end
  if opts.delay ~= nil and not (math.tointeger(opts.delay) and opts.delay >= 0) then
    error("plot.animate: delay must be an integer >= 0 (1/100 s)", 2)
  end
  if opts.loop ~= nil and not (math.tointeger(opts.loop) and opts.loop >= 0) then
    error("plot.animate: loop must be an integer >= 0 (0: forever)", 2)
  end
  if #figs == 0 then error("plot.animate: no frames", 2) end
  local dir = dirname(sys.abspath(path))
  local name = basename(path):gsub("%.%w+$", "")
  sys.mkdir(dir)
  local S, script = collector()
  local data = {}
  local f1 = figs[1]
  -- not gnuplot's "optimize": it gives every frame the first frame's palette,
  -- so a colour the first frame lacks is drawn black
  header(S, name, dir, f1,
    string.format("animate delay %d loop %d", math.tointeger(opts.delay) or 10, math.tointeger(opts.loop) or 0))
  local block = 0
  for i, fig in ipairs(figs) do
    S("# frame %d", i)
    block = fig:body(S, data, name .. ".dat", block)
  end
  put(dir .. "/" .. name .. ".dat", table.concat(data, "\n") .. "\n")
  put(dir .. "/" .. name .. ".gp", table.concat(script, "\n") .. "\n")
  local res, err = run(dir, name .. ".gp", {fmt = "gif", out = name .. ".gif"})
  if not res then
    return nil, string.format("%s: data and script written to %s/%s.{dat,gp}; render with: cd %s && gnuplot %s",
      err, dir, name, shq(dir), script_word(name))
  end
  return dir .. "/" .. name .. ".gif", (err ~= "" and err or nil)
end

-- Renders an existing script (dir/name.gp) to a format, into `out`
-- (absolute or relative to dir). Used by the report for inline SVG.
function M.render_script(gp_path, fmt, out)
  local dir = dirname(sys.abspath(gp_path))
  local res, err = run(dir, basename(gp_path), {fmt = fmt, out = out})
  if not res then return nil, err end
  if fmt == "svg" then fix_svg_file(out:sub(1, 1) == "/" and out or (dir .. "/" .. out)) end
  return true, (err ~= "" and err or nil)
end

-- The terminal's size in characters: $COLUMNS and $LINES when set (shells
-- set them, and so can you), else what the terminal says (stty size on
-- /dev/tty: the TIOCGWINSZ ioctl, which works over ssh), else 80x24.
function M.terminal_size()
  local cols, lines = tonumber(sys.env("COLUMNS") or ""), tonumber(sys.env("LINES") or "")
  if not (cols and lines) then
    local p = io.popen("stty size 2>/dev/null </dev/tty")
    local out = p and p:read("a") or ""
    if p then p:close() end
    local r, c = out:match("^%s*(%d+)%s+(%d+)")
    lines = lines or tonumber(r)
    cols = cols or tonumber(c)
  end
  cols = (cols and cols >= 20) and math.floor(cols) or 80
  lines = (lines and lines >= 5) and math.floor(lines) or 24
  return cols, lines
end

-- plot.show(fig [, opts]) or plot.show(ys) or plot.show(xs, ys [, opts]): draws
-- in the terminal with gnuplot's text terminal, the width of the window and one
-- line less than its height (opts.width / opts.height override). Files go to a
-- temporary folder that is removed afterwards.
function M.show(fig, ys, o)
  if getmetatable(fig) ~= Figure then
    local xs = fig
    if type(ys) ~= "table" then
      o, ys = ys, xs
      xs = {}
      for i = 1, #ys do xs[i] = i end
    end
    o = options.check("plot.show", o, {"title", "xlabel", "ylabel", "label", "color", "width", "height"}, 3)
    fig = M.figure{title = o.title}
    fig:panel{xlabel = o.xlabel, ylabel = o.ylabel, key = o.label and "top right" or false}
      :line(xs, ys, {label = o.label, color = o.color})
  else
    o = options.check("fig:show", ys, {"width", "height"}, 3)
  end
  if #fig.panels == 0 then error("plot.show: the figure has no panels", 2) end
  if M.inline then M.inline(fig, o); return end -- a notebook shows the image (xsa.notebook)
  local cols, lines = M.terminal_size()
  cols, lines = math.tointeger(o.width) or cols, math.tointeger(o.height) or math.max(10, lines - 1)
  local tmp = os.tmpname()
  os.remove(tmp)
  sys.mkdir(tmp)
  local script, data = fig:render("show", tmp)
  put(tmp .. "/show.dat", data)
  put(tmp .. "/show.gp", script)
  io.stdout:flush()
  local ok, out, err = pcall(run, tmp, "show.gp", {fmt = "dumb", cols = cols, lines = lines}, true)
  os.remove(tmp .. "/show.dat")
  os.remove(tmp .. "/show.gp")
  os.remove(tmp)
  if not ok then error(out, 0) end
  if not out then return nil, err end
end

-- fig:show([{width=, height=}]): plot.show of this figure.
function Figure:show(o) return M.show(self, o) end

-- The options of each function (tests generate their cases from this).
M.OPTIONS = {figure = FIGURE_OPTIONS, panel = PANEL_OPTIONS,
  save = {"format"}, animate = {"delay", "loop"}}
for k, v in pairs(SERIES_OPTIONS) do M.OPTIONS[k] = v end

M.Figure, M.Panel = Figure, Panel
return M
