-- xsa.report: a study's results as one self-contained HTML page.
--
--   local sections = {{key = "mine", title = "My experiment", command = "xsa mine.lua",
--     words = function(summary) return {"..."} end}}
--   local html, info = xsa.report.build{out = "cache", plots = "plots", sections = sections}
--   xsa.report.write{out = "cache", plots = "plots", output = "plots/report.html", sections = sections}
--
-- Reads the summaries a study's scripts write (OUT/summary/KEY.json, one
-- per section the caller lists: the library knows no study),
-- re-renders each figure's gnuplot script as SVG and inlines it (PNG as a
-- data: URI when gnuplot cannot), and writes per part: what was measured,
-- sentences built from the numbers of that run (never a conclusion fixed in
-- advance), the table, the configuration and the timing. Parts without a
-- summary are listed with the command that produces them.
-- Non-goals: styling beyond a small inline stylesheet, JavaScript.
local plot = require "xsa.plot"
local numbers = require "xsa.numbers"
local study = require "xsa.study"
local endpoints = require "xsa.endpoints"

local M = {}

local core = require "xsa.core" -- the C functions and libraries

local function esc(s)
  return (tostring(s):gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;"):gsub('"', "&quot;"))
end

local finite = numbers.finite
local pct, compare = study.pct, study.compare_words

local function f4(x) return finite(x) and numbers.text("%.4f", x) or "n/a" end

local b64chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function base64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = (a << 16) | ((b or 0) << 8) | (c or 0)
    local e = {}
    for k = 1, 4 do
      local idx = (n >> (6 * (4 - k))) & 63
      e[k] = b64chars:sub(idx + 1, idx + 1)
    end
    if not b then e[3] = "="; e[4] = "=" elseif not c then e[4] = "=" end
    out[#out + 1] = table.concat(e)
  end
  return table.concat(out)
end
M.base64 = base64

local function read(path) return (core.read_file(path)) end

-- An SVG made safe to sit inline next to others: no XML prolog, ids
-- prefixed so references stay inside the figure.
local function inline_svg(svg, prefix)
  svg = svg:gsub("<%?xml.-%?>", ""):gsub("<!DOCTYPE.->", "")
  svg = svg:gsub('id="([^"]+)"', 'id="' .. prefix .. '%1"')
  svg = svg:gsub('href="#([^"]+)"', 'href="#' .. prefix .. '%1"')
  svg = svg:gsub("url%(#([^)]+)%)", "url(#" .. prefix .. "%1)")
  -- let CSS scale it
  svg = svg:gsub("<svg(.-)>", function(attrs)
    return "<svg" .. attrs:gsub('%s+width="[^"]*"', ""):gsub('%s+height="[^"]*"', "") .. ' class="fig">'
  end, 1)
  return svg
end

-- Files named inside data (the rule): a summary may come from another
-- machine, so the report opens only what it would have written itself: a
-- figure NAME as PLOTS/NAME.gp and PLOTS/NAME.png|svg, NAME plain
-- ([%w_-]+). Any other name or folder in a summary is refused with a
-- warning, never rendered, read or followed.
local function own_figure(f, plots)
  if type(f) ~= "table" or type(f.name) ~= "string" or not f.name:match("^[%w_%-]+$") then
    return nil, "a figure entry without a plain name"
  end
  local gp, png, svg = plots .. "/" .. f.name .. ".gp", plots .. "/" .. f.name .. ".png", plots .. "/" .. f.name .. ".svg"
  if f.gp ~= gp or (f.path ~= png and f.path ~= svg) then
    return nil, "figure " .. f.name .. " names files outside " .. plots
  end
  return {name = f.name, gp = gp, path = f.path, caption = type(f.caption) == "string" and f.caption or nil}
end
M.own_figure = own_figure

local fig_counter = 0
-- The HTML of one figure (summary.figures entry {name, path, gp}).
local function figure_html(f, warnings, published)
  fig_counter = fig_counter + 1
  local tmp = os.tmpname()
  local ok, err = pcall(plot.render_script, f.gp, "svg", tmp)
  local svg = ok and err and read(tmp)
  os.remove(tmp)
  if svg and svg:find("<svg", 1, true) then
    return '<figure>' .. inline_svg(svg, "f" .. fig_counter .. "_") .. "<figcaption>" ..
      (f.caption and ('<span class="cap">' .. esc(f.caption) .. "</span><br>") or "") .. esc(f.name) ..
      (published and "" or (" (script: " .. esc(f.gp) .. ")")) .. "</figcaption></figure>\n"
  end
  local png = read(f.path)
  if png then
    warnings[#warnings + 1] = "figure " .. f.name .. ": SVG rendering failed, embedded the PNG (" ..
      tostring(err) .. ")"
    local mime = f.path:match("%.svg$") and "image/svg+xml" or "image/png"
    return '<figure><img class="fig" alt="' .. esc(f.name) .. '" src="data:' .. mime .. ';base64,' .. base64(png) ..
      '"><figcaption>' .. (f.caption and ('<span class="cap">' .. esc(f.caption) .. "</span><br>") or "") ..
      esc(f.name) .. "</figcaption></figure>\n"
  end
  warnings[#warnings + 1] = "figure " .. f.name .. " could not be rendered: " .. tostring(err)
  return '<p class="missing">Figure ' .. esc(f.name) .. " is not available (" .. esc(tostring(err)) .. ").</p>\n"
end

-- A markdown table (as the scripts print it) to HTML.
local function md_table_html(md, class)
  if type(md) ~= "string" or md == "" then return "" end
  local out = {class and ('<table class="' .. class .. '">') or "<table>"}
  local row, left = 0, {}
  local sep = md:match("\n(|[-:| ]+|)\n") or "" -- the separator: "---" columns are text, read from the left
  local i = 0
  for cell in sep:sub(2, -2):gmatch("([^|]*)|?") do
    i = i + 1
    left[i] = i > 1 and cell:match("^%s*%-+%s*$") ~= nil or nil
  end
  for line in md:gmatch("[^\n]+") do
    if line:match("^|") then
      row = row + 1
      if row ~= 2 then
        local tag = row == 1 and "th" or "td"
        local cells = {}
        for cell in line:sub(2, -2):gmatch("([^|]*)|?") do
          if #cells < 50 then cells[#cells + 1] = cell:match("^%s*(.-)%s*$") end
        end
        if cells[#cells] == "" then cells[#cells] = nil end
        local tr = {"<tr>"}
        for i, c in ipairs(cells) do
          tr[#tr + 1] = "<" .. tag .. (left[i] and ' style="text-align:left"' or "") .. ">" .. esc(c) .. "</" .. tag .. ">"
        end
        tr[#tr + 1] = "</tr>"
        out[#out + 1] = table.concat(tr)
      end
    end
  end
  out[#out + 1] = "</table>"
  return table.concat(out, "\n") .. "\n"
end

-- Flattens a configuration into "a.b = v" lines.
local function flatten(t, prefix, out)
  out = out or {}
  if type(t) ~= "table" then
    out[#out + 1] = {prefix, tostring(t)}
    return out
  end
  if #t > 0 and type(t[1]) ~= "table" then
    local parts = {}
    for i, v in ipairs(t) do parts[i] = tostring(v) end
    out[#out + 1] = {prefix, table.concat(parts, ", ")}
    return out
  end
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do flatten(t[k], prefix and (prefix .. "." .. tostring(k)) or tostring(k), out) end
  return out
end

-- The published page's lines on where the numbers came from: the records
-- (results/), their count and their summed compute time; nothing of the
-- machine or the moment that generated the page.
local function records_rows(s, out)
  local n, compute, folders, seen = 0, 0, {}, {}
  for _, r in ipairs(type(s.records) == "table" and s.records or {}) do
    n = n + 1
    if finite(r.elapsed_s) then compute = compute + r.elapsed_s end
    local f = type(r.folder) == "string" and r.folder or s.part
    if f and not seen[f] then seen[f], folders[#folders + 1] = true, "results/" .. tostring(f) end
  end
  -- where they are: the folders they were read from (parts 8-10 read results/grid), else the part's own
  local where = #folders > 0 and table.concat(folders, ", ") or "results/" .. tostring(s.part or "?")
  out[#out + 1] = string.format("<tr><th>records</th><td>%d (%s, listed in doc/results.md)</td></tr>", n, esc(where))
  if n > 0 then out[#out + 1] = string.format("<tr><th>compute time (sum over the records)</th><td>%.0f s</td></tr>", compute) end
  if type(s.seeds_missing) == "table" and #s.seeds_missing > 0 then
    out[#out + 1] = string.format("<tr><th>seeds without a record</th><td>%s</td></tr>", esc(table.concat(s.seeds_missing, ", ")))
  end
end

-- The lines of the run that wrote a summary (a plain report: the command,
-- when, how long, cache or record).
local function run_rows(s, out)
  out[#out + 1] = string.format("<tr><th>command</th><td><code>%s</code></td></tr>", esc(s.command or "?"))
  out[#out + 1] = string.format("<tr><th>finished</th><td>%s</td></tr>", esc(s.finished_at or "?"))
  if finite(s.wall_s) then
    out[#out + 1] = string.format("<tr><th>wall time of the script</th><td>%.1f s%s</td></tr>", s.wall_s,
      s.cache == "hit" and " (result from the cache)" or "")
  end
  if s.cache then out[#out + 1] = string.format("<tr><th>cache</th><td>%s</td></tr>", esc(s.cache)) end
end

local function config_html(s, published)
  local out = {"<details><summary>Configuration and timing</summary><table class=\"cfg\">"}
  if published then records_rows(s, out) else run_rows(s, out) end
  for _, r in ipairs(flatten(s.config or {}, nil)) do
    out[#out + 1] = string.format("<tr><th>%s</th><td>%s</td></tr>", esc(r[1]), esc(r[2]))
  end
  out[#out + 1] = "</table></details>"
  return table.concat(out, "\n") .. "\n"
end

----------------------------------------------------------------------------
-- for the sections' sentences (a study's sections are its own: M.build)

M.f4 = f4

-- The statement of a paired comparison over seeds (study.stats_lines) as
-- sentences appended to `out`.
function M.stats_words(st, what, out)
  if type(st) ~= "table" or not st.verdict then return out end
  for _, l in ipairs(study.stats_lines(st, what, true)) do out[#out + 1] = l .. "." end
  return out
end

-- A section's published verdicts (make results) for a sweep: one row per
-- run of the summary's result.runs, named label(run).
function M.sweep_verdicts(label, keep)
  return function(s, row)
    local rows = {}
    for _, r in ipairs(s.result.runs or {}) do
      if not keep or keep(r) then rows[#rows + 1] = row(label(r), r.stats, M.mean_val_stats(r.seeds)) end
    end
    return rows
  end
end

-- The paired statistics of the mean val loss (doc/study.md, "Endpoints")
-- of a sweep run's seeds ({seed=, steps=, sa_curve=, xsa_curve=}), as
-- xsa.study.endpoint_stats gives them for part 3's pairs; nil when a seed
-- has no usable curves (summaries written before they were kept).
local MEAN_VAL
for _, e in ipairs(endpoints.ENDPOINTS) do if e.key == "mean" then MEAN_VAL = e end end

function M.mean_val_stats(seeds)
  local pairs_, used = {}, {}
  for i, x in ipairs(seeds or {}) do
    pairs_[i], used[i] = {steps = x.steps, sa = {val = x.sa_curve}, xsa = {val = x.xsa_curve}}, x.seed
  end
  if #pairs_ == 0 then return nil end
  local ok, rows = pcall(study.endpoint_stats, pairs_, used, {endpoints = {MEAN_VAL}})
  local st = ok and rows[1].stats
  return st and finite(st.mean) and st or nil
end

-- " (95% t interval a to b)" of a pair {a, b} in format f, or "".
function M.ci(c, f)
  if type(c) ~= "table" or not finite(c[1]) then return "" end
  return " (95% t interval " .. numbers.text(f, c[1]) .. " to " .. numbers.text(f, c[2]) .. ")"
end

local css = [[
body{font-family:"DejaVu Sans",Helvetica,Arial,sans-serif;max-width:1150px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.7em}h2{border-bottom:2px solid #2471A3;padding-bottom:.2em;margin-top:2em}
.fig{width:100%;height:auto;display:block}figure{margin:1em 0}figcaption{font-size:.8em;color:#777}
table{border-collapse:collapse;margin:.8em 0;font-size:.92em}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}table.cfg td{text-align:left;font-family:monospace}
.sa{color:#E74C3C;font-weight:bold}.xsa{color:#2471A3;font-weight:bold}.missing{color:#a00}
.numbers li{margin:.2em 0}.paper{color:#555;font-style:italic}.explain{background:#f7f9fb;border-left:3px solid #2471A3;padding:.3em .7em}.cap{color:#333;font-size:1.1em}pre{background:#f4f4f4;padding:.5em;overflow-x:auto}table.samples td{text-align:left;vertical-align:top;max-width:30em}code{background:#f4f4f4;padding:0 .2em}details{margin:.6em 0}
h1.top{margin:.3em 0 .2em}table.claims{font-size:.84em;margin-top:.4em}table.claims td,table.claims th{padding:.12em .45em}table.claims td{white-space:nowrap}table.claims td:nth-child(-n+2){white-space:normal}table.claims td:nth-child(2){min-width:17em}
]]

-- One present section: its heading, texts, sentences from the summary s,
-- figures, table, extra HTML (section.html(s, out) unless published) and
-- the configuration.
local function section_html(sec, s, o, info)
  local key, body = sec.key, {}
  body[#body + 1] = string.format('<h2 id="%s">%s</h2>', key, esc(sec.title))
  if sec.paper then body[#body + 1] = '<p class="paper">Reproduces: ' .. esc(sec.paper) .. ".</p>" end
  if sec.about then body[#body + 1] = "<p>" .. esc(sec.about) .. "</p>" end
  for _, e in ipairs(sec.explain or {}) do
    body[#body + 1] = type(e) == "table" and ("<pre><code>" .. esc(e.code) .. "</code></pre>") or
      ('<p class="explain">' .. esc(e) .. "</p>")
  end
  local ok, words = pcall(sec.words or function() return {} end, s)
  if ok and #words > 0 then
    local li = {}
    for i, w in ipairs(words) do li[i] = "<li>" .. esc(w) .. "</li>" end
    body[#body + 1] = '<ul class="numbers">' .. table.concat(li) .. "</ul>"
  elseif not ok then
    info.warnings[#info.warnings + 1] = key .. ": " .. tostring(words)
  end
  for _, f in ipairs(type(s.figures) == "table" and s.figures or {}) do
    local mine, why = own_figure(f, o.plots)
    if mine then body[#body + 1] = figure_html(mine, info.warnings, o.published)
    else info.warnings[#info.warnings + 1] = key .. ": " .. why .. " (refused)" end
  end
  if type(s.table) == "string" and s.table:match("^| seed |") then -- per seed: collapsed
    body[#body + 1] = string.format("<details><summary>Per seed (%d rows)</summary>\n%s</details>",
      select(2, s.table:gsub("\n", "")) - 2, md_table_html(s.table))
  else
    body[#body + 1] = md_table_html(s.table)
  end
  if sec.html and not o.published then body[#body + 1] = sec.html(s, o.out) end
  body[#body + 1] = config_html(s, o.published)
  return table.concat(body, "\n")
end

-- The page's head: title, the introduction, where it comes from, the
-- sections not run yet with their commands.
local function head_html(o, info, by_key)
  local head = {
    "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
    "<title>xsa: Exclusive Self Attention vs self attention</title>",
    "<style>" .. css .. "</style></head><body>",
    '<h1 class="top">Exclusive Self Attention (XSA) vs standard self attention (SA)</h1>',
  }
  if o.claims then -- the answers first (published: scripts/claims.lua's tables, computed by the caller)
    head[#head + 1] = '<h2 id="claims">The claims, tested</h2>'
    -- one block {meaning =, table =, lines =}, or a list of them, each under its title
    for _, b in ipairs(o.claims.table and {o.claims} or o.claims) do
      if b.title then head[#head + 1] = "<h3>" .. esc(b.title) .. "</h3>" end
      head[#head + 1] = "<p>" .. esc(b.meaning or "") .. "</p>"
      head[#head + 1] = md_table_html(b.table, "claims")
      local li = {}
      for i, l in ipairs(b.lines or {}) do li[i] = "<li>" .. esc(l) .. "</li>" end
      if #li > 0 then head[#head + 1] = "<ul>" .. table.concat(li) .. "</ul>" end
    end
    head[#head + 1] = '<h2 id="about">The study</h2>'
  end
  for _, l in ipairs{
    "<p>XSA changes one thing in attention: after Y = softmax(QKᵀ/√d + causal mask)·V, it removes from " ..
      "each token's output the component along that token's own value vector, Z = Y − λ(Y·V̂)V̂ " ..
      "(λ = 1: full XSA, λ = 0: SA), and passes Z to the output projection. This page gathers the " ..
      "results of the study's scripts as they were last run: every sentence in the lists of results is computed " ..
      "from those numbers (the shaded paragraphs explain the idea of each part). A verdict over seeds is decided " ..
      "by the 95% t interval of the mean improvement 100·(SA − XSA)/SA: \"inconclusive\" when it contains 0. " ..
      'Colours: <span class="sa">SA red</span>, <span class="xsa">XSA blue</span>.</p>',
    type(o.published) == "string" and ("<p>" .. o.published .. "</p>") or
      string.format("<p>Generated %s from <code>%s</code>.</p>", os.date("!%Y-%m-%d %H:%M UTC"), esc(o.out))} do
    head[#head + 1] = l
  end
  if #info.missing > 0 then
    local li = {}
    for _, key in ipairs(info.missing) do
      local sec = by_key[key]
      local cmd = sec.command
      if o.folder_flags and o.folder_flags ~= "" then cmd = cmd .. " " .. o.folder_flags end
      li[#li + 1] = string.format("<li>%s: not run yet%s; produce it with <code>%s</code></li>", esc(sec.title),
        sec.missing_note and (" " .. sec.missing_note) or "", esc(cmd))
    end
    head[#head + 1] = '<div class="missing"><p>Missing parts:</p><ul>' .. table.concat(li) .. "</ul></div>"
  end
  return head
end

-- Builds the HTML. o: {out = results folder, plots = figures folder,
-- sections = the study's sections in order, each {key = the summary's name
-- (OUT/summary/KEY.json), title, command (what produces it), paper, about,
-- explain = {paragraph or {code =}}, words = function(summary) -> sentences,
-- html = function(summary, out) -> extra HTML, missing_note}, closing =
-- the closing section's paragraphs (optional), folder_flags = text added to
-- the commands of missing sections (optional), published = the published
-- page's note on where it comes from (HTML; no date, no folder, no samples),
-- claims = {table = markdown, meaning = a paragraph, lines = {...}}, or a
-- list of such blocks each with a title (optional: the page opens with them)}.
-- Returns html, {present = {...}, missing = {...}, warnings = {...}}.
function M.build(o)
  local info, body, by_key = {present = {}, missing = {}, warnings = {}}, {}, {}
  for _, sec in ipairs(o.sections or {}) do
    by_key[sec.key] = sec
    local s, err = core.json.read_file(o.out .. "/summary/" .. sec.key .. ".json")
    if not s then
      info.missing[#info.missing + 1] = sec.key
      if err and not tostring(err):find("No such file", 1, true) and not tostring(err):find("cannot open", 1, true) then
        info.warnings[#info.warnings + 1] = sec.key .. ": " .. tostring(err)
      end
    else
      info.present[#info.present + 1] = sec.key
      body[#body + 1] = section_html(sec, s, o, info)
    end
  end
  if o.closing then
    body[#body + 1] = '<h2 id="why">' .. esc(o.closing.title) .. "</h2>"
    for _, w in ipairs(o.closing) do body[#body + 1] = "<p>" .. esc(w) .. "</p>" end
  end
  local html = table.concat(head_html(o, info, by_key), "\n") .. "\n" .. table.concat(body, "\n") .. "\n</body></html>\n"
  return html, info
end

-- Builds and writes o.output atomically; returns the path and info.
function M.write(o)
  require("xsa.options").check("report.write", o, {"out", "plots", "output", "folder_flags", "sections", "closing"})
  local html, info = M.build(o)
  core.write_file_atomic(o.output, html)
  return o.output, info
end

return M
