-- pilot.lua: the registered pilot of parts 8 and 9 (doc/preregistration.md):
-- stage 1 (--stage lr), the peak-lr sweep per model size (SA alone at
-- seq_len 256, seed 1000, warmup + cosine), extended by a factor of 2 when
-- the best lr sits at an end of the list; stage 2 (--stage pairs), SA/XSA
-- pairs at the chosen lrs in the pilot's cells, whose spread sets the grid's
-- seeds. Records go to results/pilot/; it prints the chosen lrs and N.
--   xsa scripts/pilot.lua --stage lr --jobs 2      # again until every size has its lr
--   xsa scripts/pilot.lua --stage pairs --jobs 2
local xsa = xsa or require "xsa"
local study, fmt = xsa.study, string.format
local DIR = (debug.getinfo(1, "S").source:match("^@(.-)[^/]*$") or "./")
local plan, grid, V = dofile(DIR .. "plan.lua"), dofile(DIR .. "grid.lua"), dofile(DIR .. "verdicts.lua")

local SKIP = {"steps", "seq-len", "batch", "lr", "weight-decay", "max-tokens", "val-frac", "eval-every", "eval-batches",
  "lambda", "n-layer", "d-model", "n-head", "seed", "seeds", "data-seed", "init-seed", "data-parallel", "precision",
  "resume", "save-every", "quick"}
local P = {name = "pilot", title = "Pilot of parts 8 and 9",
  summary = "The registered pilot of parts 8 and 9: --stage lr sweeps the peak lr per model size (SA alone);\n" ..
    "--stage pairs trains SA/XSA pairs at the chosen lrs. Writes records to results/pilot/ and prints\n" ..
    "the chosen lr per size and the grid's number of seeds.",
  options = study.options({}, {{"stage", "string", "lr", "lr (the sweep) or pairs (the spread)", one_of = {"lr", "pairs"}}},
    SKIP)}

local function size_cell(size) return plan.cell[size.key .. "-T" .. plan.size_length] end

-- Stage 1's units: every lr the sweep has reached so far (V.lr_list says
-- which; a rerun adds the extensions it asks for). The registered lrs come
-- first and the extensions after them: a --jobs worker lists the units again
-- in its own process, after records may have landed, and must find the
-- same unit at the same index.
local function lr_units(ex)
  local units, later = {}, {}
  for _, size in ipairs(plan.sizes) do
    local c, registered = size_cell(size), {}
    for _, lr in ipairs(plan.lr_sweep.lrs) do registered[lr] = true end
    for _, lr in ipairs(V.lr_list(ex.opts.results, size)) do
      local list = registered[lr] and units or later
      list[#list + 1] = {key = fmt("%s lr %g", size.key, lr), run = function()
        local cfg = grid.config(plan, "pilot", c, plan.lr_sweep.seed, lr, {"sa"})
        return {size = size.key, lr = lr, r = (grid.group(ex, cfg, c, true))}
      end}
    end
  end
  for _, u in ipairs(later) do units[#units + 1] = u end
  return units
end

local function pair_units(ex)
  local units = {}
  for _, key in ipairs(plan.pilot.cells) do
    local c = plan.cell[key]
    local lr = V.chosen_lr(ex.opts.results, c.size)
    if not lr then ex:fail("pilot: the lr sweep of " .. c.size .. " is not finished: run --stage lr first") end
    for _, seed in ipairs(plan.pilot.seeds) do
      units[#units + 1] = {key = fmt("%s seed %d", key, seed), run = function()
        local cfg = grid.config(plan, "pilot", c, seed, lr, {"sa", "xsa"})
        return {cell = key, seed = seed, r = (grid.group(ex, cfg, c, false))}
      end}
    end
  end
  return units
end

function P.units(ex) return ex.opts.stage == "lr" and lr_units(ex) or pair_units(ex) end

function P.main(ex)
  for _, size in ipairs(plan.sizes) do
    local lr, why = V.chosen_lr(ex.opts.results, size.key)
    print(fmt("%s: %s", size.key, lr and fmt("peak lr %g", lr) or why))
  end
  if ex.opts.stage == "pairs" then
    local n, how = V.seeds_rule(ex.opts.results)
    print(n and fmt("grid seeds N = %d (%s)", n, how) or how)
  end
end

return xsa.experiment.part(P, ...)
