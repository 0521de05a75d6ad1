-- claims.lua: the study's claims (each declared by its part's report section
-- in the registry, scripts/parts.lua: the notebook's three, part 7's, and
-- the paper's three that parts 8 and 9 registered), tested against the
-- study's summaries (as `make results` builds them from the records). A
-- claim asked after the fact is tested on every endpoint the part's summary
-- can give (doc/study.md, "Endpoints") and gets a word: "supported" when the
-- 95% t interval lies on the claim's side of 0, "contradicted" when it lies
-- on the other side, "inconclusive at N" otherwise, with the seeds a
-- decision would need at the spread observed; Holm's correction runs over
-- all of their tests. A registered claim keeps its plan's endpoint, test,
-- correction and words (scripts/verdicts.lua decides it). Used by
-- scripts/results.lua; a library, not a script: the claims' tables are in
-- doc/results.md, the README and results/report.html (make results).
--
--   local claims = dofile(xsa.sys.root() .. "/scripts/claims.lua")
--   local rows = claims.rows(summaries)   -- summaries: {part3 = ..., part4 = ...}
--   print(claims.registered_meaning(rows)); print(claims.registered_table(rows))
--   print(claims.meaning(rows)); print(claims.table(rows))
local xsa = xsa or require "xsa"
xsa.sys.library_file()
local stats, endpoints = xsa.stats, xsa.endpoints

local M = {}
local DIR = (debug.getinfo(1, "S").source:match("^@(.-)[^/]*$") or "./")

-- The claims come from the registry (scripts/parts.lua): a part's report
-- section may declare `claim = {text =, short =, rows = function(summary,
-- claims, text) -> rows}`, or several as `claims = {{key =, text =, ...}, ...}`
-- (parts 8 and 9 share a registered family); claims are numbered in the
-- registry's order, so a new part's claim joins the table by declaring one.
-- M.CLAIMS[key] and M.SHORT[key] are the numbered texts, keyed by the part's
-- name (PART.KEY for one of several).
local function declared(sections)
  local list, long, short = {}, {}, {}
  for _, sec in ipairs(sections) do
    local several = type(sec.claims) == "table" and sec.claims or {sec.claim}
    for _, c in ipairs(type(several[1]) == "table" and several or {}) do
      local n, key = #list + 1, sec.claims and (sec.key .. "." .. c.key) or sec.key
      list[n] = {key = key, part = sec.key, rows = c.rows}
      long[key] = string.format("%d. %s", n, c.text)
      short[key] = string.format("%d. %s", n, c.short or c.text)
    end
  end
  return list, long, short
end
local LIST

-- Takes the claims of `sections` (the registry's report sections, in order;
-- default: scripts/parts.lua's).
function M.use(sections)
  LIST, M.CLAIMS, M.SHORT = declared(sections or dofile(DIR .. "parts.lua").sections())
end
M.use()

local function finite(x) return xsa.numbers.finite(x) end

-- One row: the claim's number d per seed (positive: for the claim), its
-- unit, and the half-width a decision is asked at.
function M.test(claim, endpoint, d, unit, half_width)
  local row = {claim = claim, endpoint = endpoint, n = #d, unit = unit}
  if #d < 2 then
    row.word = #d == 1 and "one seed: no interval" or "no records yet"
    return row
  end
  row.mean, row.sd = stats.mean(d), stats.sd(d)
  row.lo, row.hi = stats.t_interval(d, 0.95)
  row.p = stats.paired_t_p(d) -- a one-sample t test of d against 0
  row.word = row.lo > 0 and "supported" or row.hi < 0 and "contradicted" or string.format("inconclusive at %d", #d)
  row.half_width, row.need = half_width, stats.seeds_needed(row.sd, half_width, 0.95)
  return row
end

local UNITS = {loss = {"points", 1}, step = {"steps", 20}}

-- A row from a paired endpoint statistic (the d it already holds).
local function from_stats(claim, label, kind, st)
  local u = UNITS[kind] or UNITS.loss
  local row = M.test(claim, label, st and st.d or {}, u[1], u[2])
  return row
end

-- Claim 1 (and 4): every endpoint of the part's paired runs.
function M.endpoint_rows(claim, eps, out)
  for _, e in ipairs(eps or {}) do
    local row = from_stats(claim, e.label, e.kind, e.stats)
    if not e.stats and e.note then row.word = e.note end -- e.g. neither model reached the level
    out[#out + 1] = row
  end
end

local function gain(sa, x) return 100 * (sa - x) / math.abs(sa) end

-- Claim 2: per seed, the slope of XSA's gain over log2(seq_len), in points
-- per doubling; only seeds with every length count (the summary has only
-- those). Final val loss and mean val loss (both from the recorded curves).
function M.seqlen_rows(s, claim, out)
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
      if ok then d[#d + 1] = stats.slope(p.x, p[key]) end
    end
    local label = key == "final" and "final val loss: slope of the gain per doubling of seq_len" or
      "mean val loss: slope of the gain per doubling of seq_len"
    out[#out + 1] = M.test(claim, label, d, "points per doubling", 1)
  end
end

-- Claim 3: per seed, the gain at λ = 0.5 minus the gain at each other λ;
-- the claim holds only if it holds against every other λ.
function M.lambda_rows(s, claim, out)
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
      out[#out + 1] = M.test(claim, string.format("final val loss: gain at λ = 0.5 minus gain at λ = %g", r.lambda),
        d, "points", 1)
    end
  end
end

-- Every claim's rows, in the order of the claims: sums = {part3 = summary,
-- ...} (a part without records: nil, and its claim's rows say so); and the
-- number of tests Holm's correction after the fact ran over (M.holm).
function M.rows(sums)
  local out = {}
  for _, c in ipairs(LIST) do
    for _, r in ipairs(c.rows(sums[c.part], M, M.CLAIMS[c.key]) or {}) do out[#out + 1] = r end
  end
  return out, M.holm(out)
end

-- Holm's correction over every test of the table outside the registered
-- family (rows with r.registered carry their own, over its 3 claims),
-- applied after the fact: none of those comparisons was registered. A row
-- whose interval excludes 0 but whose adjusted p is not below 0.05 is
-- "supported (not after Holm)" and no longer counts as support. Sets
-- r.p_holm and r.holm_of (the size of the family); returns that size.
function M.holm(rows)
  local ps, at = {}, {}
  for _, r in ipairs(rows) do
    if not r.registered and finite(r.p) then ps[#ps + 1], at[#ps + 1] = r.p, r end
  end
  if #ps == 0 then return 0 end
  for j, adj in ipairs(stats.holm(ps)) do
    local r = at[j]
    r.p_holm, r.holm_of = adj, #ps
    if (r.word == "supported" or r.word == "contradicted") and adj >= 0.05 then r.word = r.word .. " (not after Holm)" end
  end
  return #ps
end

-- The claims' texts in order: {{key =, text =, short =}, ...}.
function M.list()
  local out = {}
  for i, c in ipairs(LIST) do out[i] = {key = c.key, text = M.CLAIMS[c.key], short = M.SHORT[c.key]} end
  return out
end

-- A claim's verdict: on its primary rows (the final val loss; for claim 3
-- every comparison, as "largest" must hold against each other λ)
-- contradicted if any is, supported if all are, else inconclusive ("not
-- decided", the plan's word, for a registered claim; nil: no records); and
-- its secondary endpoints {n =, yes =, no =}.
function M.verdict(rows, claim)
  local all, any_no, n, sec, reg = true, false, 0, {n = 0, yes = 0, no = 0}, true -- reg: every primary row registered
  local esc -- the step endpoints (escape, reaching 5.5, reaching 5) measure one phenomenon: one vote
  for _, r in ipairs(rows) do
    if r.claim == claim and r.n > 0 then
      if r.endpoint:find("^final val loss") then
        n, reg = n + 1, reg and r.registered == true
        if r.word == "contradicted" then any_no = true end
        if r.word ~= "supported" then all = false end
      elseif r.unit == "steps" then
        esc = esc or {all = true, no = false, rows = {}}
        esc.rows[#esc.rows + 1] = r
        esc.all = esc.all and r.word == "supported"
        esc.no = esc.no or r.word == "contradicted"
      else
        sec.n = sec.n + 1
        sec.yes = sec.yes + (r.word == "supported" and 1 or 0)
        sec.no = sec.no + (r.word == "contradicted" and 1 or 0)
      end
    end
  end
  if esc then
    sec.n, sec.escape = sec.n + 1, esc
    sec.yes = sec.yes + ((esc.all and not esc.no) and 1 or 0)
    sec.no = sec.no + (esc.no and 1 or 0)
  end
  if n == 0 then return nil, sec end
  return any_no and "contradicted" or all and "supported" or (reg and "not decided" or "inconclusive"), sec
end

-- A registered claim whose grid is under way: the reason its row gives.
local function pending(rows, claim)
  for _, r in ipairs(rows) do if r.claim == claim and r.pending then return r.pending end end
end

-- A registered claim's decided row (nil: unregistered, or not decided yet).
local function registered_row(rows, claim)
  for _, r in ipairs(rows) do if r.claim == claim and r.registered and r.n > 0 then return r end end
end

-- A registered row's finding (scripts/report/family.lua words it),
-- interval and both p values.
function M.numbers(r)
  local t = xsa.numbers.text
  return string.format("%s (95%% t %s to %s, %d seeds; raw p %s, Holm-adjusted %s over the %d registered claims)",
    r.finding, t("%+.2f", r.lo), t("%+.2f", r.hi), r.n, t("%.2g", r.p), t("%.2g", r.p_holm), r.holm_of)
end

function M.overall(rows, claim)
  local word, sec = M.verdict(rows, claim)
  if not word then
    local why = pending(rows, claim)
    return why and "not decided yet: " .. why or "no records yet"
  end
  local reg = registered_row(rows, claim)
  if reg then return string.format("%s; %s", word, M.numbers(reg)) end
  if sec.n == 0 then return word .. " on the final val loss" end
  local out = string.format("%s on the final val loss; secondary endpoints%s: supported on %d of %d, contradicted on %d",
    word, sec.escape and string.format(" (the %d step endpoints counted once, as one phenomenon: the plateau escape)",
    #sec.escape.rows) or "", sec.yes, sec.n, sec.no)
  local e = sec.escape and sec.escape.rows[1]
  local final
  for _, r in ipairs(rows) do if r.claim == claim and r.endpoint:find("^final val loss") then final = final or r end end
  if word == "inconclusive" and e and sec.escape.all and final and final.lo then
    out = out .. string.format(". What the records show: XSA leaves the loss plateau earlier (%s by %+.1f steps, " ..
      "95%% t %+.1f to %+.1f) and ends at a final val loss equal within its interval (%+.2f to %+.2f points)",
      e.endpoint, e.mean, e.lo, e.hi, final.lo, final.hi)
  end
  return out
end

local function names(list)
  if #list == 1 then return "claim " .. list[1] end
  return "claims " .. table.concat(list, ", ", 1, #list - 1) .. " and " .. list[#list]
end

-- Whether a claim is registered (its rows say so, decided or not).
function M.is_registered(rows, claim)
  for _, r in ipairs(rows) do if r.claim == claim and r.registered then return true end end
  return false
end
local is_registered = M.is_registered

-- What the table of the claims asked after the fact (not registered) means,
-- in a few sentences computed from its rows: which claims the primary
-- endpoint decides, which it leaves open and where the secondary endpoints
-- lean.
function M.meaning(rows)
  local by, lean, n = {supported = {}, contradicted = {}, inconclusive = {}, none = {}}, {}, 0
  for i, c in ipairs(M.list()) do
    if not is_registered(rows, c.text) then
      local word, sec = M.verdict(rows, c.text)
      n = n + 1
      table.insert(by[word or "none"], i)
      if word == "inconclusive" and sec.n > 0 then
        lean[#lean + 1] = string.format("claim %d is supported on %d of its %d secondary endpoint%s and contradicted on %d",
          i, sec.yes, sec.n, sec.n == 1 and "" or "s", sec.no)
      end
    end
  end
  local out = {string.format("Of the %d claims asked after the fact (not registered), the primary endpoint (the final " ..
    "val loss) supports %s, contradicts %s and leaves %s open.", n, #by.supported > 0 and names(by.supported) or "none",
    #by.contradicted > 0 and names(by.contradicted) or "none", #by.inconclusive > 0 and names(by.inconclusive) or "none")}
  if #by.none > 0 then out[#out + 1] = string.format("%s %s no records yet.", names(by.none):gsub("^c", "C"), #by.none == 1 and "has" or "have") end
  if #lean > 0 then out[#out + 1] = "Of the open ones, " .. table.concat(lean, "; ") .. "." end
  out[#out + 1] = "Open means the 95% interval still contains 0 at the seeds run, not that there is no effect: " ..
    "the last column gives the seeds a decision would need at the spread observed."
  return table.concat(out, " ")
end

-- What the registered claims' table says, in a few sentences from its rows:
-- each claim's finding and its verdict once the plan decides, else how far
-- the grid is (nil: no registered claim).
function M.registered_meaning(rows)
  local regs, nums, rule = {}, {}, nil
  for i, c in ipairs(M.list()) do
    if is_registered(rows, c.text) then regs[#regs + 1], nums[#nums + 1] = c, i end
  end
  if #regs == 0 then return nil end
  local decided = {}
  for _, c in ipairs(regs) do
    local r = registered_row(rows, c.text)
    if r then
      decided[#decided + 1] = string.format("%s: %s.", (M.numbers(r):gsub("^%l", string.upper)), (M.verdict(rows, c.text)))
      rule = rule or r.seeds_rule
    end
  end
  if #decided < #regs then
    local why = pending(rows, regs[1].text)
    local one = #regs == 1
    return string.format("%s, the paper's, %s registered before %s runs and %s.", (names(nums):gsub("^c", "C")),
      one and "was" or "were", one and "its" or "their", why and ((one and "is" or "are") .. " not decided yet: " .. why) or
      ((one and "has" or "have") .. " no records yet"))
  end
  local out = {string.format("%s, the paper's, were registered before their runs and are " ..
    "decided as the plan states, at equal tokens, each seen once.", (names(nums):gsub("^c", "C")))}
  for _, d in ipairs(decided) do out[#out + 1] = d end
  if rule and rule:find("capped", 1, true) then
    out[#out + 1] = "The budget capped N below what the pilot's spread asked for (" .. rule .. ")."
  end
  return table.concat(out, " ")
end

-- A row's numbers: one decimal for steps, two for points, more when the
-- interval is narrower (xsa.numbers.decimals: two significant digits of its half-width).
local function num(x, unit, r)
  if not finite(x) then return "n/a" end
  local dec = xsa.numbers.decimals(finite(r.hi) and finite(r.lo) and (r.hi - r.lo) / 2 or 0, unit == "steps" and 1 or 2)
  return xsa.numbers.text("%+." .. dec .. "f", x)
end

local function short_of(claim)
  for _, c in ipairs(LIST) do if M.CLAIMS[c.key] == claim then return M.SHORT[c.key] end end
  return claim
end

-- The cells both tables open with: the claim, its endpoint, the seeds, the
-- estimate with its unit and the 95% interval.
local function first_cells(r)
  return {short_of(r.claim), r.endpoint, tostring(r.n), r.mean and (num(r.mean, r.unit, r) .. " " .. r.unit) or "n/a",
    r.lo and (num(r.lo, r.unit, r) .. " to " .. num(r.hi, r.unit, r)) or "n/a"}
end
local function p_text(p) return finite(p) and xsa.numbers.text("%.2g", p) or "n/a" end

-- The registered claims as a markdown table (nil: none): each with its
-- estimate, interval, raw and Holm-adjusted p and the plan's verdict.
function M.registered_table(rows)
  local t = {}
  for _, r in ipairs(rows) do
    if r.registered then
      local cells = first_cells(r)
      table.move({p_text(r.p), p_text(r.p_holm), r.word}, 1, 3, #cells + 1, cells)
      t[#t + 1] = cells
    end
  end
  if #t == 0 then return nil end
  return xsa.study.md_table({"claim", "primary endpoint (positive: for the claim)", "seeds", "estimate",
    "95% t interval", "raw p", "Holm p (over 3)", "verdict"}, t, 2)
end

-- The claims asked after the fact as a markdown table (xsa.study.md_table).
function M.table(rows)
  local t = {}
  for _, r in ipairs(rows) do
    if not r.registered then
      local cells = first_cells(r)
      table.move({r.word, p_text(r.p_holm), r.need and string.format("%d (±%g %s)", r.need, r.half_width,
        r.half_width == 1 and r.unit:gsub("^points", "point") or r.unit) or "n/a"}, 1, 3, #cells + 1, cells)
      t[#t + 1] = cells
    end
  end
  return xsa.study.md_table({"claim", "endpoint (positive: for the claim)", "seeds", "mean", "95% t interval",
    "verdict", "Holm p", "seeds for a decision"}, t, 2)
end

return M
