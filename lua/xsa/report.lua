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
local function md_table_html(md)
  if type(md) ~= "string" or md == "" then return "" end
  local out = {"<table>"}
  local row, left = 0, {}
  for line in md:gmatch("[^\n]+") do
    if line:match("^|") then
      row = row + 1
      if row == 2 then -- the separator: "---" columns are text, read from the left
        local i = 0
        for cell in line:sub(2, -2):gmatch("([^|]*)|?") do
          i = i + 1
          left[i] = i > 1 and cell:match("^%s*%-+%s*$") ~= nil or nil
        end
      else
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
  local n, compute = 0, 0
  for _, r in ipairs(type(s.records) == "table" and s.records or {}) do
    n = n + 1
    if finite(r.elapsed_s) then compute = compute + r.elapsed_s end
  end
  out[#out + 1] = string.format("<tr><th>records</th><td>%d (results/%s, listed in doc/results.md)</td></tr>", n, esc(s.part or "?"))
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
-- per-part texts: what was measured, then what this run's numbers say

local parts = {}

-- The statement of a paired comparison over seeds (study.stats_lines) as
-- sentences, or nil without stats.
local function stats_words(st, what, out)
  if type(st) ~= "table" or not st.verdict then return out end
  for _, l in ipairs(study.stats_lines(st, what, true)) do out[#out + 1] = l .. "." end
  return out
end

local function ci(c, f)
  if type(c) ~= "table" or not finite(c[1]) then return "" end
  return string.format(" (95%% t interval " .. f .. " to " .. f .. ")", c[1], c[2])
end

parts.part1 = {
  title = "Part 1: self-value bias of an untrained model",
  command = "xsa scripts/part1_bias.lua",
  paper = "the diagnostic of the paper's Figure 1 (attention similarity bias), at toy scale on an untrained 2-layer model",
  about = "A freshly initialised model (standard attention) reads the validation batches of the first 80,000 " ..
    "tokens of TinyStories. For every layer the probe averages three quantities over heads, tokens and batches: " ..
    "how similar the value vectors of different tokens are (mean cos(v_i, v_j), i ≠ j), how much attention a " ..
    "token pays to itself (mean a_ii), and how closely a token's attention output y_i = Σ_j a_ij v_j points " ..
    "along its own value vector (mean cos(y_i, v_i)). The last one is the self-value component that XSA removes.",
  explain = {"Why it matters: every block adds the attention output to the residual stream, and that stream " ..
    "already carries the token's own representation on to the MLP and the next layer. When the attention output " ..
    "leans towards the token's own value, attention partly repeats what the residual path delivers anyway, and " ..
    "that share of its output adds nothing new. Two ingredients produce the lean, and the probe shows both: values " ..
    "within a sequence point in similar directions, and every token keeps some attention weight on itself."},
  words = function(s)
    local r = s.result or {}
    local out = {}
    for l, m in ipairs(r.layers or {}) do
      out[#out + 1] = string.format("Layer %d: mean cos(v_i,v_j) = %s, mean a_ii = %s, mean cos(y_i,v_i) = %s at positions ≥ 1 (%s over all positions).",
        l, f4(m.value_cos), f4(m.self_attn), f4(m.pre_cos_pos1), f4(m.pre_cos))
    end
    if r.probe_batches then
      out[#out + 1] = string.format("Measured on %d %s batches (%d tokens).", r.probe_batches,
        r.split == "val" and "validation" or "training", r.tokens or 0)
    end
    return out
  end,
}

parts.part2 = {
  title = "Part 2: the geometry of the projection",
  command = "xsa scripts/part2_geometry.lua --animate",
  paper = "the change itself, the paper's Algorithm 1",
  about = "XSA takes each token's attention output Y, finds its component along the token's own value " ..
    "vector V (α = Y·V/|V|) and subtracts λ times it: Z = Y − λ α V/|V|. With λ = 0 this is standard " ..
    "attention (Z = Y); with λ = 1 nothing of Z points along V (Z ⟂ V). The picture draws one such token " ..
    "in two dimensions.",
  explain = {"The change to the code is two lines between the attention and the output projection, per head:",
    {code = "Y  = attention(Q, K, V)            -- as in SA\n" ..
      "Vn = V / |V|                       -- line 1: each token's own value, unit length\n" ..
      "Z  = Y - lambda * (Y . Vn) * Vn    -- line 2: drop Y's component along it\n" ..
      "out = Z W_o                        -- SA projects Y instead"},
    "At λ = 1, Z is orthogonal to V for every token and head exactly, by construction, not approximately; " ..
    "a λ between 0 and 1 removes that fraction of the component. The token's own information is not lost: the " ..
    "residual connection still carries it forward; only the attention output stops repeating it. XSA adds no " ..
    "parameter, and its cost is one dot product and one subtraction per token and head."},
  words = function(s)
    local r = s.result or {}
    return {string.format("For the vectors drawn, cos(Y, V) = %s; at λ = %s, cos(Z, V) = %s.", f4(r.cos_yv),
      tostring(r.lambda), f4(r.cos_zv))}
  end,
}

parts.part3 = {
  title = "Part 3: paired training of SA and XSA",
  command = "xsa scripts/part3_train.lua",
  paper = "the training comparison of the paper's Figure 3, at toy scale",
  about = "Two models start from the same initial weights: one with standard attention (SA), one with XSA. " ..
    "At every step both see the same batch and take an AdamW step, so a difference in loss comes from the " ..
    "attention alone. The curves show the mean training loss since the previous evaluation point and the " ..
    "validation loss on a fixed subset of validation batches; the last point of each validation curve is over " ..
    "the whole validation set and is the final value of the table. With --seeds N the pair is trained N times " ..
    "from independent initial weights and batch orders, and the improvement 100·(SA − XSA)/SA of each seed " ..
    "gives the verdict with a 95% interval.",
  words = function(s)
    local r = s.result or {}
    local out = {}
    local runs = s.runs or {}
    if #runs > 1 then
      out[#out + 1] = string.format("%d seeds (%s), one paired run each.", #runs, table.concat(s.seeds or {}, ", "))
      for _, x in ipairs(runs) do
        out[#out + 1] = string.format("Seed %d: %s (improvement %s).", x.seed,
          compare(x.sa_val, x.xsa_val, "final validation loss"), pct(x.improvement_pct))
      end
      stats_words(s.stats, "final val loss", out)
      if finite(s.train_s) then out[#out + 1] = string.format("Training took %.0f s over the %d paired runs.", s.train_s, #runs) end
      return out
    end
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
      out[#out + 1] = "One seed cannot give an interval: a single run at this scale can favour either model. " ..
        "Run with --seeds 5 for the verdict with a 95% interval."
    end
    return out
  end,
}

parts.part4 = {
  title = "Part 4: sequence length",
  command = "xsa scripts/part4_seqlen.lua",
  paper = "the question of the paper's Figure 5 (does the gain grow with the sequence length?), at toy scale",
  about = "The paired training of part 3, repeated with a fresh pair of models for each sequence length " ..
    "(the window of text the model sees) and each seed. The figure shows the final validation loss of both " ..
    "models per length and XSA's improvement in percent (positive when XSA's loss is lower).",
  explain = {"The reasoning behind the question: with a longer window each token attends over more positions, " ..
    "so there is more room for the self-value lean to accumulate and more for XSA to remove. The paper reports " ..
    "the gain growing with length at 1.3B parameters; a 2-layer model on a small corpus may or may not show the " ..
    "same trend, and the intervals below say how much of any difference is beyond seed-to-seed noise."},
  words = function(s)
    local runs = (s.result or {}).runs or {}
    local out, better, clear = {}, 0, 0
    for _, r in ipairs(runs) do
      local st = r.stats
      if st and st.n and st.n > 1 then
        out[#out + 1] = string.format("seq_len %d: %s; XSA lower in %d of %d seeds.", r.seq_len, st.verdict,
          st.k_xsa_lower, st.n)
        if st.t_lo and (st.t_lo > 0 or st.t_hi < 0) then clear = clear + 1 end
      else
        out[#out + 1] = string.format("seq_len %d: %s.", r.seq_len, compare(r.sa_val, r.xsa_val, "final validation loss"))
      end
      if finite(r.xsa_val) and finite(r.sa_val) and r.xsa_val < r.sa_val then better = better + 1 end
    end
    if #runs > 0 then
      local st = runs[1].stats
      if st and st.n and st.n > 1 then
        out[#out + 1] = string.format("The 95%% interval of the mean improvement excludes 0 at %d of the %d lengths.",
          clear, #runs)
      else
        out[#out + 1] = string.format("XSA's loss is lower at %d of the %d lengths in this run (one seed: no interval).",
          better, #runs)
      end
    end
    return out
  end,
}

parts.part5 = {
  title = "Part 5: the bias after training",
  command = "xsa scripts/part5_bias_trained.lua --train",
  paper = "the diagnostic of the paper's Figure 1 again, now after training",
  about = "The probe of part 1 applied to the trained models of part 3 (every seed) and to their shared initial " ..
    "weights, on the validation batches of the first 80,000 tokens. A fourth metric, the mean cos(z_i, v_i) " ..
    "after the projection, shows what is left of the self-value component in what each layer passes on " ..
    "(for SA, z = y). \"Bias removed\" is 100·(|pre| − |post|)/|pre|. Both cosines are averaged over positions " ..
    "≥ 1: at position 0 a token attends only to itself, so y_0 = v_0 (cosine 1) and z_0 is rounding residue; " ..
    "including it would raise the pre-projection mean by about 1/64 of the gap to 1 and make \"bias removed\" " ..
    "partly float noise.",
  explain = {"What to look for: the projection does not stop the alignment from forming inside the raw attention " ..
    "output Y (a trained XSA model can even align Y with v more strongly than SA does, since whatever forms there " ..
    "is removed before it leaves the layer); it removes it from Z, the output the rest of the network sees."},
  words = function(s)
    local out = {}
    local names = {untrained = "the untrained model", sa = "trained SA", xsa = "trained XSA"}
    local by = {}
    local n = #(s.runs or {})
    for _, m in ipairs(s.means or {}) do
      by[m.model] = m
      out[#out + 1] = string.format("For %s, averaged over layers (positions ≥ 1%s), cos(y_i,v_i) before the projection is %s%s and cos(z_i,v_i) after it is %s%s (%s of the bias removed); over all positions %s and %s.",
        names[m.model] or m.model, n > 1 and string.format(", mean over %d seeds", n) or "", f4(m.pre), ci(m.pre_ci, "%.4f"),
        f4(m.post), ci(m.post_ci, "%.4f"), finite(m.removed_pct) and string.format("%.1f%%", m.removed_pct) or "n/a",
        f4(m.pre_all), f4(m.post_all))
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
  paper = "not in the paper: an extension (partial XSA, 0 < λ < 1)",
  about = "One initialisation per seed for every λ; each XSA(λ) model is trained against its own SA baseline " ..
    "cloned from that initialisation, on the same batches. The left panel is the paired improvement in percent " ..
    "of the final validation loss; the right panel the remaining self-value bias (mean cos(z_i, v_i) over " ..
    "layers and positions ≥ 1, on 3 validation batches of the first 80,000 tokens) of the trained models. " ..
    "Each λ's trained XSA model and the seed's SA baseline are kept as checkpoints.",
  explain = {"The question: is removing the whole component (λ = 1) best, or does keeping part of it help? " ..
    "Any λ lowers the post-projection alignment roughly in proportion; whether the loss follows is what the " ..
    "left panel measures."},
  words = function(s)
    local runs = (s.result or {}).runs or {}
    local out = {}
    local best
    for _, r in ipairs(runs) do
      local st = r.stats
      if st and st.n and st.n > 1 then
        out[#out + 1] = string.format("λ = %g: %s; XSA lower in %d of %d seeds; XSA mean cos(z,v) %s%s (SA baseline %s).",
          r.lambda, st.verdict, st.k_xsa_lower, st.n, f4(r.xsa_post_cos), ci(r.xsa_post_cos_ci, "%.4f"), f4(r.sa_post_cos))
      else
        out[#out + 1] = string.format("λ = %g: improvement %s, XSA mean cos(z,v) %s (SA baseline %s).", r.lambda,
          pct(r.improvement_pct), f4(r.xsa_post_cos), f4(r.sa_post_cos))
      end
      if finite(r.improvement_pct) and (not best or r.improvement_pct > best.improvement_pct) then best = r end
    end
    if best then
      local st = best.stats
      out[#out + 1] = string.format("The largest %s paired improvement in this sweep is %s at λ = %g%s.",
        st and st.n and st.n > 1 and "mean" or "", pct(best.improvement_pct), best.lambda,
        st and st.t_lo and string.format(" (95%% t interval %+.2f to %+.2f)", st.t_lo, st.t_hi) or " (one seed: no interval)")
    end
    return out
  end,
}

parts.part7 = {
  title = "Part 7: does the verdict survive a standard training recipe?",
  command = "xsa scripts/part7_recipe.lua",
  paper = "not in the notebook: the same pair under the recipe small GPTs are usually trained with",
  about = "Part 3's pair (same model, data and 300 steps) under the notebook's constant learning rate and under " ..
    "a linear warmup followed by cosine decay to a tenth of the peak. The constant-rate runs are part 3's own. " ..
    "Every endpoint of doc/study.md (final and mean validation loss, the steps at which fixed losses are " ..
    "reached, the plateau-escape step) is compared per recipe, paired by seed.",
  explain = {"Why ask: at this scale standard attention sits on a loss plateau near the unigram entropy and " ..
    "leaves it at a step that depends on small differences. A warmup changes the first steps of Adam; if the " ..
    "plateau and its seed-to-seed spread shrink under it, the notebook's verdict may be a property of its recipe."},
  words = function(s)
    local out = {}
    for _, key in ipairs{"constant", "cosine"} do
      local r = (s.recipes or {})[key]
      for _, e in ipairs(r and r.endpoints or {}) do
        if e.stats and e.stats.verdict then out[#out + 1] = string.format("%s, %s: %s.", r.label, e.label, e.stats.verdict) end
      end
    end
    return out
  end,
}

-- Why XSA could help, in a few sentences (the report's closing section).
M.why = {"Why it could work: the residual connection already hands each token's own representation to the MLP " ..
  "and the next layer. Restricting the attention output to what is orthogonal to the token's own value makes " ..
  "attention contribute only what the residual path does not already carry: context from other tokens. The split " ..
  "is a division of labour (attention for context, the MLP for the token itself) obtained by removing a redundant " ..
  "direction, not by adding capacity, which is why it costs no parameter.",
  "Whether that shows up as a lower loss in models this small is an empirical question: the verdicts above, with " ..
  "their intervals over seeds, are the answer this study gives."}

M.parts = parts
M.order = {"part1", "part2", "part3", "part4", "part5", "part6", "part7"}

local css = [[
body{font-family:"DejaVu Sans",Helvetica,Arial,sans-serif;max-width:1150px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.7em}h2{border-bottom:2px solid #2471A3;padding-bottom:.2em;margin-top:2em}
.fig{width:100%;height:auto;display:block}figure{margin:1em 0}figcaption{font-size:.8em;color:#777}
table{border-collapse:collapse;margin:.8em 0;font-size:.92em}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}table.cfg td{text-align:left;font-family:monospace}
.sa{color:#E74C3C;font-weight:bold}.xsa{color:#2471A3;font-weight:bold}.missing{color:#a00}
.numbers li{margin:.2em 0}.paper{color:#555;font-style:italic}.explain{background:#f7f9fb;border-left:3px solid #2471A3;padding:.3em .7em}.cap{color:#333;font-size:1.1em}pre{background:#f4f4f4;padding:.5em;overflow-x:auto}table.samples td{text-align:left;vertical-align:top;max-width:30em}code{background:#f4f4f4;padding:0 .2em}details{margin:.6em 0}
]]

-- Builds the HTML. o: {out = results folder, plots = figures folder,
-- folder_flags = text added to the commands of missing parts (optional),
-- claims = {lines = {...}, table = markdown} (optional, before the closing)}.
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
      if part.paper then body[#body + 1] = '<p class="paper">Reproduces: ' .. esc(part.paper) .. ".</p>" end
      body[#body + 1] = "<p>" .. esc(part.about) .. "</p>"
      for _, e in ipairs(part.explain or {}) do
        if type(e) == "table" then
          body[#body + 1] = "<pre><code>" .. esc(e.code) .. "</code></pre>"
        else
          body[#body + 1] = '<p class="explain">' .. esc(e) .. "</p>"
        end
      end
      local ok, words = pcall(part.words, s)
      if ok and #words > 0 then
        local li = {}
        for i, w in ipairs(words) do li[i] = "<li>" .. esc(w) .. "</li>" end
        body[#body + 1] = '<ul class="numbers">' .. table.concat(li) .. "</ul>"
      elseif not ok then
        info.warnings[#info.warnings + 1] = key .. ": " .. tostring(words)
      end
      for _, f in ipairs(type(s.figures) == "table" and s.figures or {}) do
        local mine, why = own_figure(f, o.plots)
        if mine then
          body[#body + 1] = figure_html(mine, info.warnings, o.published)
        else
          info.warnings[#info.warnings + 1] = key .. ": " .. why .. " (refused)"
        end
      end
      body[#body + 1] = md_table_html(s.table)
      -- part 3's checkpoints continue three fixed prompts (lua/xsa/samples.lua)
      if key == "part3" and not o.published then body[#body + 1] = require("xsa.samples").part3_html(s, o.out) end
      body[#body + 1] = config_html(s, o.published)
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
      "results of the study's scripts as they were last run: every sentence in the lists of results is computed " ..
      "from those numbers (the shaded paragraphs explain the idea of each part). A verdict over seeds is decided " ..
      "by the 95% t interval of the mean improvement 100·(SA − XSA)/SA: \"inconclusive\" when it contains 0. " ..
      'Colours: <span class="sa">SA red</span>, <span class="xsa">XSA blue</span>.</p>',
    o.published and ("<p>Generated by <code>make results</code> from the study's record (<code>results/</code>, " ..
      "one file per finished run; <code>doc/results.md</code> lists them with their provenance). Text samples of " ..
      "the trained models need checkpoints, which records do not hold: <code>xsa scripts/part3_train.lua</code> " ..
      "trains them and its report shows them.</p>") or
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
  if o.claims then -- published: the claims table (scripts/claims.lua), computed by the caller
    body[#body + 1] = '<h2 id="claims">The claims, tested</h2>'
    for _, l in ipairs(o.claims.lines or {}) do body[#body + 1] = "<p>" .. esc(l) .. "</p>" end
    body[#body + 1] = md_table_html(o.claims.table)
  end
  body[#body + 1] = '<h2 id="why">Why it works, and what is measured here</h2>'
  for _, w in ipairs(M.why) do body[#body + 1] = "<p>" .. esc(w) .. "</p>" end
  local html = table.concat(head, "\n") .. "\n" .. table.concat(body, "\n") .. "\n</body></html>\n"
  return html, info
end

-- Builds and writes o.output atomically; returns the path and info.
function M.write(o)
  require("xsa.options").check("report.write", o, {"out", "plots", "output", "folder_flags"})
  local xsa = xsa_lib()
  local html, info = M.build(o)
  xsa.write_file_atomic(o.output, html)
  return o.output, info
end

return M
