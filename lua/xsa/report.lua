-- xsa.report: the study's results as one self-contained HTML page.
--
--   local html, info = xsa.report.build{out = "cache", plots = "plots"}
--   xsa.report.write{out = "cache", plots = "plots", output = "plots/report.html"}
--
-- Reads the summaries the part scripts write (OUT/summary/partN.json),
-- re-renders each figure's gnuplot script as SVG and inlines it (PNG as a
-- data: URI when gnuplot cannot), and writes per part: what was measured,
-- sentences built from the numbers of that run (never a conclusion fixed in
-- advance), the table, the configuration and the timing. Parts without a
-- summary are listed with the command that produces them.
-- Non-goals: styling beyond a small inline stylesheet, JavaScript.
local plot = require "xsa.plot"
local numbers = require "xsa.numbers"
local study = require "xsa.study"

local M = {}

local function xsa_lib() return package.loaded.xsa end

local function esc(s)
  return (tostring(s):gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;"):gsub('"', "&quot;"))
end

local finite = numbers.finite
local pct, compare = study.pct, study.compare_words

local function f4(x) return finite(x) and string.format("%.4f", x) or "n/a" end

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

local function read(path) return (xsa_lib().read_file(path)) end

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

local fig_counter = 0
-- The HTML of one figure (summary.figures entry {name, path, gp}).
local function figure_html(f, warnings)
  fig_counter = fig_counter + 1
  local tmp = os.tmpname()
  local ok, err = pcall(plot.render_script, f.gp, "svg", tmp)
  local svg = ok and err and read(tmp)
  os.remove(tmp)
  if svg and svg:find("<svg", 1, true) then
    return '<figure>' .. inline_svg(svg, "f" .. fig_counter .. "_") .. "<figcaption>" .. esc(f.name) ..
      " (script: " .. esc(f.gp) .. ")</figcaption></figure>\n"
  end
  local png = read(f.path)
  if png then
    warnings[#warnings + 1] = "figure " .. f.name .. ": SVG rendering failed, embedded the PNG (" ..
      tostring(err) .. ")"
    local mime = f.path:match("%.svg$") and "image/svg+xml" or "image/png"
    return '<figure><img class="fig" alt="' .. esc(f.name) .. '" src="data:' .. mime .. ';base64,' .. base64(png) ..
      '"><figcaption>' .. esc(f.name) .. "</figcaption></figure>\n"
  end
  warnings[#warnings + 1] = "figure " .. f.name .. " could not be rendered: " .. tostring(err)
  return '<p class="missing">Figure ' .. esc(f.name) .. " is not available (" .. esc(tostring(err)) .. ").</p>\n"
end

-- A markdown table (as the scripts print it) to HTML.
local function md_table_html(md)
  if type(md) ~= "string" or md == "" then return "" end
  local out = {"<table>"}
  local row = 0
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
        for _, c in ipairs(cells) do tr[#tr + 1] = "<" .. tag .. ">" .. esc(c) .. "</" .. tag .. ">" end
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

local function config_html(s)
  local rows = flatten(s.config or {}, nil)
  local out = {"<details><summary>Configuration and timing</summary><table class=\"cfg\">"}
  out[#out + 1] = string.format("<tr><th>command</th><td><code>%s</code></td></tr>", esc(s.command or "?"))
  out[#out + 1] = string.format("<tr><th>finished</th><td>%s</td></tr>", esc(s.finished_at or "?"))
  if finite(s.wall_s) then
    out[#out + 1] = string.format("<tr><th>wall time of the script</th><td>%.1f s%s</td></tr>", s.wall_s,
      s.cache == "hit" and " (result from the cache)" or "")
  end
  if s.cache then out[#out + 1] = string.format("<tr><th>cache</th><td>%s</td></tr>", esc(s.cache)) end
  for _, r in ipairs(rows) do
    out[#out + 1] = string.format("<tr><th>%s</th><td>%s</td></tr>", esc(r[1]), esc(r[2]))
  end
  out[#out + 1] = "</table></details>"
  return table.concat(out, "\n") .. "\n"
end

----------------------------------------------------------------------------
-- per-part texts: what was measured, then what this run's numbers say

local parts = {}

parts.part1 = {
  title = "Part 1: self-value bias of an untrained model",
  command = "xsa scripts/part1_bias.lua",
  about = "A freshly initialised model (standard attention) reads a few batches of TinyStories. For every layer " ..
    "the probe averages three quantities over heads, tokens and batches: how similar the value vectors of " ..
    "different tokens are (mean cos(v_i, v_j), i ≠ j), how much attention a token pays to itself " ..
    "(mean a_ii), and how closely a token's attention output points along its own value vector " ..
    "(mean cos(y_i, v_i)). The last one is the self-value component that XSA removes.",
  words = function(s)
    local r = s.result or {}
    local out = {}
    for l, m in ipairs(r.layers or {}) do
      out[#out + 1] = string.format("Layer %d: mean cos(v_i,v_j) = %s, mean a_ii = %s, mean cos(y_i,v_i) = %s.", l,
        f4(m.value_cos), f4(m.self_attn), f4(m.pre_cos))
    end
    if r.probe_batches then
      out[#out + 1] = string.format("Measured on %d batches (%d tokens).", r.probe_batches, r.tokens or 0)
    end
    return out
  end,
}

parts.part2 = {
  title = "Part 2: the geometry of the projection",
  command = "xsa scripts/part2_geometry.lua --animate",
  about = "XSA takes each token's attention output Y, finds its component along the token's own value " ..
    "vector V (α = Y·V/|V|) and subtracts λ times it: Z = Y − λ α V/|V|. With λ = 0 this is standard " ..
    "attention (Z = Y); with λ = 1 nothing of Z points along V (Z ⟂ V). The picture draws one such token " ..
    "in two dimensions.",
  words = function(s)
    local r = s.result or {}
    return {string.format("For the vectors drawn, cos(Y, V) = %s; at λ = %s, cos(Z, V) = %s.", f4(r.cos_yv),
      tostring(r.lambda), f4(r.cos_zv))}
  end,
}

parts.part3 = {
  title = "Part 3: paired training of SA and XSA",
  command = "xsa scripts/part3_train.lua",
  about = "Two models start from the same initial weights: one with standard attention (SA), one with XSA. " ..
    "At every step both see the same batch and take an AdamW step. The curves show the mean training loss " ..
    "since the previous evaluation point and the validation loss on a fixed subset of validation batches; " ..
    "the final value is measured on the whole validation set.",
  words = function(s)
    local r = s.result or {}
    local out = {}
    if r.sa and r.xsa then
      out[#out + 1] = "In this run " .. compare(r.sa.final_val, r.xsa.final_val, "final validation loss") ..
        string.format(" (improvement %s; positive means XSA is lower).", pct(r.improvement_pct))
      local n = #(r.steps or {})
      if n > 0 then
        out[#out + 1] = string.format("Over the last interval (to step %d) the mean training loss is %s for SA and %s for XSA.",
          r.steps[n], f4(r.sa.train[n]), f4(r.xsa.train[n]))
        -- how often each model was ahead on validation at the evaluation points
        local ahead = 0
        for i = 2, n do if r.xsa.val[i] < r.sa.val[i] then ahead = ahead + 1 end end
        out[#out + 1] = string.format("XSA's validation loss was below SA's at %d of the %d evaluation points after step 0.",
          ahead, n - 1)
      end
      if finite(r.elapsed_s) then
        out[#out + 1] = string.format("Training took %.1f s (%.1f s of it evaluating), %.0f tokens/s over both models.",
          r.elapsed_s, r.eval_s or 0, r.tokens_per_s or 0)
      end
      out[#out + 1] = "A single run at this scale can favour either model; the seed and the data order matter."
    end
    return out
  end,
}

parts.part4 = {
  title = "Part 4: sequence length",
  command = "xsa scripts/part4_seqlen.lua",
  about = "The paired training of part 3, repeated with a fresh pair of models for each sequence length " ..
    "(the window of text the model sees). The figure shows the final validation loss of both models per " ..
    "length and XSA's improvement in percent (positive when XSA's loss is lower).",
  words = function(s)
    local runs = (s.result or {}).runs or {}
    local out, better = {}, 0
    for _, r in ipairs(runs) do
      out[#out + 1] = string.format("seq_len %d: %s.", r.seq_len, compare(r.sa_val, r.xsa_val, "final validation loss"))
      if finite(r.xsa_val) and finite(r.sa_val) and r.xsa_val < r.sa_val then better = better + 1 end
    end
    if #runs > 0 then
      out[#out + 1] = string.format("XSA's loss is lower at %d of the %d lengths in this run.", better, #runs)
    end
    return out
  end,
}

parts.part5 = {
  title = "Part 5: the bias after training",
  command = "xsa scripts/part5_bias_trained.lua --train",
  about = "The probe of part 1 applied to the trained models of part 3 and to their shared initial weights, " ..
    "on validation text. A fourth metric, the mean cos(z_i, v_i) after the projection, shows what is left " ..
    "of the self-value component in what each layer passes on (for SA, z = y). \"Bias removed\" is " ..
    "100·(|pre| − |post|)/|pre|.",
  words = function(s)
    local out = {}
    local names = {untrained = "the untrained model", sa = "trained SA", xsa = "trained XSA"}
    local by = {}
    for _, m in ipairs(s.means or {}) do
      by[m.model] = m
      out[#out + 1] = string.format("For %s, averaged over layers, cos(y_i,v_i) before the projection is %s and cos(z_i,v_i) after it is %s (%s of the bias removed).",
        names[m.model] or m.model, f4(m.pre), f4(m.post),
        finite(m.removed_pct) and string.format("%.1f%%", m.removed_pct) or "n/a")
    end
    if by.sa and by.xsa and finite(by.sa.pre) and finite(by.xsa.pre) then
      out[#out + 1] = string.format("Before the projection, trained XSA's mean cos(y_i,v_i) is %s trained SA's (%s vs %s).",
        by.xsa.pre > by.sa.pre and "higher than" or (by.xsa.pre < by.sa.pre and "lower than" or "equal to"),
        f4(by.xsa.pre), f4(by.sa.pre))
    end
    return out
  end,
}

parts.part6 = {
  title = "Part 6: how much projection (λ sweep)",
  command = "xsa scripts/part6_lambda_sweep.lua",
  about = "One initialisation for every λ; each XSA(λ) model is trained against its own SA baseline cloned " ..
    "from that initialisation, on the same batches. The left panel is the paired improvement in percent " ..
    "of the final validation loss; the right panel the remaining self-value bias (mean cos(z_i, v_i)) of " ..
    "the trained models.",
  words = function(s)
    local runs = (s.result or {}).runs or {}
    local out = {}
    local best
    for _, r in ipairs(runs) do
      out[#out + 1] = string.format("λ = %g: improvement %s, XSA mean cos(z,v) %s (SA baseline %s).", r.lambda,
        pct(r.improvement_pct), f4(r.xsa_post_cos), f4(r.sa_post_cos))
      if finite(r.improvement_pct) and (not best or r.improvement_pct > best.improvement_pct) then best = r end
    end
    if best then
      out[#out + 1] = string.format("The largest paired improvement in this sweep is %s at λ = %g.",
        pct(best.improvement_pct), best.lambda)
    end
    return out
  end,
}

M.parts = parts
M.order = {"part1", "part2", "part3", "part4", "part5", "part6"}

local css = [[
body{font-family:"DejaVu Sans",Helvetica,Arial,sans-serif;max-width:1150px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.7em}h2{border-bottom:2px solid #2471A3;padding-bottom:.2em;margin-top:2em}
.fig{width:100%;height:auto;display:block}figure{margin:1em 0}figcaption{font-size:.8em;color:#777}
table{border-collapse:collapse;margin:.8em 0;font-size:.92em}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}table.cfg td{text-align:left;font-family:monospace}
.sa{color:#E74C3C;font-weight:bold}.xsa{color:#2471A3;font-weight:bold}.missing{color:#a00}
.numbers li{margin:.2em 0}table.samples td{text-align:left;vertical-align:top;max-width:30em}code{background:#f4f4f4;padding:0 .2em}details{margin:.6em 0}
]]

-- Builds the HTML. o: {out = results folder, plots = figures folder,
-- folder_flags = text added to the commands of missing parts (optional)}.
-- Returns html, {present = {...}, missing = {...}, warnings = {...}}.
function M.build(o)
  local xsa = xsa_lib()
  local info = {present = {}, missing = {}, warnings = {}}
  local body = {}
  for _, key in ipairs(M.order) do
    local part = parts[key]
    local path = o.out .. "/summary/" .. key .. ".json"
    local s, err = xsa.json.read_file(path)
    if not s then
      info.missing[#info.missing + 1] = key
      if err and not tostring(err):find("No such file", 1, true) and not tostring(err):find("cannot open", 1, true) then
        info.warnings[#info.warnings + 1] = key .. ": " .. tostring(err)
      end
    else
      info.present[#info.present + 1] = key
      body[#body + 1] = string.format('<h2 id="%s">%s</h2>', key, esc(part.title))
      body[#body + 1] = "<p>" .. esc(part.about) .. "</p>"
      local ok, words = pcall(part.words, s)
      if ok and #words > 0 then
        local li = {}
        for i, w in ipairs(words) do li[i] = "<li>" .. esc(w) .. "</li>" end
        body[#body + 1] = '<ul class="numbers">' .. table.concat(li) .. "</ul>"
      elseif not ok then
        info.warnings[#info.warnings + 1] = key .. ": " .. tostring(words)
      end
      for _, f in ipairs(s.figures or {}) do body[#body + 1] = figure_html(f, info.warnings) end
      body[#body + 1] = md_table_html(s.table)
      -- part 3's checkpoints continue three fixed prompts (lua/xsa/samples.lua)
      if key == "part3" then body[#body + 1] = require("xsa.samples").part3_html(s) end
      body[#body + 1] = config_html(s)
    end
  end
  local head = {
    "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
    "<title>xsa: Exclusive Self Attention vs self attention</title>",
    "<style>" .. css .. "</style></head><body>",
    "<h1>Exclusive Self Attention (XSA) vs standard self attention (SA)</h1>",
    "<p>XSA changes one thing in attention: after Y = softmax(QKᵀ/√d + causal mask)·V, it removes from " ..
      "each token's output the component along that token's own value vector, Z = Y − λ(Y·V̂)V̂ " ..
      "(λ = 1: full XSA, λ = 0: SA), and passes Z to the output projection. This page gathers the " ..
      "results of the study's scripts as they were last run; every sentence below is computed from those " ..
      'numbers. Colours: <span class="sa">SA red</span>, <span class="xsa">XSA blue</span>.</p>',
    string.format("<p>Generated %s from <code>%s</code>.</p>", os.date("!%Y-%m-%d %H:%M UTC"), esc(o.out)),
  }
  if #info.missing > 0 then
    local li = {}
    for _, key in ipairs(info.missing) do
      local cmd = parts[key].command
      if o.folder_flags and o.folder_flags ~= "" then cmd = cmd .. " " .. o.folder_flags end
      li[#li + 1] = string.format("<li>%s: not run yet%s; produce it with <code>%s</code></li>", esc(parts[key].title),
        key == "part3" and " (so there are no text samples of its SA and XSA models)" or "", esc(cmd))
    end
    head[#head + 1] = '<div class="missing"><p>Missing parts:</p><ul>' .. table.concat(li) .. "</ul></div>"
  end
  local html = table.concat(head, "\n") .. "\n" .. table.concat(body, "\n") .. "\n</body></html>\n"
  return html, info
end

-- Builds and writes o.output atomically; returns the path and info.
function M.write(o)
  local xsa = xsa_lib()
  local html, info = M.build(o)
  xsa.write_file_atomic(o.output, html)
  return o.output, info
end

return M
