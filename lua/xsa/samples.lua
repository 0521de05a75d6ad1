-- xsa.samples: continuations of prompts by trained checkpoints, side by side
-- (the sample script prints them; a report section can show a paired run's).
--
--   local s = xsa.samples
--   local runs = s.compare({"cache/a.safetensors", "cache/b.safetensors"}, {"Once upon a time"},
--                          {max_new_tokens = 40, seed = 0})
--   print(s.side_by_side({{title = "SA", text = "..."}, {title = "XSA", text = "..."}}, 100))
--   s.model_name(model)   --> "SA" or "XSA (λ = 1)", from the model's own config
--
-- Non-goals: choosing prompts for you beyond the three fixed ones the report uses.
local M = {}

local core = require "xsa.core" -- the C functions and libraries

-- The report's fixed prompts and settings (sampled, seeded: the same text on every run).
M.PROMPTS = {"Once upon a time", "Tom and his dog", "The little girl was sad because"}
M.OPTIONS = {max_new_tokens = 40, temperature = 0.8, top_k = 40, seed = 0}

-- "SA", or "XSA (λ = 0.5)": the attention a checkpoint's metadata records.
function M.model_name(model)
  local c = model:config()
  if c.attention == "xsa" then return string.format("XSA (λ = %g)", c.lambda) end
  return "SA"
end

-- Width in columns of the display: $COLUMNS, else the terminal (stty), else 100.
function M.terminal_width()
  local n = tonumber(os.getenv("COLUMNS") or "")
  if n and n >= 20 then return math.floor(n) end
  local p = io.popen("stty size 2>/dev/null </dev/tty")
  if p then
    local out = p:read("a") or ""
    p:close()
    local cols = tonumber(out:match("^%s*%d+%s+(%d+)"))
    if cols and cols >= 20 then return cols end
  end
  return 100
end

-- Lines of at most `width` columns, breaking at spaces (long words are cut
-- between characters); newlines in the text start new lines. Widths are
-- display columns (xsa.text: wide characters 2, accents 0).
function M.wrap(text, width)
  return require("xsa.text").wrap(text, width)
end

-- cols: a list of {title=, text=}; total width of the display (columns).
-- Columns are separated by " | " and headed by their titles (cut to the
-- column); every cell is padded by display width, so the bars line up
-- whatever the characters (xsa.text's rule).
function M.side_by_side(cols, width)
  local text = require "xsa.text"
  if type(cols) ~= "table" or #cols == 0 then error("samples.side_by_side: expected a list of {title=, text=}", 2) end
  if not math.tointeger(width) then error("samples.side_by_side: width must be an integer", 2) end
  local n = #cols
  local w = math.max(10, (width - 3 * (n - 1)) // n)
  local wrapped, rows = {}, 0
  for i, c in ipairs(cols) do
    wrapped[i] = text.wrap(c.text, w)
    rows = math.max(rows, #wrapped[i])
  end
  local out, head, rule = {}, {}, {}
  for i, c in ipairs(cols) do
    head[i] = text.pad(text.cut(c.title, w), w)
    rule[i] = string.rep("-", w)
  end
  out[1] = (table.concat(head, " | "):gsub("%s+$", ""))
  out[2] = table.concat(rule, "-+-")
  for r = 1, rows do
    local cells = {}
    for i = 1, n do cells[i] = text.pad(wrapped[i][r] or "", w) end
    while #cells > 1 and not cells[#cells]:find("%S") do cells[#cells] = nil end
    out[#out + 1] = (table.concat(cells, " | "):gsub("%s+$", ""))
  end
  return table.concat(out, "\n")
end

-- Loads each checkpoint and continues each prompt with opts (model:generate's).
-- Returns {models = {{path=, name=, model=}}, prompts = {{prompt=, texts = {...},
-- tokens_per_s = {...}}}} (texts in the order of the paths).
function M.compare(paths, prompts, opts)
  local models = {}
  for i, p in ipairs(paths) do
    local m = core.gpt.load(p)
    models[i] = {path = p, name = M.model_name(m), model = m}
  end
  local res = {models = models, prompts = {}}
  for j, prompt in ipairs(prompts) do
    local row = {prompt = prompt, texts = {}, tokens_per_s = {}}
    for i, m in ipairs(models) do
      local o = {}
      for k, v in pairs(opts or {}) do o[k] = v end
      local text, _, info = m.model:generate(prompt, o)
      row.texts[i], row.tokens_per_s[i] = text, info.tokens_per_s
    end
    res.prompts[j] = row
  end
  return res
end

-- The SA and XSA checkpoints a summary's result names (a paired run's, e.g.
-- OUT/summary/NAME.json), continuing the report's fixed prompts; nil and a
-- reason when they are missing. A
-- summary is data (it may come from another machine): a checkpoint it names
-- is loaded only when it is a plain file name directly inside `out` (the
-- folder the summary was read from), never a path elsewhere.
function M.pair(summary, out)
  local ck = type(summary) == "table" and type(summary.result) == "table" and summary.result.checkpoints
  if not (type(ck) == "table" and ck.sa and ck.xsa) then return nil, "the summary names no checkpoints" end
  local sys = require "xsa.sys"
  for _, k in ipairs{"sa", "xsa"} do
    local p = ck[k]
    local dir, file = tostring(p):match("^(.*)/([%w_%.%-]+%.safetensors)$")
    if not (type(p) == "string" and file and out and dir == out) then
      return nil, "the summary names a checkpoint outside " .. tostring(out) .. " (refused)"
    end
    if not sys.exists(p) then return nil, "checkpoint " .. p .. " is missing" end
  end
  local ok, res = pcall(M.compare, {ck.sa, ck.xsa}, M.PROMPTS, M.OPTIONS)
  if not ok then return nil, tostring(res) end
  return res
end

local function esc(s)
  return (tostring(s):gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;"):gsub('"', "&quot;"))
end

-- The report's HTML of M.pair: the continuations of the SA and XSA
-- models, or a sentence saying why there are none.
function M.pair_html(summary, out)
  local res, why = M.pair(summary, out)
  local out = {"<h3>Text from the two trained models</h3>"}
  if not res then
    out[#out + 1] = '<p class="missing">No text samples: ' .. esc(why) .. ".</p>"
    return table.concat(out, "\n") .. "\n"
  end
  local o = M.OPTIONS
  out[#out + 1] = string.format("<p>Continuations of three fixed prompts (%d new tokens, temperature %g, " ..
    "top-k %d, seed %d: the same text on every run for the same checkpoints). The prompt is in bold.</p>",
    o.max_new_tokens, o.temperature, o.top_k, o.seed)
  out[#out + 1] = '<table class="samples"><tr><th>prompt</th>'
  for _, m in ipairs(res.models) do
    out[#out] = out[#out] .. '<th class="' .. (m.name == "SA" and "sa" or "xsa") .. '">' .. esc(m.name) .. "</th>"
  end
  out[#out] = out[#out] .. "</tr>"
  for _, p in ipairs(res.prompts) do
    local cells = {"<tr><td>" .. esc(p.prompt) .. "</td>"}
    for i = 1, #res.models do
      cells[#cells + 1] = "<td><b>" .. esc(p.prompt) .. "</b>" .. esc(p.texts[i]):gsub("\n", "<br>") .. "</td>"
    end
    out[#out + 1] = table.concat(cells) .. "</tr>"
  end
  out[#out + 1] = "</table>"
  return table.concat(out, "\n") .. "\n"
end

return M
