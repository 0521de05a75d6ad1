-- test_claims.lua: scripts/claims.lua on summaries built so that every
-- per-seed number of a claim is known by construction (gains set exactly,
-- slopes chosen), with t intervals checked against a printed t table
-- (t(0.975, 2) = 4.303, t(0.975, 3) = 3.182).
local T = require "testing"
local claims = dofile(os.getenv("XSA_ROOT") .. "/scripts/claims.lua")

local function close(a, b, tol, msg)
  T.ok(type(a) == "number" and math.abs(a - b) <= tol, string.format("%s: %s vs %.12g", msg or "close", tostring(a), b))
end

-- an SA/XSA pair of final losses whose gain 100 (SA - XSA) / SA is g (SA = 8)
local function pair(g) return 8, 8 * (1 - g / 100) end

local function rows_of(rows, claim)
  local out = {}
  for _, r in ipairs(rows) do if r.claim == claims.CLAIMS[claim] then out[#out + 1] = r end end
  return out
end

T.case("claim 2: the slope of the gain per doubling of seq_len, per seed", function()
  -- seed s: gain = 1 + b_s * log2(T / 64), b = 1, 2, 3: slopes 1, 2, 3 exactly
  local runs = {}
  for i, Tn in ipairs{64, 128, 256} do
    local seeds = {}
    for s, b in ipairs{1, 2, 3} do
      local sa, x = pair(1 + b * (i - 1))
      seeds[s] = {seed = s - 1, sa_val = sa, xsa_val = x, steps = {0, 10, 20}, sa_curve = {10, 9, sa},
        xsa_curve = {10, 9, x}}
    end
    runs[i] = {seq_len = Tn, seeds = seeds}
  end
  local r = rows_of(claims.rows({part4 = {result = {runs = runs}}}), "part4")
  T.eq(#r, 2, "final and mean val loss")
  close(r[1].mean, 2, 1e-12, "mean slope")
  close(r[1].sd, 1, 1e-12, "sd of 1, 2, 3")
  close(r[1].lo, 2 - 4.303 / math.sqrt(3), 1e-3, "t interval low")
  close(r[1].hi, 2 + 4.303 / math.sqrt(3), 1e-3, "t interval high")
  T.eq(r[1].word, "inconclusive at 3", "the interval holds 0")
  T.eq(r[1].n, 3)
  T.ok(r[2].mean > 0, "the mean loss's gain also grows")
end)

T.case("claim 3: λ = 0.5 against every other λ; contradicted when one beats it", function()
  local function sweep(g_half, g_one)
    local runs = {}
    for i, lam in ipairs{0.5, 1} do
      local seeds = {}
      for s = 1, 4 do
        local sa, x = pair((lam == 0.5 and g_half or g_one) + 0.1 * s * (lam == 1 and 1 or 0))
        seeds[s] = {seed = s - 1, sa_val = sa, xsa_val = x}
      end
      runs[i] = {lambda = lam, seeds = seeds}
    end
    return claims.rows({part6 = {result = {runs = runs}}})
  end
  local yes = sweep(5, 1)
  local r = rows_of(yes, "part6")
  T.eq(#r, 1, "one comparison: against λ = 1")
  close(r[1].mean, 5 - 1 - 0.25, 1e-9, "mean difference of gains")
  T.eq(r[1].word, "supported")
  T.ok(claims.overall(yes, claims.CLAIMS.part6):find("^supported on the final val loss"), claims.overall(yes, claims.CLAIMS.part6))
  local no = sweep(1, 5)
  T.eq(rows_of(no, "part6")[1].word, "contradicted")
  T.ok(claims.overall(no, claims.CLAIMS.part6):find("^contradicted"), "overall contradicted")
end)

T.case("claim 1: every endpoint of part 3's pairs; the final val loss decides", function()
  local runs, seeds = {}, {}
  for s, g in ipairs{2, 3, 4, 5} do
    local sa, x = pair(g)
    -- both leave the plateau (5.95) between steps 20 and 40; XSA 10 steps earlier in every seed
    runs[s] = {seed = s - 1, steps = {0, 20, 40, 60}, sa = {val = {10, 6.2, 6.0, sa}}, xsa = {val = {10, 5.95, 5.9, x}}}
    seeds[s] = s - 1
  end
  local rows = claims.rows({part3 = {runs = runs, seeds = seeds}})
  local r = rows_of(rows, "part3")
  T.ok(#r >= 3, "final, mean, escape at least")
  T.eq(r[1].endpoint:match("^final val loss") ~= nil, true, r[1].endpoint)
  close(r[1].mean, 3.5, 1e-9, "mean gain of 2, 3, 4, 5")
  close(r[1].lo, 3.5 - 3.182 * math.sqrt(5 / 3) / 2, 1e-3, "t interval low")
  T.eq(r[1].word, "supported")
  T.ok(claims.overall(rows, claims.CLAIMS.part3):find("^supported on the final val loss; secondary endpoints"),
    claims.overall(rows, claims.CLAIMS.part3))
  local md = claims.table(rows)
  T.ok(md:find("1. XSA beats SA", 1, true) and md:find("supported", 1, true), md)
end)

T.case("the README's sweep rows carry the mean val loss, from the recorded curves", function()
  local xsa = xsa or require "xsa"
  -- seed s: SA's curve 10, 9, 8 (mean after step 0: 8.5), XSA's the same scaled by 1 - g/100: gain g exactly
  local seeds = {}
  for s, g in ipairs{1, 2, 3} do
    local k = 1 - g / 100
    seeds[s] = {seed = s - 1, sa_val = 8, xsa_val = 8 * k, steps = {0, 10, 20}, sa_curve = {10, 9, 8},
      xsa_curve = {10, 9 * k, 8 * k}}
  end
  local st = xsa.report.mean_val_stats(seeds)
  close(st.mean, 2, 1e-9, "mean gain of 1, 2, 3")
  close(st.t_lo, 2 - 4.303 / math.sqrt(3), 1e-3, "t interval low")
  T.eq(st.n, 3)
  local got = {}
  local verdicts = xsa.report.sweep_verdicts(function(r) return "T = " .. r.seq_len end)
  local rows = verdicts({result = {runs = {{seq_len = 64, stats = {n = 3}, seeds = seeds}}}},
    function(label, final, mean) got[#got + 1] = {label, final, mean}; return label end)
  T.eq(#rows, 1)
  T.eq(got[1][1], "T = 64")
  close(got[1][3].mean, 2, 1e-9, "the row's mean val loss statistics")
  seeds[2].steps = nil -- a summary from before the curves were kept: no statistic, not a wrong one
  T.eq(xsa.report.mean_val_stats(seeds), nil)
  seeds[2].steps, seeds[2].sa_curve = {0, 10, 20}, {10, 0 / 0, 8}
  T.eq(xsa.report.mean_val_stats(seeds), nil, "a NaN in a curve")
end)

T.case("no records: no claim row pretends to an answer", function()
  local rows = claims.rows({})
  T.ok(#rows >= 2, "claim 2's two rows, empty, and one per claim that gives a row without records")
  for _, r in ipairs(rows) do T.eq(r.word, "no records yet") end
  for _, k in ipairs{"part3", "part4", "part6", "part7"} do
    T.eq(claims.overall(rows, claims.CLAIMS[k]), "no records yet", k)
  end
  local one = claims.rows({part6 = {result = {runs = {{lambda = 0.5, seeds = {{seed = 0, sa_val = 8, xsa_val = 7}}},
    {lambda = 1, seeds = {{seed = 0, sa_val = 8, xsa_val = 7.5}}}}}}})
  T.eq(rows_of(one, "part6")[1].word, "one seed: no interval")
end)

T.case("claims come from the registry: a part that declares one joins the table, numbered in order", function()
  local secs = dofile(os.getenv("XSA_ROOT") .. "/scripts/parts.lua").sections()
  local keys = {}
  for _, sec in ipairs(secs) do
    if sec.claim then keys[#keys + 1] = sec.key end
    for _, c in ipairs(sec.claims or {}) do keys[#keys + 1] = sec.key .. "." .. c.key end -- a part with several
  end
  local list = claims.list()
  T.eq(#list, #keys, "one claim per section that declares one")
  for i, c in ipairs(list) do T.eq(c.key, keys[i]); T.ok(c.text:find("^" .. i .. "%. "), c.text) end
  -- a new part after the others: its claim is the last, its rows in the table and the meaning
  secs[#secs + 1] = {key = "part99", claim = {text = "a later claim", short = "later",
    rows = function(s, C, claim) return {C.test(claim, "final val loss", s and s.d or {}, "points", 1)} end}}
  claims.use(secs)
  local n = #keys + 1
  T.eq(claims.CLAIMS.part99, n .. ". a later claim")
  local rows = claims.rows({part99 = {d = {3, 4, 5}}})
  local last = rows[#rows]
  T.eq(last.claim, claims.CLAIMS.part99)
  T.eq(last.word, "supported", "3, 4, 5: t interval 4 +- 4.303/sqrt(3) = 1.52 to 6.48")
  T.ok(claims.table(rows):find("| " .. n .. ". later | final val loss | 3 |", 1, true), claims.table(rows))
  T.ok(claims.meaning(rows):find("supports claim " .. n .. ",", 1, true), claims.meaning(rows))
  local after = 0 -- the claims asked after the fact: those without a registered row
  for _, c in ipairs(claims.list()) do if not claims.is_registered(rows, c.text) then after = after + 1 end end
  T.eq(after, n - 3, "the paper's three are registered, the others (the later one too) are not")
  T.ok(claims.meaning(rows):find("^Of the " .. after .. " claims asked after the fact"), claims.meaning(rows))
  claims.use()
  T.eq(#claims.list(), #keys, "back to the registry's")
end)

T.case("the meaning: which claims the primary endpoint decides and where the open ones lean", function()
  local rows = {}
  local function add(key, endpoint, word) rows[#rows + 1] = {claim = claims.CLAIMS[key], endpoint = endpoint, n = 5, word = word} end
  add("part3", "final val loss (whole val set)", "inconclusive at 5")
  add("part3", "mean val loss", "supported")
  add("part4", "final val loss: slope", "contradicted")
  add("part7", "final val loss (whole val set)", "supported")
  local m = claims.meaning(rows)
  T.ok(m:find("supports claim 4, contradicts claim 2 and leaves claim 1 open", 1, true), m)
  T.ok(m:find("Claim 3 has no records yet.", 1, true) or m:find("Claims 3, [%d, and]+ have no records yet%."), m)
  T.ok(m:find("claim 1 is supported on 1 of its 1 secondary endpoint and contradicted on 0", 1, true), m)
end)

-- A registered claim whose grid is under way has records but no verdict: its
-- row says how far the grid is in a few words, its sentence gives the whole
-- reason, and the meaning says "not decided yet", never "no records yet".
T.case("a registered claim mid-grid: not decided yet, with the reason", function()
  local family = dofile(os.getenv("XSA_ROOT") .. "/scripts/report/family.lua")
  local key = "part9.size"
  T.ok(claims.CLAIMS[key], "the registry declares part 9's size claim")
  local why = "seeds recorded: 4x256-T256 3 of 24 (no verdict before all N: the stopping rule)"
  local rows = family.claim("size", "x").rows({n = 24, incomplete = why, recorded = 7, total = 120}, claims,
    claims.CLAIMS[key])
  T.eq(#rows, 1)
  T.eq(rows[1].word, "not yet: 7 of 120 groups")
  T.eq(rows[1].pending, why)
  T.eq(claims.overall(rows, claims.CLAIMS[key]), "not decided yet: " .. why)
  local num = claims.CLAIMS[key]:match("^(%d+)")
  T.eq(claims.registered_meaning(rows), "Claim " .. num .. ", the paper's, was registered before its runs and is not " ..
    "decided yet: " .. why .. ".")
  T.ok(not claims.meaning(rows):find("claim " .. num, 1, true), "not among the claims asked after the fact")
  local none = family.claim("size", "x").rows(nil, claims, claims.CLAIMS[key])
  T.eq(none[1].word, "no records yet")
  T.eq(claims.overall(none, claims.CLAIMS[key]), "no records yet", "no summary at all: nothing recorded")
  T.eq(claims.registered_meaning(none), "Claim " .. num .. ", the paper's, was registered before its runs and has no " ..
    "records yet.")
end)

-- The family decided (numbers written here, not computed): each claim in the
-- plan's words with its estimate, interval, raw and Holm-adjusted p, a
-- trend whose interval holds 0 in words that lean neither way, and the
-- budget's cap on N said beside them.
T.case("the registered claims decided: the plan's words, both p values, the cap on N", function()
  local family = dofile(os.getenv("XSA_ROOT") .. "/scripts/report/family.lua")
  local rule = "pilot sd 3.60 points (df 4), 80% upper limit 5.60; capped at 24 by the budget; expected half-width 2.37 points"
  local s = {n = 24, seeds_rule = rule, family = {
    {key = "gain", n = 24, mean = 1.5, lo = 0.5, hi = 2.5, p = 0.004, p_holm = 0.012, verdict = "supported"},
    {key = "length", n = 24, mean = -3.06, lo = -3.36, hi = -2.76, p = 1.5e-16, p_holm = 4.5e-16, verdict = "contradicted"},
    {key = "size", n = 24, mean = 0.14, lo = -0.51, hi = 0.8, p = 0.66, p_holm = 0.66, verdict = "not decided"}}}
  local rows, keys = {}, {gain = "part8.gain", length = "part8.length", size = "part9.size"}
  for _, k in ipairs{"gain", "length", "size"} do
    for _, r in ipairs(family.claim(k, "x").rows(s, claims, claims.CLAIMS[keys[k]])) do rows[#rows + 1] = r end
  end
  local t = claims.registered_table(rows)
  T.ok(t:find("| 24 | +1.50 points | +0.50 to +2.50 | 0.004 | 0.012 | supported |", 1, true), t)
  T.ok(t:find("| -3.06 points per doubling | -3.36 to -2.76 | 1.5e-16 | 4.5e-16 | contradicted |", 1, true), t)
  T.ok(t:find("| 0.66 | 0.66 | not decided at 24 (the registered N) |", 1, true), t)
  T.eq(claims.overall(rows, claims.CLAIMS["part8.length"]), "contradicted; the gain shrinks by 3.06 points per " ..
    "doubling of seq_len (95% t -3.36 to -2.76, 24 seeds; raw p 1.5e-16, Holm-adjusted 4.5e-16 over the 3 registered claims)")
  T.eq(claims.overall(rows, claims.CLAIMS["part9.size"]), "not decided; the slope of the gain is +0.14 points per " ..
    "doubling of the non-embedding parameters (95% t -0.51 to +0.80, 24 seeds; raw p 0.66, Holm-adjusted 0.66 over " ..
    "the 3 registered claims)")
  local m = claims.registered_meaning(rows)
  T.ok(m:find("XSA's final val loss is lower than SA's by 1.50 points, the mean gain over the five cells (95% t " ..
    "+0.50 to +2.50, 24 seeds; raw p 0.004, Holm-adjusted 0.012 over the 3 registered claims): supported.", 1, true), m)
  T.ok(m:find("The budget capped N below what the pilot's spread asked for (" .. rule .. ").", 1, true), m)
  T.eq(t:find("inconclusive", 1, true), nil, "the plan's words only")
end)

T.case("the step endpoints count once (one phenomenon), and an escape against an equal final loss is said so", function()
  local c = claims.CLAIMS.part3
  local rows = {
    {claim = c, endpoint = "final val loss (whole val set)", n = 5, unit = "points", word = "inconclusive at 5", mean = 0.5,
      lo = -0.3, hi = 1.3},
    {claim = c, endpoint = "mean val loss", n = 5, unit = "points", word = "supported"},
    {claim = c, endpoint = "plateau-escape step", n = 5, unit = "steps", word = "supported", mean = 17, lo = 11, hi = 23},
    {claim = c, endpoint = "step at which val loss reaches 5.5", n = 5, unit = "steps", word = "supported"},
    {claim = c, endpoint = "step at which val loss reaches 5", n = 5, unit = "steps", word = "inconclusive at 5"}}
  local word, sec = claims.verdict(rows, c)
  T.eq(word, "inconclusive")
  T.eq(sec.n, 2, "the mean val loss and the escape (three step endpoints) are two votes, not four")
  T.eq(sec.yes, 1, "the escape is supported only when all its step endpoints are")
  rows[5].word = "supported"
  local o = claims.overall(rows, c)
  T.ok(o:find("supported on 2 of 2", 1, true), o)
  T.ok(o:find("leaves the loss plateau earlier (plateau-escape step by +17.0 steps", 1, true) and
    o:find("equal within its interval (-0.30 to +1.30 points)", 1, true), o)
  rows[3].word = "contradicted"
  T.eq(select(2, claims.verdict(rows, c)).no, 1, "one contradicted step endpoint contradicts the escape")
end)

T.case("Holm after the fact over the unregistered rows; a registered row keeps its own correction", function()
  -- p 0.01, 0.04, 0.03 (unregistered) and 0.001 (registered). Holm over the
  -- three by hand: sorted 0.01, 0.03, 0.04 -> 3 x 0.01 = 0.03, 2 x 0.03 =
  -- 0.06, max(1 x 0.04, 0.06) = 0.06.
  local c = "1. some claim"
  local rows = {{claim = c, endpoint = "final val loss", n = 5, p = 0.01, word = "supported"},
    {claim = c, endpoint = "mean val loss", n = 5, p = 0.04, word = "supported"},
    {claim = c, endpoint = "final val loss: another", n = 5, p = 0.03, word = "contradicted"},
    {claim = c, endpoint = "final val loss (registered)", n = 5, p = 0.001, p_holm = 0.003, word = "supported",
      registered = true},
    {claim = c, endpoint = "no records", n = 0, word = "no records yet"}}
  T.eq(claims.holm(rows), 3, "the family is the three unregistered tests")
  T.near(rows[1].p_holm, 0.03, 1e-12)
  T.near(rows[2].p_holm, 0.06, 1e-12)
  T.near(rows[3].p_holm, 0.06, 1e-12)
  T.eq(rows[1].word, "supported")
  T.eq(rows[2].word, "supported (not after Holm)")
  T.eq(rows[3].word, "contradicted (not after Holm)")
  T.eq(rows[4].p_holm, 0.003, "the registered row is not corrected again")
  T.eq(rows[4].word, "supported")
  T.eq(rows[5].p_holm, nil)
  -- a row that does not survive no longer counts: the claim's final val loss is not all supported
  T.eq((claims.verdict(rows, c)), "inconclusive")
  local t = claims.table(rows)
  T.ok(t:find("| supported (not after Holm) | 0.06 |", 1, true), t)
  T.ok(not t:find("0.003", 1, true), "the registered row is not in the table of the claims asked after the fact: " .. t)
  local reg = claims.registered_table(rows)
  T.ok(reg:find("| 0.001 | 0.003 | supported |", 1, true), "raw p, then Holm's, then the verdict: " .. reg)
  T.eq(claims.registered_table({rows[1]}), nil, "no registered row: no registered table")
end)

T.done()
