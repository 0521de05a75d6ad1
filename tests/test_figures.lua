-- test_figures.lua: every published figure (each part of the registry run
-- from the study's records at its published seeds, as make results runs it)
-- rendered by gnuplot and read back (tests/lib/figure_layout.lua): value
-- and text labels inside their frame and clear of data points, lines,
-- error bars, bars and each other; keys outside the frame; every legend
-- entry drawn with its series' line style (a dashed line's entry is the
-- dashed line, not its markers). The checker is first shown to find each
-- kind of fault on figures made to have it.
local T = require "testing"
local L = require "figure_layout"
local root = os.getenv("XSA_ROOT") or "."
local exe = os.getenv("XSA_EXE") or "build/xsa"
if not exe:find("^/") then exe = root .. "/" .. exe end
local shq = xsa.sys.shell_quote

if not xsa.plot.gnuplot() then
  print("skip: gnuplot not installed")
  T.done()
end

local function has(problems, pattern)
  for _, p in ipairs(problems) do if p:find(pattern) then return true end end
  return false
end

-- Legend entries and line styles: a titled series whose colour also draws a
-- dashed, untitled line, while its own clause is not dashed, shows the
-- wrong style in the legend.
local function legend_problems(gp)
  local out = {}
  for panel in (gp .. "\n# panel"):gmatch("# panel %d+\n(.-)\n# panel") do
    local dashed = {}
    for c in panel:gmatch('"[^"\n]+%.dat" index %d+ [^\n]*') do
      local lc, dt = c:match('lc rgb "(#%x+)"'), c:match(" dt (%d+)")
      if dt and c:match("notitle") and c:match("with lines") then dashed[lc] = dt end
    end
    for c in panel:gmatch('"[^"\n]+%.dat" index %d+ [^\n]*') do
      local lc, title = c:match('lc rgb "(#%x+)"'), c:match(' title "(.-)"')
      if title and dashed[lc] and not c:match(" dt " .. dashed[lc]) then
        out[#out + 1] = string.format("legend entry %q does not show its dashed line", title)
      end
    end
  end
  return out
end

T.case("the checker finds a label on a point, on a line, at the frame, on another label, and a key inside", function()
  local dir = T.tmpdir()
  local fig = xsa.plot.figure{title = "faults", width = 600, height = 400}
  local p = fig:panel{xlabel = "x", ylabel = "y", xrange = {0, 10}, yrange = {0, 10}, key = "top right"}
  p:line({0, 10}, {0, 10}, {label = "diagonal", points = true})
  p:points({2}, {8}, {label = "a point"})
  p:labels({2, 5, 9.9, 7, 7.2}, {8, 5, 9.9, 2, 2}, {"on the point", "on the line", "at the frame", "one", "two"},
    {offset = {0, 0}})
  assert(fig:save(dir .. "/bad.png"))
  local probs = L.check(dir .. "/bad.gp")
  T.ok(has(probs, 'label "on the point" covers a data point'), table.concat(probs, "\n"))
  T.ok(has(probs, 'label "on the line" crosses a line'), table.concat(probs, "\n"))
  T.ok(has(probs, 'label "at the frame" reaches the frame'), table.concat(probs, "\n"))
  T.ok(has(probs, 'label "one" overlaps label "two"'), table.concat(probs, "\n"))
  T.ok(not has(probs, "a key inside"), "xsa.plot puts keys outside the frame")
  local gp = T.readfile(dir .. "/bad.gp")
  T.writefile(dir .. "/bad.gp", (gp:gsub("set key outside", "set key inside")))
  T.ok(has(L.check(dir .. "/bad.gp"), "a key inside the frame"), "a key inside is found")
  -- a dashed line whose legend entry sits on its markers (part 6 before issue 39)
  local dashed = 'plot "f.dat" index 0 using 1:2 with lines lc rgb "#E74C3C" lw 1.5 dt 2 notitle, \\\n' ..
    '     "f.dat" index 1 using 1:2:3:4 with yerrorbars pt 7 lc rgb "#E74C3C" title "SA baseline"\n'
  T.eq(#legend_problems("# panel 1\n" .. dashed), 1, "the dashed line's entry shows only markers")
end)

T.case("every published figure: labels clear of data, frames and each other; keys outside; legends show line styles", function()
  local dir = T.tmpdir()
  local parts = dofile(root .. "/scripts/parts.lua")
  local checked = 0
  for _, d in ipairs(parts.load()) do
    local argv = {shq(exe), shq(d.path), "--out", shq(dir .. "/out"), "--plots", shq(dir)}
    if parts.has(d, "from-records") then
      for _, a in ipairs{"--from-records", "--results", shq(root .. "/results")} do argv[#argv + 1] = a end
    end
    if d.publish and d.publish.seeds then argv[#argv + 1] = "--seeds " .. d.publish.seeds end
    local p = io.popen(table.concat(argv, " ") .. " 2>&1")
    local log = p:read("a")
    local ok = p:close()
    local s = xsa.json.read_file(dir .. "/out/summary/" .. d.name .. ".json")
    if ok and s then
      for _, f in ipairs(s.figures or {}) do
        local probs = L.check(f.gp)
        for _, l in ipairs(legend_problems(T.readfile(f.gp))) do probs[#probs + 1] = l end
        T.eq(#probs, 0, f.name .. ":\n  " .. table.concat(probs, "\n  "))
        checked = checked + 1
      end
    else
      -- a part without records yet publishes nothing, and has no figure to check
      T.ok(log:find("no runs of this configuration have records", 1, true) or log:find("not yet", 1, true),
        d.name .. " failed: " .. log:sub(-2000))
    end
  end
  T.ok(checked >= 7, "figures checked: " .. checked)
end)

T.case("the notebook's own figure: its key does not cover its points", function()
  local dir = T.tmpdir()
  local fig = xsa.plot.figure{title = "a figure of your own"}
  local p = fig:panel{xlabel = "x", ylabel = "x^2"}
  local xs, ys = {}, {}
  for i = 1, 20 do xs[i], ys[i] = i, i * i end
  p:line(xs, ys, {label = "x^2", points = true})
  assert(fig:save(dir .. "/own.png"))
  local probs = L.check(dir .. "/own.gp")
  T.eq(#probs, 0, table.concat(probs, "\n"))
end)

T.done()
