-- claims.lua: the notebook's three claims, and part 7's, tested against the
-- study's summaries (as `make results` builds them from the records). Each
-- claim is tested on every endpoint the part's summary can give (doc/study.md,
-- "Endpoints") and gets a word: "supported" when the 95% t interval lies on
-- the claim's side of 0, "contradicted" when it lies on the other side,
-- "inconclusive at N" otherwise, with the seeds a decision would need at the
-- spread observed. Used by scripts/results.lua; not a part and trains nothing.
--
--   local claims = dofile(xsa.sys.root() .. "/scripts/claims.lua")
--   local rows = claims.rows(summaries)   -- summaries: {part3 = ..., part4 = ...}
local xsa = xsa or require "xsa"
local stats, endpoints = xsa.stats, xsa.endpoints

local M = {}

-- Each claim: what it says, and its short name in the table.
M.CLAIMS = {
  part3 = "1. XSA beats SA at the notebook's scale (part 3: seq_len 64, 300 steps, constant lr)",
  part4 = "2. XSA's gain grows with the sequence length (part 4: seq_len 64 to 256, 500 steps)",
  part6 = "3. λ = 0.5 gives the largest gain (part 6: the λ sweep)",
  part7 = "4. XSA still beats SA under the usual recipe, linear warmup then cosine decay (part 7)",
}
M.SHORT = {part3 = "1. XSA beats SA", part4 = "2. gain grows with seq_len", part6 = "3. λ = 0.5 is best",
  part7 = "4. holds under warmup + cosine"}

local function finite(x) return xsa.numbers.finite(x) end

-- One row: the claim's number d per seed (positive: for the claim), its
-- unit, and the half-width a decision is asked at.
local function test(claim, endpoint, d, unit, half_width)
  local row = {claim = claim, endpoint = endpoint, n = #d, unit = unit}
  if #d < 2 then
    row.word = #d == 1 and "one seed: no interval" or "no records yet"
    return row
  end
  row.mean, row.sd = stats.mean(d), stats.sd(d)
  row.lo, row.hi = stats.t_interval(d, 0.95)
  row.word = row.lo > 0 and "supported" or row.hi < 0 and "contradicted" or string.format("inconclusive at %d", #d)
  row.half_width, row.need = half_width, stats.seeds_needed(row.sd, half_width, 0.95)
  return row
end

local UNITS = {loss = {"points", 1}, step = {"steps", 20}}

-- A row from a paired endpoint statistic (the d it already holds).
local function from_stats(claim, label, kind, st)
  local u = UNITS[kind] or UNITS.loss
  local row = test(claim, label, st and st.d or {}, u[1], u[2])
  return row
end

-- Claim 1 (and 4): every endpoint of the part's paired runs.
local function endpoint_rows(claim, eps, out)
  for _, e in ipairs(eps or {}) do
    local row = from_stats(claim, e.label, e.kind, e.stats)
    if not e.stats and e.note then row.word = e.note end -- e.g. neither model reached the level
    out[#out + 1] = row
  end
end

local function gain(sa, x) return 100 * (sa - x) / math.abs(sa) end

-- Least-squares slope of ys over xs.
local function slope(xs, ys)
  local mx, my, sxx, sxy = stats.mean(xs), stats.mean(ys), 0, 0
  for i = 1, #xs do
    sxx = sxx + (xs[i] - mx) ^ 2
    sxy = sxy + (xs[i] - mx) * (ys[i] - my)
  end
  return sxy / sxx
end

-- Claim 2: per seed, the slope of XSA's gain over log2(seq_len), in points
-- per doubling; only seeds with every length count (the summary has only
-- those). Final val loss and mean val loss (both from the recorded curves).
local function seqlen_rows(s, out)
  local runs = s and s.result and s.result.runs or {}
  local per = {} -- per[seed] = {x = {}, final = {}, mean = {}}
  for _, r in ipairs(runs) do
    for _, x in ipairs(r.seeds or {}) do
      local p = per[x.seed] or {x = {}, final = {}, mean = {}}
      per[x.seed] = p
      p.x[#p.x + 1] = math.log(r.seq_len, 2)
      p.final[#p.final + 1] = gain(x.sa_val, x.xsa_val)
      local ms, mx = x.steps and endpoints.mean_loss(x.steps, x.sa_curve), x.steps and endpoints.mean_loss(x.steps, x.xsa_curve)
      p.mean[#p.mean + 1] = (finite(ms) and finite(mx)) and gain(ms, mx) or 0 / 0
    end
  end
  local seeds = {}
  for seed in pairs(per) do seeds[#seeds + 1] = seed end
  table.sort(seeds)
  for _, key in ipairs{"final", "mean"} do
    local d = {}
    for _, seed in ipairs(seeds) do
      local p = per[seed]
      local ok = #p.x >= 2
      for _, v in ipairs(p[key]) do ok = ok and finite(v) end
      if ok then d[#d + 1] = slope(p.x, p[key]) end
    end
    local label = key == "final" and "final val loss: slope of the gain per doubling of seq_len" or
      "mean val loss: slope of the gain per doubling of seq_len"
    out[#out + 1] = test(M.CLAIMS.part4, label, d, "points per doubling", 1)
  end
end

-- Claim 3: per seed, the gain at λ = 0.5 minus the gain at each other λ;
-- the claim holds only if it holds against every other λ.
local function lambda_rows(s, out)
  local runs = s and s.result and s.result.runs or {}
  local half
  for _, r in ipairs(runs) do if r.lambda == 0.5 then half = r end end
  if not half then return end
  local at = {}
  for _, x in ipairs(half.seeds or {}) do at[x.seed] = gain(x.sa_val, x.xsa_val) end
  for _, r in ipairs(runs) do
    if r.lambda ~= 0.5 then
      local d = {}
      for _, x in ipairs(r.seeds or {}) do
        if at[x.seed] then d[#d + 1] = at[x.seed] - gain(x.sa_val, x.xsa_val) end
      end
      out[#out + 1] = test(M.CLAIMS.part6, string.format("final val loss: gain at λ = 0.5 minus gain at λ = %g", r.lambda),
        d, "points", 1)
    end
  end
end

-- Every claim's rows, in the order of the claims.
function M.rows(sums)
  local out = {}
  local s3 = sums.part3
  if s3 and s3.runs then
    local ok, eps = pcall(xsa.study.endpoint_stats, s3.runs, s3.seeds)
    endpoint_rows(M.CLAIMS.part3, ok and eps or {}, out)
  end
  seqlen_rows(sums.part4, out)
  lambda_rows(sums.part6, out)
  local r7 = sums.part7 and sums.part7.recipes and sums.part7.recipes.cosine
  if r7 then endpoint_rows(M.CLAIMS.part7, r7.endpoints, out) end
  return out
end

-- A claim's verdict: on its primary rows (the final val loss; for claim 3
-- every comparison, as "largest" must hold against each other λ)
-- contradicted if any is, supported if all are, else inconclusive; and how
-- its secondary endpoints came out.
function M.overall(rows, claim)
  local all, any_no, n, sec = true, false, 0, {n = 0, yes = 0, no = 0}
  for _, r in ipairs(rows) do
    if r.claim == claim and r.n > 0 then
      if r.endpoint:find("^final val loss") then
        n = n + 1
        if r.word == "contradicted" then any_no = true end
        if r.word ~= "supported" then all = false end
      else
        sec.n = sec.n + 1
        sec.yes = sec.yes + (r.word == "supported" and 1 or 0)
        sec.no = sec.no + (r.word == "contradicted" and 1 or 0)
      end
    end
  end
  if n == 0 then return "no records yet" end
  local word = any_no and "contradicted" or all and "supported" or "inconclusive"
  if sec.n == 0 then return word .. " on the final val loss" end
  return string.format("%s on the final val loss; secondary endpoints: supported on %d of %d, contradicted on %d",
    word, sec.yes, sec.n, sec.no)
end

local function num(x, unit)
  if not finite(x) then return "n/a" end
  return xsa.numbers.text(unit == "steps" and "%+.1f" or "%+.2f", x)
end

-- The claims as a markdown table (xsa.study.md_table).
function M.table(rows)
  local t = {}
  for _, r in ipairs(rows) do
    local short
    for k, c in pairs(M.CLAIMS) do if c == r.claim then short = M.SHORT[k] end end
    t[#t + 1] = {short or r.claim, r.endpoint, tostring(r.n), r.mean and (num(r.mean, r.unit) .. " " .. r.unit) or "n/a",
      r.lo and (num(r.lo, r.unit) .. " to " .. num(r.hi, r.unit)) or "n/a", r.word,
      r.need and string.format("%d (±%g %s)", r.need, r.half_width, r.half_width == 1 and r.unit:gsub("^points", "point") or r.unit) or "n/a"}
  end
  return xsa.study.md_table({"claim", "endpoint (positive: for the claim)", "seeds", "mean", "95% t interval",
    "verdict", "seeds for a decision"}, t, 2)
end

return M
