-- test_plot.lua: xsa.plot (data + script files, PNG/SVG/GIF through gnuplot,
-- gnuplot errors raised, a missing gnuplot reported with the render
-- command) and xsa.report (missing parts listed, inline SVG, base64).
local T = require "testing"
local xsa = xsa or require "xsa"
local plot = require "xsa.plot"
local report = require "xsa.report"

local tmpdir = T.tmpdir

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
  T.ok(script:find('set multiplot layout 1,2 title "t"', 1, true), script)
  T.ok(script:find('"fig.dat" index 0 using 1:2 with linespoints', 1, true), script)
  T.ok(script:find('lc rgb "#E74C3C"', 1, true))
  T.ok(script:find('"fig.dat" index 1 using 1:2:3 with filledcurves', 1, true))
  T.ok(script:find('with boxes lc rgb "#2471A3"', 1, true))
  T.ok(script:find('set xtics ("a" 1, "b" 2)', 1, true))
  T.ok(script:find('set loadpath "/some/dir"', 1, true))
  -- bar panels keep zero and the labels in view
  T.ok(script:find("set yrange [-0.34:0.605]", 1, true), script)
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
  T.eq(#info.missing, 7)
  T.ok(html:find("xsa scripts/part3_train.lua", 1, true))
  if have_gnuplot then
    local fig = sample()
    assert(fig:save(d .. "/p2.png"))
    xsa.json.write_file(d .. "/summary/part2.json", {figures = {{name = "p2", path = d .. "/p2.png", gp = d .. "/p2.gp"}},
      result = {cos_yv = 0.8, cos_zv = 0.0, lambda = 1}, config = {lambda = 1}, wall_s = 0.5, command = "xsa x"})
    html, info = report.build{out = d, plots = d, sections = sections}
    T.eq(#info.missing, 6)
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

T.done()
