-- parts.lua: the study's registry, its parts in order. run_all runs them,
-- the report shows their sections and make results (results.lua) publishes
-- them, in this order. Adding a part: its script here in scripts/ (one file
-- ending in `return xsa.experiment.part(decl, ...)`) and one line below; a
-- claim it tests: `claim = {text =, short =, rows =}` in its report section
-- (scripts/claims.lua numbers them in this order; the registered claims'
-- table opens doc/results.md, the README's results and the report, the
-- table of those asked after the fact follows).
--
--   local parts = dofile("scripts/parts.lua")
--   for _, p in ipairs(parts.load()) do print(p.name, p.script, p.title) end
local xsa = xsa or require "xsa"
xsa.sys.library_file()

local LIST = {
  "part1_bias.lua",
  "part2_geometry.lua",
  "part3_train.lua",
  "part4_seqlen.lua",
  "part5_bias_trained.lua",
  "part6_lambda_sweep.lua",
  "part7_recipe.lua",
  "part8_length.lua",
  "part9_size.lua",
  "part10_sensitivity.lua",
}

local M = {}
local DIR = xsa.sys.abspath((debug.getinfo(1, "S").source:match("^@(.-)[^/]*$") or "") .. ".") .. "/" -- this file's folder
M.dir = DIR

-- The report's closing section: why XSA could help, in a few sentences.
M.closing = {title = "Why it works, and what is measured here",
  "Why it could work: the residual connection already hands each token's own representation to the MLP " ..
  "and the next layer. Restricting the attention output to what is orthogonal to the token's own value makes " ..
  "attention contribute only what the residual path does not already carry: context from other tokens. The split " ..
  "is a division of labour (attention for context, the MLP for the token itself) obtained by removing a redundant " ..
  "direction, not by adding capacity, which is why it costs no parameter.",
  "Whether that shows up as a lower loss in models this small is an empirical question: the verdicts above, with " ..
  "their intervals over seeds, are the answer this study gives."}

-- The parts' declarations in order (xsa.experiment.declaration), each with
-- .script (its file name) and .path.
function M.load()
  local out = {}
  for i, file in ipairs(LIST) do
    local d = xsa.experiment.declaration(DIR .. file)
    d.script, d.path = file, DIR .. file
    out[i] = d
  end
  return out
end

-- Whether declaration d has the flag `name` (run_all passes a part the
-- shared flags it has; make results asks parts with records for them).
function M.has(d, name)
  for _, o in ipairs(d.options or {}) do if o[1] == name then return true end end
  return false
end

-- The report's sections in order (xsa.report.build): each part's `report`,
-- a table or the file (relative to this folder) that returns one, keyed by
-- the part's name; the command that produces it defaults to its script.
function M.sections(decls)
  local out = {}
  for i, d in ipairs(decls or M.load()) do
    local r = d.report or {}
    if type(r) == "string" then r = dofile(DIR .. r) end
    r.key, r.title = d.name, r.title or d.title
    r.command = r.command or ("xsa scripts/" .. d.script)
    out[i] = r
  end
  return out
end

return M
