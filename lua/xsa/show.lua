-- xsa.show: what the REPL and the notebook print for a value. A training
-- result (xsa.train.pair, xsa.train.runs) or a paired summary is a plain table
-- (it is written to and read back from JSON records), so it has no
-- __tostring: shown as "table: 0x...", it says nothing. These are
-- recognised by their fields and shown as a short summary; help(r) names
-- what returned them and their fields (M.kind, used by xsa.help).
--
--   xsa.show.text(r)     -- "xsa.train.pair result: 60 steps; final val loss SA 6.2547, XSA 5.8809 (+5.97%) ..."
--   xsa.show.line(a, b)  -- what the REPL prints for a line's values: each text, tab-separated
--   xsa.show.kind(r)     -- {name = "xsa.train.pair", what = ..., fields = ...} or nil
--
-- Recognising reads fields with rawget and metatables with
-- debug.getmetatable: no metamethod of the value runs (as xsa.help). A
-- value with its own __tostring, and anything not recognised, shows as
-- tostring gives it.
-- Non-goals: pretty-printing arbitrary tables.
local M = {}

local function num(x) return type(x) == "number" and x == x and x ~= math.huge and x ~= -math.huge end
local function get(t, ...)
  for _, k in ipairs{...} do
    if type(t) ~= "table" then return nil end
    t = rawget(t, k)
  end
  return t
end
local function g4(x) return num(x) and string.format("%.4f", x) or "n/a" end

local KINDS = {
  {name = "xsa.train.pair", what = "result",
    test = function(v) return num(get(v, "sa", "final_val")) and num(get(v, "xsa", "final_val")) and type(rawget(v, "steps")) == "table" end,
    fields = "steps (the evaluation steps), sa / xsa: train, val (losses at those steps), final_val (the whole val set), " ..
      "step_loss; improvement_pct = 100 (SA - XSA) / SA of final_val; elapsed_s, eval_s, tokens_per_s, tokens, config, status",
    text = function(v)
      local steps, pct = rawget(v, "steps"), rawget(v, "improvement_pct")
      local last = rawget(steps, #steps)
      local t = string.format("xsa.train.pair result: %s steps; final val loss SA %s, XSA %s", num(last) and
        string.format("%d", last) or "?", g4(get(v, "sa", "final_val")), g4(get(v, "xsa", "final_val")))
      if num(pct) then t = t .. string.format(" (XSA %+.2f%%)", pct) end
      local s = rawget(v, "elapsed_s")
      if num(s) then t = t .. string.format("; %.1f s of training", s) end
      return t .. "  (help(r): its fields)"
    end},
  {name = "xsa.train.runs", what = "result",
    test = function(v) return type(rawget(v, "runs")) == "table" and num(get(v, "runs", 1, "final_val")) end,
    fields = "steps; runs[i]: label, train, val, final_val, step_loss; config.models[i]; elapsed_s, eval_s, tokens_per_s",
    text = function(v)
      local parts, runs = {}, rawget(v, "runs")
      for i = 1, math.min(#runs, 6) do
        parts[i] = string.format("%s %s", tostring(get(runs, i, "label") or i), g4(get(runs, i, "final_val")))
      end
      return string.format("xsa.train.runs result: %d runs; final val loss %s%s  (help(r): its fields)", #runs,
        table.concat(parts, ", "), #runs > 6 and ", ..." or "")
    end},
  {name = "xsa.stats.paired_summary", what = "summary",
    test = function(v) return type(rawget(v, "verdict")) == "string" and num(rawget(v, "n")) and type(rawget(v, "d")) == "table" end,
    fields = "n, d (per seed), mean, sd, t_lo, t_hi, boot_lo, boot_hi, p_t, p_wilcoxon, k_xsa_lower, k_xsa_better, " ..
      "seeds_needed, decimals, verdict",
    text = function(v) return "paired summary: " .. rawget(v, "verdict") .. "  (help(s): its fields)" end},
}

-- The kind of a value: {name = the function that returns it, what, fields}, or nil.
function M.kind(v)
  if type(v) ~= "table" or debug.getmetatable(v) ~= nil then return nil end
  for _, k in ipairs(KINDS) do
    local ok, yes = pcall(k.test, v)
    if ok and yes then return k end
  end
  return nil
end

-- The text of one value.
function M.text(v)
  local k = M.kind(v)
  if k then
    local ok, t = pcall(k.text, v)
    if ok then return t end
  end
  return tostring(v)
end

-- The texts of values, tab-separated (as print separates them).
function M.line(...)
  local parts = {}
  for i = 1, select("#", ...) do parts[i] = M.text((select(i, ...))) end
  return table.concat(parts, "\t")
end

return M
