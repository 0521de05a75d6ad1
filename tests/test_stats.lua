-- test_stats.lua: xsa.stats against values computed elsewhere: scipy 1.10 / numpy
-- (each block records the python line that printed its numbers), closed forms of the
-- t distribution for df 1 and 2, a brute-force enumeration of all 2^n sign flips for
-- the Wilcoxon test with ties, and the known distribution of tiny bootstraps.
local T = require "testing"
local xsa = require "xsa"
local stats = require "xsa.stats"

-- |a - b| <= tol * |b| (T.near is absolute below 1)
local function rel(a, b, tol, msg)
  T.ok(type(a) == "number", (msg or "rel") .. ": got " .. tostring(a))
  if not (math.abs(a - b) <= tol * math.abs(b)) then
    error(string.format("%s: %.17g vs %.17g (rel err %.3g > %g)", msg or "rel", a, b,
      math.abs(a - b) / math.abs(b), tol), 2)
  end
end

T.case("xsa.stats is the module that require gives", function()
  T.eq(xsa.stats, stats)
end)

T.case("mean, sd, quantile (type 7)", function()
  -- python3 -c "import numpy as np; x=[3.5, -1.25, 0.5, 7.0, 2.0, -4.5, 1.0]; print(repr(np.mean(x)), repr(np.std(x, ddof=1)), [repr(np.quantile(x, p)) for p in (0, 0.025, 0.1, 0.25, 0.5, 0.9, 0.975, 1)])"
  local x = {3.5, -1.25, 0.5, 7.0, 2.0, -4.5, 1.0}
  rel(stats.mean(x), 1.1785714285714286, 1e-15, "mean")
  rel(stats.sd(x), 3.619145518725972, 1e-14, "sd")
  local ps = {0, 0.025, 0.1, 0.25, 0.5, 0.9, 0.975, 1}
  local want = {-4.5, -4.0125, -2.55, -0.375, 1.0, 4.900000000000001, 6.474999999999999, 7.0}
  for i, p in ipairs(ps) do rel(stats.quantile(x, p), want[i], 1e-14, "quantile " .. p) end
  T.eq(x[1], 3.5, "input not sorted in place")
  T.eq(stats.quantile({42}, 0.3), 42)
  T.eq(stats.mean({5}), 5.0)
  local s, why = stats.sd({5})
  T.eq(s, nil)
  T.ok(why:find("at least 2", 1, true))
  T.eq(stats.sd({2, 2, 2}), 0.0)
  -- the mean of many equal non-representable values comes back exactly
  local tenths = {}
  for i = 1, 1000 do tenths[i] = 0.1 end
  T.eq(stats.mean(tenths), 0.1)
end)

T.case("t quantiles at 0.975 and 0.995 against scipy", function()
  -- python3 -c "from scipy import stats; print([[repr(stats.t.ppf(p, df)) for p in (0.975, 0.995)] for df in (1, 2, 4, 9, 29, 100)])"
  -- (scipy's ppf itself is good to ~1e-11, hence the tolerance)
  local want = {
    [1] = {12.706204736432095, 63.65674116287399},
    [2] = {4.302652729911275, 9.92484320091807},
    [4] = {2.7764451051977987, 4.604094871415897},
    [9] = {2.2621571627409915, 3.2498355440153697},
    [29] = {2.045229642132703, 2.756385903670335},
    [100] = {1.9839715184496334, 2.6258905205863337},
  }
  for df, w in pairs(want) do
    rel(stats.t_quantile(0.975, df), w[1], 1e-9, "t 0.975 df " .. df)
    rel(stats.t_quantile(0.995, df), w[2], 1e-9, "t 0.995 df " .. df)
    rel(stats.t_quantile(0.025, df), -w[1], 1e-9, "t 0.025 df " .. df)
  end
end)

T.case("t quantiles: other p and real df against scipy", function()
  -- python3 -c "from scipy import stats; print([repr(stats.t.ppf(p, df)) for p, df in ((0.6, 3), (0.05, 7), (1e-6, 5), (0.9, 2.5), (0.995, 1e6), (0.3, 0.5))])"
  local cases = {
    {0.6, 3, 0.27667066230490933}, {0.05, 7, -1.8945786050613054}, {1e-6, 5, -24.771029720535676},
    {0.9, 2.5, 1.730250928807177}, {0.995, 1e6, 2.575834220105334}, {0.3, 0.5, -1.0095258786071655},
  }
  for _, c in ipairs(cases) do
    rel(stats.t_quantile(c[1], c[2]), c[3], 1e-9, string.format("t_quantile(%g, %g)", c[1], c[2]))
  end
  T.eq(stats.t_quantile(0.5, 3), 0.0)
  T.eq(stats.t_quantile(0, 3), -math.huge)
  T.eq(stats.t_quantile(1, 3), math.huge)
end)

T.case("t quantiles to 1e-13: 30-digit mpmath and closed forms for df 1 and 2", function()
  -- python3 -c "import mpmath as mp; mp.mp.dps = 30; q = lambda p, df: mp.findroot(lambda t: mp.betainc(mp.mpf(df)/2, 0.5, 0, df/(df+t*t), regularized=True)/2 - (1 - mp.mpf(p)), mp.mpf(2)); print([mp.nstr(q(p, df), 20) for p, df in ((0.95, 4), (0.975, 9), (0.995, 29), (0.9, 2.5), (0.999999, 5), (0.975, 100))])"
  -- (scipy's t.ppf(0.95, 4) = 2.13184678133629 is itself 2.3e-9 off)
  local cases = {
    {0.95, 4, 2.1318467863266495285}, {0.975, 9, 2.2621571627982049992}, {0.995, 29, 2.7563859036706051204},
    {0.9, 2.5, 1.730250928807176833}, {0.999999, 5, 24.771029720372488564}, {0.975, 100, 1.9839715185235518946},
  }
  for _, c in ipairs(cases) do
    rel(stats.t_quantile(c[1], c[2]), c[3], 1e-13, string.format("t_quantile(%g, %g)", c[1], c[2]))
  end
  -- df 1 (Cauchy): tan(pi (p - 1/2)); df 2: (2p - 1) / sqrt(2 p (1 - p))
  for _, p in ipairs{1e-12, 1e-5, 0.01, 0.2, 0.45, 0.5001, 0.7, 0.975, 0.995, 0.9999} do
    local cauchy -- the forms whose argument is exact and away from the pole
    if p < 0.25 then cauchy = -1 / math.tan(math.pi * p)
    elseif p > 0.75 then cauchy = 1 / math.tan(math.pi * (1 - p))
    else cauchy = math.tan(math.pi * (p - 0.5)) end
    rel(stats.t_quantile(p, 1), cauchy, 1e-13, "df 1 p " .. p)
    rel(stats.t_quantile(p, 2), (2 * p - 1) / math.sqrt(2 * p * (1 - p)), 1e-13, "df 2 p " .. p)
  end
end)

T.case("t_cdf against scipy", function()
  -- python3 -c "from scipy import stats; print([repr(stats.t.cdf(x, df)) for x, df in ((0.0, 3), (0.5, 1), (-1.5, 4), (2.0, 9), (-3.2, 2.5), (1e-3, 20), (-7.0, 30), (-40.0, 3), (4.0, 1e6), (-2.0, 0.5))])"
  local cases = {
    {0.0, 3, 0.5}, {0.5, 1, 0.6475836176504333}, {-1.5, 4, 0.10399999999999991},
    {2.0, 9, 0.9617235881146495}, {-3.2, 2.5, 0.03170551411819074}, {1e-3, 20, 0.5003939885167634},
    {-7.0, 30, 4.434979333610326e-08}, {-40.0, 3, 1.719034039457927e-05},
    {4.0, 1e6, 0.9999683264829949}, {-2.0, 0.5, 0.22275744509156561},
  }
  for _, c in ipairs(cases) do
    rel(stats.t_cdf(c[1], c[2]), c[3], 1e-12, string.format("t_cdf(%g, %g)", c[1], c[2]))
  end
  -- df 1: 1/2 + atan(x)/pi; df 2: 1/2 + x / (2 sqrt(2 + x^2))
  for _, x in ipairs{-1e6, -30, -2.5, -0.1, 0.3, 1, 8} do
    rel(stats.t_cdf(x, 1), x < 0 and math.atan(-1 / x) / math.pi or 0.5 + math.atan(x) / math.pi, 1e-13, "df 1 x " .. x)
    local ax = math.abs(x)
    local tail = 1 / (math.sqrt(2 + x * x) * (math.sqrt(2 + x * x) + ax)) -- (1 - ax/sqrt(2+x^2))/2
    rel(stats.t_cdf(x, 2), x < 0 and tail or 1 - tail, 1e-13, "df 2 x " .. x)
  end
  T.eq(stats.t_cdf(-math.huge, 4), 0.0)
  T.eq(stats.t_cdf(math.huge, 4), 1.0)
  -- quantile and cdf are inverses
  for _, df in ipairs{1, 3.5, 12, 250, 3e5} do
    for _, p in ipairs{1e-9, 0.02, 0.3, 0.6, 0.99} do
      rel(stats.t_cdf(stats.t_quantile(p, df), df), p, 1e-12, string.format("round trip p %g df %g", p, df))
    end
  end
end)

T.case("paired t p-values and t intervals against scipy", function()
  -- python3 -c "from scipy import stats; print([repr(stats.ttest_1samp(x, 0).pvalue) for x in ([1.2, 0.4, -0.3, 2.1, 0.9], [0.51, 0.62, 0.48, 0.55], [-1.5, 2.0], [0.3, -0.2, 0.45, 0.1, -0.05, 0.6, 0.25, 0.15, -0.1, 0.35, 0.2, 0.05])])"
  local sets = {
    {{1.2, 0.4, -0.3, 2.1, 0.9}, 0.09842463759559032},
    {{0.51, 0.62, 0.48, 0.55}, 0.0003843381438462799},
    {{-1.5, 2.0}, 0.909665529398267},
    {{0.3, -0.2, 0.45, 0.1, -0.05, 0.6, 0.25, 0.15, -0.1, 0.35, 0.2, 0.05}, 0.024645865940126927},
  }
  for i, s in ipairs(sets) do rel(stats.paired_t_p(s[1]), s[2], 1e-11, "p set " .. i) end
  -- python3 -c "from scipy import stats; print([(repr(stats.ttest_1samp(x, 0).statistic), list(stats.t.interval(0.95, len(x)-1, loc=stats.tmean(x), scale=stats.sem(x))), list(stats.t.interval(0.9, len(x)-1, loc=stats.tmean(x), scale=stats.sem(x)))) for x in ([1.2, 0.4, -0.3, 2.1, 0.9], [-1.5, 2.0])])"
  local p, t = stats.paired_t_p({1.2, 0.4, -0.3, 2.1, 0.9})
  rel(t, 2.1459800525755837, 1e-13, "t statistic")
  -- compared as centre and half width: scipy's t.ppf is good to ~2e-9 only (see above),
  -- and an end near 0 would magnify that
  local function interval(xs, level, want_lo, want_hi, msg)
    local lo, hi = stats.t_interval(xs, level)
    rel((lo + hi) / 2, (want_lo + want_hi) / 2, 1e-13, msg .. " centre")
    rel((hi - lo) / 2, (want_hi - want_lo) / 2, 5e-9, msg .. " half width")
  end
  interval({1.2, 0.4, -0.3, 2.1, 0.9}, nil, -0.25265842737184907, 1.9726584273718493, "95%")
  interval({1.2, 0.4, -0.3, 2.1, 0.9}, 0.9, 0.0056638985302793765, 1.7143361014697203, "90%")
  interval({-1.5, 2.0}, nil, -21.985858288756162, 22.485858288756162, "N = 2 (df 1)")
  interval({-1.5, 2.0}, 0.9, -10.799065150901642, 11.29906515090163, "N = 2 (df 1), 90%")
  T.ok(p > 0)
end)

T.case("t test and interval: n = 1 and zero spread", function()
  local p, why = stats.paired_t_p({0.7})
  T.eq(p, nil)
  T.ok(why:find("at least 2", 1, true))
  local lo, why2 = stats.t_interval({0.7})
  T.eq(lo, nil)
  T.ok(why2:find("at least 2", 1, true))
  T.eq(stats.paired_t_p({0.5, 0.5, 0.5}), 0.0)
  T.eq(stats.paired_t_p({0, 0}), 1.0)
  local a, b = stats.t_interval({0.5, 0.5, 0.5})
  T.eq(a, 0.5)
  T.eq(b, 0.5)
end)

T.case("Wilcoxon exact p-values against scipy (no ties)", function()
  -- python3 -W ignore -c "from scipy import stats; print([(repr(stats.wilcoxon(x, mode='exact').pvalue), stats.wilcoxon(x, mode='exact', alternative='greater').statistic) for x in ([1, 2, 3, 4, 5], [1, -2, 3, 4, 5], [-1, -2, -3, -4, -5], [0.5, -1.2, 2.3, 3.1, 4.4, 5.0], [1, 2, 3, 4, 5, 6], [0.8, -0.3, 1.9, 2.6, -1.1, 0.45, 3.3], [1.1, -2.2, 0.35, 4.1, -0.9, 2.8, 1.6, 0.7], [-0.12, 0.5, 0.33, -0.71, 0.9, 1.4, 0.06, 2.2, -0.25], [0.4, -1.3, 2.7, 0.15, 3.6, -0.55, 1.8, 0.95, 2.25, -0.05], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [-3, 1, 2])])"
  local sets = {
    {{1, 2, 3, 4, 5}, 0.0625, 15},              -- the textbook value: 2 / 2^5
    {{1, -2, 3, 4, 5}, 0.1875, 13},
    {{-1, -2, -3, -4, -5}, 0.0625, 0},
    {{0.5, -1.2, 2.3, 3.1, 4.4, 5.0}, 0.09375, 19},
    {{1, 2, 3, 4, 5, 6}, 0.03125, 21},
    {{0.8, -0.3, 1.9, 2.6, -1.1, 0.45, 3.3}, 0.15625, 23},
    {{1.1, -2.2, 0.35, 4.1, -0.9, 2.8, 1.6, 0.7}, 0.25, 27},
    {{-0.12, 0.5, 0.33, -0.71, 0.9, 1.4, 0.06, 2.2, -0.25}, 0.203125, 34},
    {{0.4, -1.3, 2.7, 0.15, 3.6, -0.55, 1.8, 0.95, 2.25, -0.05}, 0.10546875, 44},
    {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.001953125, 55},
    {{-3, 1, 2}, 1.0, 3},                         -- W+ at the centre
  }
  for i, s in ipairs(sets) do
    local p, w = stats.wilcoxon_p(s[1])
    rel(p, s[2], 1e-14, "wilcoxon set " .. i)
    T.eq(w, s[3], "W+ of set " .. i)
  end
  -- python3 -W ignore -c "from scipy import stats; print([(repr(stats.wilcoxon(x, mode='exact').pvalue), stats.wilcoxon(x, mode='exact', alternative='greater').statistic) for x in ([0.7, -1.9, 2.4, 3.15, -0.2, 1.05, 4.8, -2.65, 0.35, 5.5, 1.6, -0.85, 2.95, 3.7, 0.55], [k * 0.37 * (-1) ** (k % 3 == 0) for k in range(1, 21)])])"
  rel(stats.wilcoxon_p({0.7, -1.9, 2.4, 3.15, -0.2, 1.05, 4.8, -2.65, 0.35, 5.5, 1.6, -0.85, 2.95, 3.7, 0.55}),
    0.041259765625, 1e-13, "n = 15")
  local x20 = {}
  for k = 1, 20 do x20[k] = k * 0.37 * (k % 3 == 0 and -1 or 1) end
  rel(stats.wilcoxon_p(x20), 0.1230926513671875, 1e-13, "n = 20")
  -- n = 1: p = 1 (both signs equally likely); all positive n = 1..4 never reach 0.05
  T.eq(stats.wilcoxon_p({2.5}), 1.0)
  T.eq(stats.wilcoxon_p({1, 2, 3, 4}), 0.125)
end)

-- Independent reference: ranks by counting, then all 2^n sign vectors; the p-value is
-- the share of vectors whose W+ is at least as far from its mean n(n+1)/4 as observed.
local function brute_wilcoxon(xs)
  local a = {}
  for _, v in ipairs(xs) do if v ~= 0 then a[#a + 1] = v end end
  local n = #a
  local rank = {}
  for i = 1, n do
    local less, same = 0, 0
    for j = 1, n do
      if math.abs(a[j]) < math.abs(a[i]) then less = less + 1
      elseif math.abs(a[j]) == math.abs(a[i]) then same = same + 1 end
    end
    rank[i] = less + (same + 1) / 2
  end
  local w, centre = 0, n * (n + 1) / 4
  for i = 1, n do if a[i] > 0 then w = w + rank[i] end end
  local dev, hits = math.abs(w - centre), 0
  for mask = 0, (1 << n) - 1 do
    local s = 0
    for i = 1, n do if mask & (1 << (i - 1)) ~= 0 then s = s + rank[i] end end
    if math.abs(s - centre) >= dev - 1e-9 then hits = hits + 1 end
  end
  return hits / (1 << n), w
end

T.case("Wilcoxon with ties and zeros against brute-force enumeration", function()
  local sets = {
    {1, -1, 2, 2, -3, 4, 4, 4},
    {0.5, 0.5, -0.5, 1.5, 2.5, -2.5, 3, 3.5, 3.5, -4},
    {0, 1, -2, 2, 0, 3, 3, 5},
    {2, 2, 2, 2, 2, 2},
    {-1, 1, -1, 1},
    {0, 0, 7},
  }
  for i, s in ipairs(sets) do
    local p, w = stats.wilcoxon_p(s)
    local bp, bw = brute_wilcoxon(s)
    rel(p, bp, 1e-13, "ties set " .. i)
    T.eq(w, bw, "W+ of ties set " .. i)
  end
  -- random small sets of small integers (many ties, some zeros), n = 1..13
  local state = 12345
  local function lcg()
    state = (state * 1103515245 + 12345) % 2147483648
    return state
  end
  local checked = 0
  for n = 1, 13 do
    for _ = 1, 6 do
      local s = {}
      for i = 1, n do s[i] = (lcg() % 9) - 3 end
      local p = stats.wilcoxon_p(s)
      local bp = brute_wilcoxon(s)
      if p == nil then
        for i = 1, n do T.eq(s[i], 0, "nil p only when every value is zero") end
      else
        rel(p, bp, 1e-12, "random set n=" .. n .. ": " .. table.concat(s, ","))
        checked = checked + 1
      end
    end
  end
  T.ok(checked > 60, "random sets checked: " .. checked)
  -- zeros are dropped: the same p as without them (scipy's zero_method="wilcox")
  T.eq(stats.wilcoxon_p({0, 1, 2, 0, 3, 4, 5}), stats.wilcoxon_p({1, 2, 3, 4, 5}))
  local p, why = stats.wilcoxon_p({0, 0.0, -0.0})
  T.eq(p, nil)
  T.ok(why:find("zero", 1, true), why)
end)

T.case("bootstrap: reproducible, seeded, contains the mean", function()
  local d = {0.97, 0.66, 1.28, 0.32, 1.61, -0.25, 0.81, 1.12, 0.05, 0.49}
  local lo1, hi1 = stats.bootstrap_interval(d)
  local lo2, hi2 = stats.bootstrap_interval(d, {seed = 0})
  T.eq(lo1, lo2)
  T.eq(hi1, hi2)
  local lo3, hi3 = stats.bootstrap_interval(d, {seed = 0, resamples = 10000, level = 0.95})
  T.eq(lo1, lo3)
  T.eq(hi1, hi3)
  local lo4, hi4 = stats.bootstrap_interval(d, {seed = 1})
  T.ok(lo4 ~= lo1 and hi4 ~= hi1, "another seed gives another interval")
  T.ok(math.abs(lo4 - lo1) < 0.05 and math.abs(hi4 - hi1) < 0.05, "but a close one")
  local m = stats.mean(d)
  for _, seed in ipairs{0, 1, 2, 99} do
    local lo, hi = stats.bootstrap_interval(d, {seed = seed})
    T.ok(lo < m and m < hi, "contains the mean, seed " .. seed)
    T.ok(lo >= -0.25 and hi <= 1.61, "within the range of the data")
  end
  -- a wider level gives a wider interval (same resamples)
  local lo9, hi9 = stats.bootstrap_interval(d, {level = 0.99})
  T.ok(lo9 <= lo1 and hi9 >= hi1)
  local lo5, hi5 = stats.bootstrap_interval({3.5})
  T.eq(lo5, 3.5)
  T.eq(hi5, 3.5)
end)

T.case("bootstrap: known resample distribution of tiny samples", function()
  -- {0, 1}: resample means 0, 1/2, 1 with probabilities 1/4, 1/2, 1/4, so the 2.5% and
  -- 97.5% points are 0 and 1, and the 30% and 70% points are both 1/2
  local lo, hi = stats.bootstrap_interval({0, 1}, {seed = 3})
  T.eq(lo, 0.0)
  T.eq(hi, 1.0)
  lo, hi = stats.bootstrap_interval({0, 1}, {seed = 3, level = 0.4})
  T.eq(lo, 0.5)
  T.eq(hi, 0.5)
  -- 1 resample: both ends are that one resample mean, which is one of the three values
  lo, hi = stats.bootstrap_interval({0, 1}, {seed = 5, resamples = 1})
  T.eq(lo, hi)
  T.ok(lo == 0 or lo == 0.5 or lo == 1)
end)

T.case("bootstrap approaches the t interval for a large normal sample", function()
  -- 1000 N(3, 2^2) values; the percentile bootstrap's ends estimate mean -+ 1.96 se
  -- (as the t interval's mean -+ 1.962 se) with a Monte Carlo sd of ~0.04 se at 4000
  -- resamples: both ends must agree within 0.2 se
  local g = xsa.generator(2024)
  local z = g:randn(1000):totable()
  local x = {}
  for i = 1, #z do x[i] = 3 + 2 * z[i] end
  local tlo, thi = stats.t_interval(x)
  local blo, bhi = stats.bootstrap_interval(x, {resamples = 4000, seed = 7})
  local se = stats.sd(x) / math.sqrt(#x)
  T.ok(math.abs(blo - tlo) < 0.2 * se, string.format("lo %.5f vs %.5f (se %.5f)", blo, tlo, se))
  T.ok(math.abs(bhi - thi) < 0.2 * se, string.format("hi %.5f vs %.5f (se %.5f)", bhi, thi, se))
end)

T.case("paired_summary: numbers against scipy", function()
  -- python3 -c "from scipy import stats; sa=[3.10, 3.05, 3.12, 3.08, 3.11]; xs=[3.07, 3.03, 3.08, 3.07, 3.06]; d=[100*(a-b)/a for a,b in zip(sa,xs)]; print([repr(v) for v in d], repr(stats.tmean(d)), repr(stats.tstd(d)), list(map(repr, stats.t.interval(0.95, 4, loc=stats.tmean(d), scale=stats.sem(d)))), repr(stats.ttest_1samp(d, 0).pvalue), repr(stats.wilcoxon(d, mode='exact').pvalue))"
  local s = stats.paired_summary({3.10, 3.05, 3.12, 3.08, 3.11}, {3.07, 3.03, 3.08, 3.07, 3.06})
  local d = {0.967741935483879, 0.6557377049180334, 1.282051282051283, 0.32467532467533217, 1.6077170418006375}
  T.eq(s.n, 5)
  T.eq(s.level, 0.95)
  for i = 1, 5 do rel(s.d[i], d[i], 1e-13, "d " .. i) end
  rel(s.mean, 0.967584657785833, 1e-13, "mean")
  rel(s.sd, 0.5047870056249417, 1e-12, "sd")
  rel(s.t_lo, 0.34080880614026077, 1e-9, "t_lo")
  rel(s.t_hi, 1.5943605094314053, 1e-9, "t_hi")
  rel(s.p_t, 0.01278527260013177, 1e-10, "p_t")
  T.eq(s.p_wilcoxon, 0.0625)
  T.eq(s.k_xsa_lower, 5)
  local blo, bhi = stats.bootstrap_interval(s.d)
  T.eq(s.boot_lo, blo)
  T.eq(s.boot_hi, bhi)
  T.eq(s.verdict, "XSA better by 0.97% (95% CI 0.34 to 1.59, N=5)")
end)

T.case("paired_summary: verdicts", function()
  -- worse: every seed has XSA higher
  local s = stats.paired_summary({3.0, 3.1, 3.2}, {3.05, 3.16, 3.23})
  T.eq(s.k_xsa_lower, 0)
  T.ok(s.t_hi < 0)
  T.eq(s.verdict, string.format("XSA worse by %.2f%% (95%% CI %.2f to %.2f, N=3)", -s.mean, s.t_lo, s.t_hi))
  -- inconclusive: the interval contains 0
  s = stats.paired_summary({3.10, 3.05, 3.12}, {3.07, 3.09, 3.08})
  T.ok(s.t_lo < 0 and s.t_hi > 0)
  T.eq(s.k_xsa_lower, 2)
  T.eq(s.verdict, string.format("inconclusive at N=3 seeds (mean %.2f%%, 95%% CI %.2f to %.2f)", s.mean, s.t_lo, s.t_hi))
  -- another level shows in the text
  s = stats.paired_summary({3.10, 3.05, 3.12, 3.08, 3.11}, {3.07, 3.03, 3.08, 3.07, 3.06}, {level = 0.99, seed = 4})
  T.ok(s.verdict:find("99% CI", 1, true), s.verdict)
  -- N = 2 (df 1): a proper, wide interval
  s = stats.paired_summary({3.10, 3.05}, {3.07, 3.06})
  T.eq(s.n, 2)
  local lo, hi = stats.t_interval(s.d)
  T.eq(s.t_lo, lo)
  T.eq(s.t_hi, hi)
  rel(s.t_hi - s.mean, 12.706204736174707 * s.sd / math.sqrt(2), 1e-12, "N=2 half width uses t(0.975, 1) = tan(0.475 pi)")
  T.ok(s.boot_lo and s.boot_hi and s.p_t and s.p_wilcoxon)
  T.ok(s.verdict:find("^inconclusive at N=2 seeds"), s.verdict)
  -- N = 1: no interval
  s = stats.paired_summary({3.10}, {3.07})
  T.eq(s.n, 1)
  T.eq(s.sd, nil)
  T.eq(s.t_lo, nil)
  T.eq(s.boot_lo, nil)
  T.eq(s.p_t, nil)
  T.eq(s.p_wilcoxon, 1.0)
  T.eq(s.k_xsa_lower, 1)
  T.eq(s.verdict, "XSA better by 0.97% on one seed (one seed cannot give an interval)")
  s = stats.paired_summary({3.0}, {3.3})
  T.eq(s.verdict, "XSA worse by 10.00% on one seed (one seed cannot give an interval)")
  -- identical values
  s = stats.paired_summary({3.0, 3.2}, {3.0, 3.2})
  T.eq(s.p_wilcoxon, nil)
  T.ok(s.wilcoxon_note:find("zero", 1, true))
  T.eq(s.verdict, "no difference at N=2 seeds (SA and XSA give the same values)")
end)

-- P(|T| <= t) for integer df by the finite sums of Abramowitz & Stegun 26.7.3-4
-- (theta = atan(t / sqrt df)), and its 0.95 point by bisection: a t quantile
-- computed independently of stats.t_quantile's incomplete beta.
local function t_two_sided(t, df)
  local th = math.atan(t / math.sqrt(df))
  local s, c2 = math.sin(th), math.cos(th) ^ 2
  if df == 1 then return 2 * th / math.pi end
  if df % 2 == 0 then
    local term, sum = 1, 1
    for k = 1, (df - 2) // 2 do term = term * (2 * k - 1) / (2 * k) * c2; sum = sum + term end
    return s * sum
  end
  local term = math.cos(th)
  local sum = term
  for k = 1, (df - 3) // 2 do term = term * (2 * k) / (2 * k + 1) * c2; sum = sum + term end
  return 2 / math.pi * (th + s * sum)
end
local function t975(df)
  local lo, hi = 0, 100
  for _ = 1, 200 do
    local mid = (lo + hi) / 2
    if t_two_sided(mid, df) < 0.95 then lo = mid else hi = mid end
  end
  return (lo + hi) / 2
end

T.case("seeds_needed: hand-worked cases and the smallest n by an independent t", function()
  -- the closed forms against printed table values first (t(0.975, df))
  for df, v in pairs{[1] = 12.706, [2] = 4.303, [5] = 2.571, [10] = 2.228, [30] = 2.042, [60] = 2.000, [120] = 1.980} do
    T.ok(math.abs(t975(df) - v) < 6e-4, "closed-form t(0.975, " .. df .. ") = " .. t975(df))
  end
  -- by hand with the table: sd 1, h 1: n = 6 gives 2.571 / 2.449 = 1.050 > 1, n = 7 2.447 / 2.646 = 0.925
  T.eq(stats.seeds_needed(1, 1), 7)
  -- sd 0.5, h 1: n = 3 gives 4.303 * 0.5 / 1.732 = 1.242, n = 4 3.182 * 0.5 / 2 = 0.796
  T.eq(stats.seeds_needed(0.5, 1), 4)
  -- sd 2, h 1: n = 17 gives 2.120 * 2 / 4.123 = 1.028, n = 18 2.110 * 2 / 4.243 = 0.995
  T.eq(stats.seeds_needed(2, 1), 18)
  T.eq(stats.seeds_needed(4, 2), 18, "only sd / h counts")
  T.eq(stats.seeds_needed(0, 1), 2, "no spread: the smallest sample with an interval")
  -- part 3's five seeds (sd 4.69) and others: t(0.975, n-1) sd / sqrt(n) <= h at n, > h at n - 1
  for _, c in ipairs{{4.69, 1}, {4.69, 0.5}, {1.88, 1}, {0.67, 0.5}, {12.2, 10}, {25, 20}, {3.3, 1}} do
    local sd, h = c[1], c[2]
    local n = stats.seeds_needed(sd, h)
    T.ok(t975(n - 1) * sd / math.sqrt(n) <= h, string.format("sd %g h %g: n = %d is enough", sd, h, n))
    if n > 2 then
      T.ok(t975(n - 2) * sd / math.sqrt(n - 1) > h, string.format("sd %g h %g: n - 1 = %d is not", sd, h, n - 1))
    end
  end
  T.eq(stats.seeds_needed(4.69, 1), 87)
  local n99 = stats.seeds_needed(1, 1, 0.99) -- t(0.995): n = 10 gives 3.250 / 3.162 = 1.028, n = 11 3.169 / 3.317 = 0.955
  T.eq(n99, 11)
  local none, why = stats.seeds_needed(1e4, 1)
  T.eq(none, nil)
  T.eq(why, "more than 1000000 seeds")
  T.raises(function() stats.seeds_needed(-1, 1) end, "stats.seeds_needed: sd must be a finite number >= 0")
  T.raises(function() stats.seeds_needed(1, 0) end, "stats.seeds_needed: half_width must be a finite number > 0")
end)

T.case("paired_summary: seeds needed, absolute differences, higher is better", function()
  -- d = 1, 0.5, -0.3 (sd 0.6557): +-1 point needs n with t sd / sqrt n <= 1: n = 4 gives
  -- 3.182 * 0.656 / 2 = 1.043, n = 5 2.776 * 0.656 / 2.236 = 0.814
  local s = stats.paired_summary({4, 4, 4}, {3.96, 3.98, 4.012})
  T.eq(s.seeds_needed[1].half_width, 1)
  T.eq(s.seeds_needed[1].n, 5)
  T.eq(s.seeds_needed[2].half_width, 0.5)
  T.eq(s.diff, "relative")
  T.eq(s.k_xsa_better, 2)
  -- steps at which a loss is reached: d = SA - XSA, in steps, words earlier/later
  local o = {diff = "absolute", unit = "steps", words = {better = "earlier", worse = "later", ahead = "earlier"}}
  s = stats.paired_summary({80, 90, 100}, {70, 79, 88}, o)
  T.eq(table.concat(s.d, ","), "10,11,12")
  T.eq(s.verdict, "XSA earlier by 11.0 steps (95% CI 8.5 to 13.5, N=3)")
  T.eq(#s.seeds_needed, 0, "absolute: no default half-widths")
  s = stats.paired_summary({80}, {90}, o)
  T.eq(s.verdict, "XSA later by 10.0 steps on one seed (one seed cannot give an interval)")
  -- higher is better (an accuracy): d = 100 (XSA - SA) / SA, positive when XSA is higher
  s = stats.paired_summary({0.50, 0.40, 0.60}, {0.55, 0.42, 0.66}, {better = "higher"})
  T.ok(math.abs(s.d[1] - 10) < 1e-12 and math.abs(s.d[2] - 5) < 1e-12 and math.abs(s.d[3] - 10) < 1e-12)
  T.eq(s.k_xsa_better, 3)
  T.eq(s.k_xsa_lower, 0)
  T.eq(s.ahead_word, "higher")
  T.ok(s.verdict:find("^XSA better by 8%.33%% %(95%% CI"), s.verdict)
  s = stats.paired_summary({10, 20}, {12, 18}, {diff = "absolute", better = "higher", half_widths = {1}})
  T.eq(table.concat(s.d, ","), "2,-2")
  T.eq(s.seeds_needed[1].half_width, 1)
  T.raises(function() stats.paired_summary({1}, {1}, {diff = "ratio"}) end, "diff must be \"relative\" or \"absolute\"")
  T.raises(function() stats.paired_summary({1}, {1}, {better = "up"}) end, "better must be \"lower\" or \"higher\"")
end)

T.case("errors on bad input", function()
  local function r(fn, pat)
    local err = T.raises(fn, pat)
    T.ok(err:find("test_stats.lua:", 1, true), "the position is the caller's: " .. err)
  end
  r(function() stats.mean("1,2") end, "stats.mean: expected a list of numbers (values), got string")
  r(function() stats.sd(nil) end, "stats.sd: expected a list of numbers (values), got nil")
  r(function() stats.mean({}) end, "stats.mean: empty list of values")
  r(function() stats.mean({1, 0 / 0}) end, "stats.mean: values[2] is not a finite number")
  r(function() stats.quantile({1, math.huge}, 0.5) end, "values[2] is not a finite number (inf)")
  r(function() stats.t_interval({1, "2"}) end, "stats.t_interval: values[2] is not a finite number (string)")
  r(function() stats.wilcoxon_p({}) end, "stats.wilcoxon_p: empty list")
  r(function() stats.paired_t_p(5) end, "stats.paired_t_p: expected a list")
  r(function() stats.quantile({1, 2}, 1.5) end, "stats.quantile: p must be a number in [0, 1]")
  r(function() stats.t_quantile(0.5) end, "stats.t_quantile: df must be a finite number > 0, got nil")
  r(function() stats.t_quantile(-0.1, 3) end, "stats.t_quantile: p must be a number in [0, 1]")
  r(function() stats.t_quantile(0 / 0, 3) end, "stats.t_quantile: p must be a number in [0, 1]")
  r(function() stats.t_cdf(1, 0) end, "stats.t_cdf: df must be a finite number > 0, got 0")
  r(function() stats.t_cdf(0 / 0, 3) end, "stats.t_cdf: x must be a number")
  r(function() stats.t_interval({1, 2}, 95) end, "stats.t_interval: level must be a number in (0, 1), got 95")
  r(function() stats.bootstrap_interval({1, 2}, 7) end, "stats.bootstrap_interval: opts must be a table")
  r(function() stats.bootstrap_interval({1, 2}, {resamples = 0}) end, "resamples must be a positive integer, got 0")
  r(function() stats.bootstrap_interval({1, 2}, {seed = 1.5}) end, "seed must be an integer, got 1.5")
  r(function() stats.paired_summary({1, 2}, {1}) end, "stats.paired_summary: 2 SA values but 1 XSA values")
  r(function() stats.paired_summary({1, 0}, {1, 1}) end, "stats.paired_summary: SA value 2 is 0")
  r(function() stats.paired_summary({1, 2}, {1, 0 / 0}) end, "stats.paired_summary: XSA values[2] is not a finite number")
  r(function() stats.paired_summary({}, {}) end, "stats.paired_summary: empty list of SA values")
  r(function() stats.paired_summary({1}, "x") end, "expected a list of numbers (XSA values), got string")
  r(function() stats.paired_summary({1}, {1}, {level = 1}) end, "level must be a number in (0, 1), got 1")
  r(function() stats.paired_summary({1e-300}, {-1e300}) end, "the improvement of seed 1 is not finite")
end)

T.case("numbers print with the digits their spread needs, at every scale (issue 39)", function()
  -- d = SA - XSA per seed, scaled from 1e-6 to 1e3: every number the verdict and the
  -- statistics line print (mean, interval bounds, sd) must equal the true value to
  -- within a twentieth of the interval's half-width (two significant digits of it),
  -- and at least one digit of the half-width must show (never "0.0 (-0.0 to 0.1)").
  local base = {1.0, 4.0, 8.0, -1.0, 3.0}
  for e = -6, 3 do
    local k = 10 ^ e
    local sa, xs = {}, {}
    for i, d in ipairs(base) do sa[i], xs[i] = 4 + d * k, 4 end
    for _, diff in ipairs{"absolute", "relative"} do
      local s = stats.paired_summary(sa, xs, {diff = diff, unit = "nats", resamples = 200, seed = 0})
      local half = (s.t_hi - s.t_lo) / 2
      local line = xsa.study.stats_lines(s, "x")[2]
      local shown = {s.verdict:match("mean ([-+%d.e]+)"), s.verdict:match("CI ([-+%d.e]+) to ([-+%d.e]+)")}
      local truth = {s.mean, s.t_lo, s.t_hi}
      for i = 1, 3 do
        local v = tonumber(shown[i])
        T.ok(v and math.abs(v - truth[i]) <= half / 20 + 1e-15, string.format("%s at 1e%d: %s for %.6g in %q",
          diff, e, tostring(shown[i]), truth[i], s.verdict))
      end
      local sd = tonumber(line:match("%(sd ([-+%d.e]+)"))
      T.ok(sd and math.abs(sd - s.sd) <= half / 20, string.format("sd at 1e%d: %s", e, line))
      T.ok(not s.verdict:find("[^%d]0%.0 ") and not s.verdict:find("%-0%.0+[^%d]"), s.verdict)
    end
  end
  T.eq(xsa.numbers.decimals(0.043, 1), 3)
  T.eq(xsa.numbers.decimals(0.1, 1), 2, "0.1 is 1e-1: two digits are 0.10")
  T.eq(xsa.numbers.decimals(43, 1), 1, "the unit's own precision when it is enough")
  T.eq(xsa.numbers.decimals(0, 2), 2)
  T.eq(xsa.numbers.decimals(0 / 0, 2), 2)
  T.eq(xsa.numbers.decimals(1e-300, 1), 12, "at most 12")
end)

T.done()
