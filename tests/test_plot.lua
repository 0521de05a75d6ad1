-- test_plot.lua: xsa.plot (data + script files, PNG/SVG/GIF through gnuplot,
-- gnuplot errors raised, a missing gnuplot reported with the render
-- command) and xsa.report (missing parts listed, inline SVG, base64).
local T = require "testing"
local xsa = xsa or require "xsa"
local plot = require "xsa.plot"
local report = require "xsa.report"

local tmpdir = T.tmpdir
local images = require "images"

local read = T.read

local have_gnuplot = plot.gnuplot() ~= nil

local function sample()
  local fig = plot.figure{cols = 2, title = "t"}
  local p = fig:panel{title = "lines", xlabel = "step", ylabel = "loss"}
  p:line({0, 1, 2}, {3, 2, 1.5}, {label = "SA", color = plot.colors.sa, points = true})
  p:band({0, 1, 2}, {3, 2, 1.5}, {2.9, 1.8, 1.4}, {label = "gap"})
  local q = fig:panel{title = "bars", xtics = {{"a", 1}, {"b", 2}}}
  q:bars({1, 2}, {0.5, -0.25}, {color = plot.colors.xsa, values = "%.2f", label = "XSA"})
  return fig
end

T.case("render: one data block per series, script reads them", function()
  local script, data = sample():render("fig", "/some/dir")
  T.ok(script:find('set multiplot title "t"', 1, true), script)
  -- two panels side by side, between the title's strip and the bottom
  T.ok(script:find("set origin 0, xsa_bottom + 0 * xsa_h", 1, true) and script:find("set origin 0.5, xsa_bottom + 0 * xsa_h", 1, true), script)
  T.ok(script:find('"fig.dat" index 0 using 1:2 with linespoints', 1, true), script)
  T.ok(script:find('lc rgb "#E74C3C"', 1, true))
  T.ok(script:find('"fig.dat" index 1 using 1:2:3 with filledcurves', 1, true))
  T.ok(script:find('with boxes lc rgb "#2471A3"', 1, true))
  T.ok(script:find('set xtics ("a" 1, "b" 2)', 1, true))
  T.ok(script:find('set loadpath "/some/dir"', 1, true))
  -- bar panels keep zero and the labels in view: bars from -0.25 to 0.5 (span 0.75), with value
  -- labels 0.22 of the span above (0.665; 0.14 without labels), 0.12 below (-0.34)
  T.ok(script:find("set yrange [-0.34:0.665]", 1, true), script)
  -- headroom on a line panel: the range ends that share of the span above the data
  local h = plot.figure{}
  h:panel{headroom = 0.5}:line({1, 2, 3}, {0.2, 0.6, 1.0})
  local hs = h:render("h", "/d")
  T.ok(hs:find("set yrange [0.2:1.4]", 1, true), hs)
  -- the value labels: one block above (0.50), one below (-0.25)
  -- (texts in script arrays, indexed from the data: no strings in the .dat)
  T.ok(data:find('1 0.5 1\n', 1, true) and data:find('2 -0.25 1\n', 1, true), data)
  T.ok(script:find('array xsa_text_3[1] = ["0.50"]', 1, true) and script:find('array xsa_text_4[1] = ["-0.25"]', 1, true), script)
  T.ok(script:find('"fig.dat" index 3 using 1:2:(xsa_text_3[int($3)]) with labels', 1, true), script)
  T.ok(not data:find('"', 1, true), data)
  local blocks = select(2, data:gsub("# block", ""))
  T.eq(blocks, 5)
  -- non-finite values become gnuplot's missing marker
  local f2 = plot.figure{}
  f2:panel{}:line({1, 2}, {0 / 0, 1 / 0})
  local _, d2 = f2:render("x", "/d")
  T.ok(d2:find("1 NaN\n2 NaN", 1, true), d2)
end)

T.case("error bars and bands over seeds: data rows, clauses, ranges", function()
  local fig = plot.figure{cols = 2}
  local p = fig:panel{title = "mean and interval"}
  p:band({0, 1, 2}, {2.5, 2.0, 1.8}, {3.0, 2.4, 2.0}, {color = plot.colors.sa, alpha = 0.2, label = "95% band"})
  p:errorbars({1, 2}, {0.5, -0.2}, {0.1, -0.9}, {0.9, 0 / 0}, {color = plot.colors.xsa, label = "mean, 95% CI"})
  local q = fig:panel{title = "bars with seeds"}
  q:bars({1}, {0.4}, {color = plot.colors.xsa})
  q:points({0.9, 1.1}, {-0.6, 1.4}, {color = "#444444"})
  local script, data = fig:render("eb", "/d")
  T.ok(script:find('"eb.dat" index 1 using 1:2:3:4 with yerrorbars pt 7 ps 0.9 lw 1.5 lc rgb "#2471A3" title "mean, 95% CI"', 1, true), script)
  T.ok(data:find("1 0.5 0.1 0.9\n2 -0.2 -0.2 -0.2\n", 1, true), "a missing bound draws the marker alone: " .. data)
  -- the dots outside the bar stay in view: the bar panel's range covers them
  local lo, hi = script:match("# panel 2.-set yrange %[([%-%d%.e]+):([%-%d%.e]+)%]")
  T.ok(tonumber(lo) < -0.6 and tonumber(hi) > 1.4, "y range " .. tostring(lo) .. ":" .. tostring(hi))
  T.raises(function() p:errorbars({1, 2}, {1, 2}, {1}, {2, 3}) end, "2 x values but 1 y values")
  if have_gnuplot then
    local d = tmpdir()
    T.ok(fig:save(d .. "/eb.png"), "renders")
    T.eq(read(d .. "/eb.png"):sub(2, 4), "PNG")
    os.execute("rm -rf '" .. d .. "'")
  end
end)

T.case("argument errors", function()
  local fig = plot.figure{}
  local p = fig:panel{}
  T.raises(function() p:line({1, 2}, {1}) end, "2 x values but 1 y values")
  T.raises(function() fig:panel{} end, "room for 1 panels")
  T.raises(function() plot.figure{}:save("/tmp/x.png") end, "no panels")
end)

T.case("save: PNG and SVG next to .dat and .gp", function()
  if not have_gnuplot then print("skip: no gnuplot") return end
  local d = tmpdir()
  local out = assert(sample():save(d .. "/a.png"))
  T.eq(out, d .. "/a.png")
  T.eq(read(d .. "/a.png"):sub(2, 4), "PNG")
  T.ok(read(d .. "/a.dat") and read(d .. "/a.gp"))
  assert(sample():save(d .. "/b.png", {format = "svg"}))
  T.ok(read(d .. "/b.svg"):find("<svg", 1, true))
  -- the script re-renders by hand from another folder
  local ok = os.execute("cd / && gnuplot -e 'fmt=\"svg\"; out=\"" .. d .. "/c.svg\"' '" .. d .. "/a.gp' 2>/dev/null")
  T.ok(ok and read(d .. "/c.svg"), "re-render by hand")
  os.execute("rm -rf '" .. d .. "'")
end)

T.case("animate: a GIF with one frame per figure", function()
  if not have_gnuplot then print("skip: no gnuplot") return end
  local d = tmpdir()
  local frames = {}
  for i = 1, 3 do
    local f = plot.figure{}
    f:panel{xrange = {0, 3}, yrange = {0, 3}}:vector(0, 0, i, 1, {label = "v"})
    frames[i] = f
  end
  local out = assert(plot.animate(frames, d .. "/anim.gif", {delay = 5}))
  local gif = read(out)
  T.eq(gif:sub(1, 3), "GIF")
  T.eq(select(2, gif:gsub("\33\249\4", "")), 3) -- graphic control blocks: one per frame
  os.execute("rm -rf '" .. d .. "'")
end)

T.case("gnuplot errors are raised with gnuplot's message", function()
  if not have_gnuplot then print("skip: no gnuplot") return end
  local d = tmpdir()
  local fig = plot.figure{}
  fig:panel{}:command("set nonsense_option 3"):line({1, 2}, {1, 2})
  local err = T.raises(function() fig:save(d .. "/bad.png") end, "gnuplot failed")
  T.ok(err:find("nonsense_option", 1, true) or err:find("unrecognized", 1, true), err)
  os.execute("rm -rf '" .. d .. "'")
end)

T.case("without gnuplot: files written, message says how to render", function()
  local exe = os.getenv("XSA_EXE")
  if not exe then print("skip: XSA_EXE not set") return end
  local d = tmpdir()
  local code = string.format([[
local plot = require "xsa.plot"
local f = plot.figure{}
f:panel{}:line({1,2},{1,2})
local ok, msg = f:save(%q)
io.write(tostring(ok), "|", msg)]], d .. "/nog.png")
  local q = xsa.sys.shell_quote
  local p = io.popen(string.format("XSA_GNUPLOT=/nonexistent/gnuplot %s -e %s 2>&1", q(exe), q(code)))
  local out = p:read("a")
  p:close()
  T.ok(out:find("^nil|gnuplot not found"), out)
  T.ok(out:find("cd '" .. d .. "' && gnuplot nog.gp", 1, true), out)
  T.ok(read(d .. "/nog.dat") and read(d .. "/nog.gp"), "files still written")
  T.eq(read(d .. "/nog.png"), nil)
  os.execute("rm -rf '" .. d .. "'")
end)

T.case("report: base64", function()
  T.eq(report.base64(""), "")
  T.eq(report.base64("f"), "Zg==")
  T.eq(report.base64("fo"), "Zm8=")
  T.eq(report.base64("foobar"), "Zm9vYmFy")
end)

T.case("report: missing parts listed with commands; present parts inline SVG", function()
  local d = tmpdir()
  -- the study's sections come from its registry (the library knows no study)
  local sections = dofile(xsa.sys.root() .. "/scripts/parts.lua").sections()
  os.execute("mkdir -p '" .. d .. "/summary'")
  local html, info = report.build{out = d, plots = d, sections = sections}
  T.eq(#info.missing, #sections)
  T.ok(html:find("xsa scripts/part3_train.lua", 1, true))
  if have_gnuplot then
    local fig = sample()
    assert(fig:save(d .. "/p2.png"))
    xsa.json.write_file(d .. "/summary/part2.json", {figures = {{name = "p2", path = d .. "/p2.png", gp = d .. "/p2.gp"}},
      result = {cos_yv = 0.8, cos_zv = 0.0, lambda = 1}, config = {lambda = 1}, wall_s = 0.5, command = "xsa x"})
    html, info = report.build{out = d, plots = d, sections = sections}
    T.eq(#info.missing, #sections - 1)
    T.eq(info.present[1], "part2")
    T.ok(html:find("<svg", 1, true) and not html:find("<?xml", 1, true))
    T.ok(html:find("cos(Y, V) = 0.8000", 1, true))
    -- ids are prefixed per figure so two inline SVGs do not clash
    T.ok(html:find('id="f%d+_gnuplot_canvas"'), "prefixed ids")
  end
  os.execute("rm -rf '" .. d .. "'")
end)

T.case("value labels: a value that rounds to zero prints without a sign", function()
  local nt = require("xsa.plot").number_text
  T.eq(nt("%.3f", -1e-9), "0.000")
  T.eq(nt("%.3f", -0.0), "0.000")
  T.eq(nt("%.1f", -0.04), "0.0")
  T.eq(nt("%.3f", -0.0006), "-0.001", "a value that does not round to zero keeps its sign")
  T.eq(nt("%.3f", 0.25), "0.250")
  T.eq(nt("%g", -2e-20), "-2e-20", "%g shows the value, not a zero")
end)

-- The text of every place a figure writes text, each with a tag of its own.
local PLACES = {"FIG", "PANEL", "XLABEL", "YLABEL", "KEY", "TIC", "POINT", "TEXT", "FOOT"}
local function text_figure(text_of)
  local fig = plot.figure{width = 1200, title = text_of("FIG"), footer = text_of("FOOT")}
  local p = fig:panel{title = text_of("PANEL"), xlabel = text_of("XLABEL"), ylabel = text_of("YLABEL"),
    xtics = {{text_of("TIC"), 2}}}
  p:line({1, 3}, {1, 3}, {label = text_of("KEY")})
  p:labels({1.5}, {1}, {text_of("POINT")})
  p:text(2.5, 2, text_of("TEXT"))
  return fig
end

-- Renders fig as SVG and returns the texts it shows.
local function svg_texts(fig, d, name)
  local out = assert(fig:save(d .. "/" .. name .. ".svg"))
  local svg = read(out)
  -- an & that starts no entity is not XML: browsers refuse the file
  for amp in svg:gmatch("&[^;]*;?") do
    T.ok(amp:match("^&#%d+;$") or amp:match("^&#x%x+;$") or amp:match("^&%a%w*;$"), "bare & in the SVG: " .. amp)
  end
  return images.svg_texts(svg), svg
end

T.case("text prints as written: _ ^ { } @ & ~ \\ and the rest, in every place of a figure", function()
  if not have_gnuplot then print("skip: no gnuplot") return end
  local d = tmpdir()
  -- every character class enhanced text reads as markup, with quotes, %,
  -- <, a backslash before digits (an octal code to gnuplot) and UTF-8
  local samples = {"seq_len", "a^b", "{c}", "@d", "&e", "R&D", "~f", "g\\h", "\\123", "x\\", "50% %s",
    "'q' \"q\"", "a<b>c", "λ ≥ 1", "_^{}@&~\\"}
  for i, s in ipairs(samples) do
    local texts = svg_texts(text_figure(function(tag) return tag .. " " .. s end), d, "t" .. i)
    local shown = {}
    for _, t in ipairs(texts) do shown[t] = true end
    for _, tag in ipairs(PLACES) do
      T.ok(shown[tag .. " " .. s], string.format("%s prints %q as written; the figure shows: %s", tag, s,
        table.concat(texts, " | ")))
    end
  end
  -- the same in a PNG (looked at by hand: underscores, no subscripts)
  T.ok(text_figure(function(tag) return tag .. " seq_len a^b {c} @d &e ~f g\\h" end):save(d .. "/all.png"))
  os.execute("rm -rf '" .. d .. "'")
end)

T.case("markup is asked for: plot.markup text is gnuplot enhanced text", function()
  if not have_gnuplot then print("skip: no gnuplot") return end
  local d = tmpdir()
  local texts, svg = svg_texts(text_figure(function(tag) return plot.markup(tag .. " a_{ii} x^2") end), d, "m")
  local shown = {}
  for _, t in ipairs(texts) do shown[t] = true end
  for _, tag in ipairs(PLACES) do
    T.ok(shown[tag .. " aii x2"], tag .. " renders the subscript and superscript: " .. table.concat(texts, " | "))
    T.ok(not shown[tag .. " a_{ii} x^2"], tag .. " is not literal")
  end
  T.ok(svg:find('dy="', 1, true), "sub- and superscripts shift the baseline")
  -- markup .. plain keeps the plain part literal
  local m = plot.markup("a_{i}") .. " b_c"
  T.ok(plot.is_markup(m))
  texts = svg_texts(text_figure(function(tag) return plot.markup(tag .. " ") .. m end), d, "c")
  shown = {}
  for _, t in ipairs(texts) do shown[t] = true end
  T.ok(shown["KEY ai b_c"], table.concat(texts, " | "))
  T.eq(plot.escape("a_b{c}\\"), "a\\_b\\{c\\}\\\\")
  os.execute("rm -rf '" .. d .. "'")
end)

T.case("text arguments: unknown option names and other types are refused", function()
  T.raises(function() plot.figure{enhanced = true} end, "unknown option 'enhanced'")
  T.raises(function() plot.figure{}:panel{titel = "x"} end, "did you mean 'title'")
  T.raises(function() plot.figure{}:panel{}:line({1}, {1}, {lable = "x"}) end, "did you mean 'label'")
  T.raises(function() plot.figure{title = {}} end, "text must be a string, a number or plot.markup")
  T.raises(function() plot.figure{}:panel{xlabel = true} end, "text must be a string, a number or plot.markup")
  T.raises(function() plot.figure{}:panel{}:text(1, 1, {}) end, "text must be a string")
  T.raises(function() plot.markup({}) end, "expects a string")
  T.raises(function() plot.figure{footer = "a\0b"} end, "NUL")
  T.raises(function() plot.figure{fontscale = 0} end, "fontscale")
end)

T.case("figure text keeps its size at the page's width: fonts grow with the figure", function()
  if not have_gnuplot then print("skip: no gnuplot") return end
  local d = tmpdir()
  local function tick_size(width)
    local fig = plot.figure{width = width, height = 500}
    fig:panel{xlabel = "x"}:line({1, 2}, {1, 2})
    local svg = read(assert(fig:save(d .. "/w" .. width .. ".svg")))
    local w = tonumber(svg:match('<svg[^>]-width="(%d+)'))
    T.eq(w, width)
    local sizes = images.svg_font_sizes(svg)
    table.sort(sizes)
    return sizes[1] -- the smallest text: tick labels
  end
  local a, b = tick_size(plot.PAGE_WIDTH), tick_size(2 * plot.PAGE_WIDTH)
  -- shown at the same width, the wide figure's text is as large as the narrow one's
  T.near(b / (2 * plot.PAGE_WIDTH), a / plot.PAGE_WIDTH, 0.02)
  T.eq(tick_size(plot.PAGE_WIDTH // 2), a, "narrower figures keep the nominal size")
  os.execute("rm -rf '" .. d .. "'")
end)

T.case("a long title is set in lines that fit; a footer line under the panels", function()
  if not have_gnuplot then print("skip: no gnuplot") return end
  local d = tmpdir()
  local words = {}
  for i = 1, 40 do words[i] = "word" .. i end
  local title = table.concat(words, " ")
  local fig = plot.figure{width = 900, height = 500, title = title, footer = "Measured with the OpenBLAS K kernel, 1 thread"}
  fig:panel{title = title}:line({1, 2}, {1, 2})
  local texts = svg_texts(fig, d, "long")
  local lines = {}
  for _, t in ipairs(texts) do if t:find("^word1 ") then lines[#lines + 1] = t end end
  local joined = {}
  for _, t in ipairs(texts) do if t:find("^word") then joined[#joined + 1] = t end end
  T.ok(#joined >= 4, "both titles take several lines: " .. table.concat(texts, " | "))
  T.eq(#lines, 2, "the figure's and the panel's first lines")
  local all = table.concat(joined, " ")
  T.ok(all:find("word40", 1, true) and all:find("word17", 1, true), "no word lost")
  local foot
  for _, t in ipairs(texts) do if t:find("OpenBLAS", 1, true) then foot = t end end
  T.eq(foot, "Measured with the OpenBLAS K kernel, 1 thread")
  os.execute("rm -rf '" .. d .. "'")
end)

T.case("an animation draws every frame in its own colours", function()
  if not have_gnuplot then print("skip: no gnuplot") return end
  local d = tmpdir()
  local colors = {"#E74C3C", "#2471A3", "#C0392B"}
  local frames = {}
  for i, c in ipairs(colors) do
    local f = plot.figure{width = 400, height = 300}
    f:panel{xrange = {0, 3}, yrange = {0, 3}}:vector(0, 0, i, 1, {color = c, width = 4, label = "v"})
    frames[i] = f
  end
  local pal = images.gif_palettes(read(assert(plot.animate(frames, d .. "/c.gif"))))
  T.eq(#pal, 3)
  -- a colour the first frame lacks is still in the palette of the frame that uses it
  for i, c in ipairs(colors) do T.ok(pal[i][c], "frame " .. i .. " can draw " .. c) end
  os.execute("rm -rf '" .. d .. "'")
end)

T.case("SVG: every & that starts no entity is written &amp;", function()
  T.eq(plot.svg_fix_amp('<t>R&D &amp; &lt; &#38; &#x26; &e</t>'), '<t>R&amp;D &amp; &lt; &#38; &#x26; &amp;e</t>')
end)

T.case("numbers in tables and labels: no sign on a value that rounds to zero", function()
  local text = xsa.numbers.text
  T.eq(text("%.4f", -1e-9), "0.0000")
  T.eq(text("%+.2f%%", -0.001), "0.00%")
  T.eq(text("%+.2f%%", 0.004), "0.00%")
  T.eq(text("%+.2f%%", 0.25), "+0.25%")
  T.eq(text("%.3f", -0.0006), "-0.001")
  T.eq(text("%.1f", -0.5), "-0.5")
  local ci = xsa.study.ci_text({mean = -2e-9, lo = -4e-9, hi = 1e-9}, "%.4f")
  T.eq(ci, "0.0000 (0.0000 to 0.0000)")
  T.eq(xsa.study.pct(-1e-6), "0.00%")
  T.eq(xsa.study.interval_text({t_lo = -1e-4, t_hi = 2.5}), "0.00 to +2.50")
  -- part 5's and part 6's table: a probe of XSA gives post cosines of rounding size, of either sign
  local probe = function(post) return {{pre_cos_pos1 = 0.7, post_cos_pos1 = post, pre_cos = 0.7, post_cos = post},
    {pre_cos_pos1 = 0.6, post_cos_pos1 = -post, pre_cos = 0.6, post_cos = -post}} end
  local per_seed = {{result = {models = {xsa = probe(-3e-9)}}}, {result = {models = {xsa = probe(-1e-9)}}}}
  local rows = dofile((os.getenv("XSA_ROOT") or ".") .. "/scripts/bias_table.lua").rows(per_seed, {{key = "xsa", label = "XSA"}}, 2)
  local tbl = xsa.study.md_table({"model", "layer", "pre", "post", "removed"}, rows)
  T.ok(not tbl:find("%-0%.0+[^%d]"), "no -0.0000 in\n" .. tbl)
  T.ok(tbl:find("| 0.0000 (0.0000 to 0.0000) |", 1, true), tbl)
end)

-- distance from point (px, py) to the segment (ax, ay)-(bx, by)
local function seg_dist(px, py, ax, ay, bx, by)
  local dx, dy = bx - ax, by - ay
  local t = math.max(0, math.min(1, ((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy)))
  return math.sqrt((px - ax - t * dx) ^ 2 + (py - ay - t * dy) ^ 2)
end

T.case("geometry: the 90° label sits on no arrow, for Y on either side of V", function()
  for _, c in ipairs{{V = {3, 0.9}, Y = {1.7, 2.3}}, {V = {3, 0.9}, Y = {-1.5, 1.8}}, {V = {1, 0}, Y = {0.2, 2}},
    {V = {-2, 1}, Y = {1, 2}}, {V = {0.5, 3}, Y = {2.5, 1}}} do
    local fig = plot.figure{}
    local g = dofile((os.getenv("XSA_ROOT") or ".") .. "/scripts/geometry.lua").panel(fig, c.V, c.Y, 1, "", plot.colors.xsa, "Z")
    local label
    for _, cmd in ipairs(fig.panels[1].commands) do
      local x, y = cmd:match('^set label "90°" at first ([^,]+),(%S+)')
      if x then label = {tonumber(x), tonumber(y)} end
    end
    T.ok(label, "a 90° label")
    -- the arrows from the origin: V, Y, Z and the projection (the removed part starts at Y's tip)
    local size = math.max(math.sqrt(c.V[1] ^ 2 + c.V[2] ^ 2), math.sqrt(c.Y[1] ^ 2 + c.Y[2] ^ 2))
    for name, v in pairs{V = c.V, Y = c.Y, Z = g.Z, projection = g.proj} do
      local dist = seg_dist(label[1], label[2], 0, 0, v[1], v[2])
      T.ok(dist > 0.08 * size, string.format("V=(%g,%g) Y=(%g,%g): the label is %.3f from %s", c.V[1], c.V[2],
        c.Y[1], c.Y[2], dist, name))
    end
  end
end)

T.done()
