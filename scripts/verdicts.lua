-- verdicts.lua: the registered decisions of parts 8 and 9, computed exactly
-- as doc/preregistration.md states them, from records alone: the lr the
-- sweep chooses per size, the grid's number of seeds from the pilot, and the
-- family's three verdicts with Holm's correction.
--
--   local V = dofile(dir .. "verdicts.lua")
--   local lr = V.chosen_lr("results", "2x128")       -- nil, why while the sweep is open
--   local n, how = V.seeds_rule("results")
--   local fam = V.family("results")                  -- fam.rows[i].verdict, .p_holm, .lo, .hi
-- Not here: training (grid.lua), figures and tables (the parts).
local xsa = xsa or require "xsa"
xsa.sys.library_file() -- run alone, it says what it is
local stats, record = xsa.stats or require "xsa.stats", require "xsa.record"
local DIR = (debug.getinfo(1, "S").source:match("^@(.-)[^/]*$") or "./")
local plan, grid = dofile(DIR .. "plan.lua"), dofile(DIR .. "grid.lua")

local M = {plan = plan}
local fmt = string.format

-- The recorded result of a group, or nil (several records of one key: the
-- chosen one, xsa.record's rule).
local function recorded(results, cfg, cell, with_lr)
  local recs = record.find(results, cfg.part, grid.name(cfg, cell, with_lr), cfg, grid.check)
  return recs[1] and recs[1].result
end
M.recorded = recorded

local function size_cell(key) return plan.cell[key .. "-T" .. plan.size_length] end

-- The sweep's lrs of a size so far: the registered list, extended by a
-- factor while the best recorded lr sits at an end (at most max_extensions).
-- Returns the list, and the SA final val loss per lr recorded (a table).
function M.lr_list(results, size)
  local key = type(size) == "table" and size.key or size
  local c, sw = size_cell(key), plan.lr_sweep
  local list, vals = {}, {}
  for i, lr in ipairs(sw.lrs) do list[i] = lr end
  for ext = 0, sw.max_extensions do
    local best
    for _, lr in ipairs(list) do
      if vals[lr] == nil then
        local r = recorded(results, grid.config(plan, "pilot", c, sw.seed, lr, {"sa"}), c, true)
        vals[lr] = r and r.runs[1].final_val or false
      end
      if not vals[lr] then return list, vals, false end
      if not best or vals[lr] < vals[best] then best = lr end
    end
    if ext == sw.max_extensions then return list, vals, true, best end
    if best == list[1] then table.insert(list, 1, best / sw.factor)
    elseif best == list[#list] then list[#list + 1] = best * sw.factor
    else return list, vals, true, best end
  end
end

-- The chosen peak lr of a size, or nil and why not yet.
function M.chosen_lr(results, key)
  local list, vals, done, best = M.lr_list(results, key)
  if done then return best, vals end
  local missing = {}
  for _, lr in ipairs(list) do if not vals[lr] then missing[#missing + 1] = fmt("%g", lr) end end
  return nil, "sweep open: no record yet for lr " .. table.concat(missing, ", ")
end

local function improvement(sa, x) return 100 * (sa - x) / sa end

-- The per-seed improvement % of a cell's pairs in folder `part` over `seeds`
-- (a list), keyed by seed; the seeds without a record are listed apart.
function M.cell_gains(results, part, cell, seeds, lr)
  local gains, gaps, missing = {}, {}, {}
  for _, s in ipairs(seeds) do
    local r = recorded(results, grid.config(plan, part, cell, s, lr, {"sa", "xsa"}), cell, false)
    if r then
      local f, g = grid.finals(r, {"sa", "xsa"})
      gains[s], gaps[s] = improvement(f.sa, f.xsa), g
    else
      missing[#missing + 1] = s
    end
  end
  return gains, gaps, missing
end

-- The grid's N from the pilot's pairs (P.seeds in plan.lua): N, how it came.
function M.seeds_rule(results)
  local ss, df = 0, 0
  for _, key in ipairs(plan.pilot.cells) do
    local c = plan.cell[key]
    local lr = M.chosen_lr(results, c.size)
    if not lr then return nil, "the lr sweep of " .. c.size .. " is not finished" end
    local g, _, missing = M.cell_gains(results, "pilot", c, plan.pilot.seeds, lr)
    if #missing > 0 then return nil, fmt("the pilot's %s lacks seeds %s", key, table.concat(missing, ", ")) end
    local xs = {}
    for _, s in ipairs(plan.pilot.seeds) do xs[#xs + 1] = g[s] end
    local m = stats.mean(xs)
    for _, x in ipairs(xs) do ss = ss + (x - m) ^ 2 end
    df = df + #xs - 1
  end
  local q = plan.seeds
  local s = math.sqrt(ss / df)
  local up = stats.sd_upper(s, df, q.upper)
  local n = math.max(q.min, stats.seeds_needed(up, q.half_width, q.level) or math.huge)
  local capped = n > q.max
  n = math.min(n, q.max)
  local half = stats.t_quantile(1 - (1 - q.level) / 2, n - 1) * up / math.sqrt(n)
  return n, fmt("pilot sd %.2f points (df %d), %d%% upper limit %.2f; %s; expected half-width %.2f points",
    s, df, math.floor(q.upper * 100 + 0.5), up, capped and fmt("capped at %d by the budget", q.max) or "uncapped", half)
end

M.slope = stats.slope

-- Per seed, the three family statistics from gains[cell key][seed]:
-- gain (mean over the cells), length and size slopes.
function M.per_seed(gains, seeds)
  local out = {gain = {}, length = {}, size = {}}
  local lx, sx = {}, {}
  for i, c in ipairs(plan.part8) do lx[i] = math.log(c.seq_len, 2) end
  for i, c in ipairs(plan.part9) do sx[i] = math.log(c.params, 2) end
  for _, s in ipairs(seeds) do
    local all, n = 0, 0
    for _, c in ipairs(plan.cells) do all, n = all + gains[c.key][s], n + 1 end
    local ly, sy = {}, {}
    for i, c in ipairs(plan.part8) do ly[i] = gains[c.key][s] end
    for i, c in ipairs(plan.part9) do sy[i] = gains[c.key][s] end
    out.gain[#out.gain + 1], out.length[#out.length + 1], out.size[#out.size + 1] = all / n, stats.slope(lx, ly), stats.slope(sx, sy)
  end
  return out
end

-- The registered verdicts over per-seed statistics `ps` (M.per_seed):
-- rows in the family's order with mean, 95% t interval, raw and
-- Holm-adjusted p and the verdict.
function M.decide(ps)
  local rows, raw = {}, {}
  for i, h in ipairs(plan.family) do
    local xs = ps[h.key]
    local lo, hi = stats.t_interval(xs, 0.95)
    rows[i] = {key = h.key, claim = h.claim, n = #xs, mean = stats.mean(xs), lo = lo, hi = hi, p = stats.paired_t_p(xs)}
    raw[i] = rows[i].p
  end
  local adj = plan.correction == "holm" and stats.holm(raw) or raw
  for i, r in ipairs(rows) do
    r.p_holm = adj[i]
    local sig = adj[i] < plan.alpha
    r.verdict = not sig and "not decided" or ((r.mean > 0) == (plan.family[i].sign > 0) and "supported" or "contradicted")
  end
  return rows
end

-- The family from the records: {rows = M.decide's, n = N, seeds =, gains =,
-- gaps =, lrs =} when every cell has its N seeds; else {incomplete = text,
-- have = {cell key = seeds recorded}} (the stopping rule: no verdict before N).
-- Once N is fixed, recorded and total count the groups over all cells.
function M.family(results)
  local n, how = M.seeds_rule(results)
  if not n then return {incomplete = "the pilot is not finished: " .. how} end
  local seeds, gains, gaps, have, lrs = {}, {}, {}, {}, {}
  for s = 0, n - 1 do seeds[#seeds + 1] = s end
  local short, recorded_n = {}, 0
  for _, c in ipairs(plan.cells) do
    lrs[c.size] = lrs[c.size] or M.chosen_lr(results, c.size)
    if not lrs[c.size] then return {incomplete = "the lr sweep of " .. c.size .. " is not finished"} end
    local g, gp, missing = M.cell_gains(results, "grid", c, seeds, lrs[c.size])
    gains[c.key], gaps[c.key], have[c.key] = g, gp, n - #missing
    recorded_n = recorded_n + n - #missing
    if #missing > 0 then short[#short + 1] = fmt("%s %d of %d", c.key, n - #missing, n) end
  end
  local base = {n = n, how = how, seeds = seeds, gains = gains, gaps = gaps, have = have, lrs = lrs,
    recorded = recorded_n, total = n * #plan.cells}
  if #short > 0 then
    base.incomplete = "seeds recorded: " .. table.concat(short, ", ") .. " (no verdict before all N: the stopping rule)"
    return base
  end
  base.rows = M.decide(M.per_seed(gains, seeds))
  return base
end

return M
