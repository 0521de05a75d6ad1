-- xsa.stats: statistics for seed-replicated paired comparisons (SA vs XSA).
--
--   local stats = xsa.stats                     -- or require "xsa.stats"
--   -- final val loss of SA and XSA trained with seeds 1..5
--   local s = stats.paired_summary({3.10, 3.05, 3.12, 3.08, 3.11}, {3.07, 3.03, 3.08, 3.07, 3.06})
--   print(s.verdict)   --> XSA better by 0.97% (95% CI 0.34 to 1.59, N=5)
--   print(s.mean, s.t_lo, s.t_hi, s.p_t, s.p_wilcoxon, s.k_xsa_lower)
--
-- Lists are Lua sequences of finite numbers (xs[1..#xs]). A non-table, an
-- empty list or a NaN/inf element raises "stats.FN: ..." at the caller. A
-- statistic that the sample is too small for (an sd of one value, a Wilcoxon
-- test with only zero differences) returns nil and a reason instead.
--
-- Descriptive
--   mean(xs)                 arithmetic mean.
--   sd(xs)                   sample standard deviation (divisor n-1); nil, reason for n = 1.
--   quantile(xs, p)          type-7 quantile (R's and numpy's default): with the sorted
--                            values x(1..n) and h = (n-1)p + 1, x(floor h) + (h - floor h)
--                            (x(floor h + 1) - x(floor h)); p in [0, 1].
-- Student t distribution (df: any real number > 0, e.g. 4 or 7.5)
--   t_cdf(x, df)             P(T <= x). For df < 1e5 through the regularized incomplete beta
--                            function I_x(df/2, 1/2) (its continued fraction, evaluated by
--                            the modified Lentz method on whichever side converges); for
--                            df >= 1e5, where that fraction loses digits, Hill's (1970)
--                            normalising transformation and erfc. Both tails are computed
--                            directly, so small tail probabilities keep their relative
--                            accuracy (~1e-13 or better against 40-digit mpmath). x may be +-inf.
--   t_quantile(p, df)        the x with t_cdf(x, df) = p, for p in [0, 1] (0 and 1 give -inf
--                            and inf): a bracket, then Newton steps (on log tail in the tails)
--                            that fall back to bisection when they leave it; relative error
--                            ~1e-13.
-- Tests and intervals on one sample (for paired data: the per-seed differences)
--   t_interval(xs [, level])      lo, hi: the t confidence interval of the mean
--                                 (level 0.95 by default), mean -+ t((1+level)/2, n-1) sd/sqrt(n);
--                                 nil, reason for n = 1. sd = 0 gives lo = hi = mean.
--   paired_t_p(xs)                two-sided p-value of the one-sample t test of mean 0
--                                 (the paired t test when xs are differences), and t;
--                                 nil, reason for n = 1. With sd = 0 it is 1 when the mean
--                                 is 0 and 0 otherwise (scipy gives nan there).
--   wilcoxon_p(xs)                EXACT two-sided p-value of the Wilcoxon signed-rank test
--                                 of symmetry about 0, and W+ (the sum of the ranks of the
--                                 positive values). Zeros are dropped first (Wilcoxon's
--                                 convention, scipy's zero_method="wilcox"); ties in |x| get
--                                 average ranks, and the null distribution of W+ under
--                                 random signs of those ranks is enumerated exactly by
--                                 dynamic programming over doubled (integer) ranks.
--                                 p = min(1, 2 min(P(W+ <= w), P(W+ >= w))), as
--                                 scipy.stats.wilcoxon(x, mode="exact") (which, unlike this,
--                                 switches to a normal approximation when there are ties or
--                                 zeros). nil, reason when no non-zero value is left.
--                                 Cost O(n^3): meant for n up to a few hundred.
--   bootstrap_interval(xs [, opts])  lo, hi: percentile bootstrap interval of the mean.
--                                 opts: resamples (10000), level (0.95), seed (0). The
--                                 resamples are drawn by the engine's generator
--                                 (xsa.generator(seed):randint, xoshiro256**), so a seed gives
--                                 the same interval on every machine; the percentiles are
--                                 type-7 quantiles of the resample means at (1-level)/2 and
--                                 (1+level)/2.
-- Chi-square distribution (df > 0)
--   chi2_cdf(x, df)          P(X <= x): the regularized lower incomplete gamma P(df/2, x/2)
--                            (its series below a + 1, Legendre's continued fraction above).
--   chi2_quantile(p, df)     the x with chi2_cdf(x, df) = p, p in (0, 1), by bisection on
--                            the cdf to a relative 1e-12 (sd_upper uses it).
--   sd_upper(s, df, level)   the one-sided upper confidence limit of a normal sigma from a
--                            sample sd s with df degrees of freedom: s sqrt(df / chi2(1-level, df)).
--   slope(xs, ys)            the least-squares slope of ys on xs (a per-seed trend: parts 4, 8, 9).
-- Several tests at once
--   holm(ps)                 Holm's step-down adjusted p-values, in the order given: with
--                            p(1) <= ... <= p(m), adj(i) = max over j <= i of min(1, (m - j + 1) p(j)).
--                            A hypothesis is rejected at family-wise level alpha when adj < alpha.
-- How many seeds
--   seeds_needed(sd, h [, level])  the smallest n >= 2 with t((1+level)/2, n-1) sd / sqrt(n) <= h:
--                                 the seeds a t interval of half-width h needs when the
--                                 differences have standard deviation sd (2 for sd = 0);
--                                 nil, "more than 1000000 seeds" beyond that.
-- Paired comparison over seeds
--   paired_summary(sa, xsa [, opts])  sa[i], xsa[i]: one metric (e.g. final val loss, lower
--                                 is better) of the two models trained with seed i. Returns
--                                 a table:
--       n, level                  number of seeds, confidence level
--       d                         per-seed difference, positive when XSA is better: by default
--                                 the improvement in percent, d[i] = 100 (sa[i]-xsa[i]) / |sa[i]|
--                                 (positive: XSA lower, whatever the sign of the metric); see
--                                 opts.diff (relative = false) and opts.better
--       mean, sd                  of d (sd nil for n = 1)
--       t_lo, t_hi                t interval of the mean of d (nil for n = 1)
--       boot_lo, boot_hi          bootstrap interval of the mean of d (nil for n = 1)
--       p_t, p_wilcoxon           paired t and exact Wilcoxon p-values for mean/median d = 0
--                                 (p_t nil for n = 1; p_wilcoxon nil if every d is 0, with
--                                 wilcoxon_note saying why)
--       k_xsa_lower               number of seeds with xsa[i] < sa[i]
--       k_xsa_better, ahead_word  number of seeds with d[i] > 0, and the word for XSA's value
--                                 there ("lower" by default): "XSA lower in 3 of 5 seeds"
--       diff, better, unit        how d is measured (as opts), unit "%" when relative
--       seeds_needed              (n > 1) per half-width h of opts.half_widths:
--                                 {half_width = h, n = seeds_needed(sd, h, level), note = why when nil}
--       verdict                   one line, decided by the t interval:
--           "XSA better by 1.23% (95% CI 0.40 to 2.05, N=5)"      interval above 0
--           "XSA worse by 0.80% (95% CI -1.50 to -0.10, N=5)"     interval below 0
--           "inconclusive at N=5 seeds (mean 0.55%, 95% CI -1.20 to 2.30)"
--           "XSA better by 0.42% on one seed (one seed cannot give an interval)"
--           absolute, unit "steps", words earlier/later: "XSA earlier by 12.5 steps (95% CI 3.1 to 21.9, N=5)"
--     opts: level (0.95), resamples, seed (passed to bootstrap_interval);
--       diff        "relative" (default: 100 (SA - XSA) / |SA|, percentage points) or
--                   "absolute" (SA - XSA, in opts.unit, e.g. "steps"); relative = false is
--                   "absolute" (for a metric near 0 or of either sign, where percent mislead);
--       better      "lower" (default: a loss, a step count) or "higher" (an accuracy; then
--                   d = 100 (XSA - SA) / |SA|, or XSA - SA: positive is still XSA better);
--       words       {better = "better", worse = "worse", ahead = "lower"|"higher"}: the
--                   verdict's words ("earlier"/"later" suit a step at which a loss is reached);
--       half_widths the half-widths of seeds_needed (default {1, 0.5} points when
--                   relative; none when absolute: the caller knows the unit's scale).
--       decimals    the decimals its numbers print with: two (relative) or one (absolute),
--                   more when the t interval's half-width needs them for two significant
--                   digits (xsa.numbers.decimals), so a small difference never prints as
--                   "mean 0.0, CI -0.0 to 0.1".
--     A verdict number that these decimals would show as 0 gets two significant digits.
--     sa[i] = 0 raises when relative (the improvement is undefined), as do lists of
--     different lengths; a mean, sd or bound that overflows a double raises.
-- Non-goals: other tests (sign test, permutation tests of two samples), multiple-comparison
-- corrections, distributions other than Student's t, weighted data.
local options = require "xsa.options"
local numbers = require "xsa.numbers"

local M = {}

local huge = math.huge
local floor, sqrt, log, exp, abs = math.floor, math.sqrt, math.log, math.exp, math.abs

local function is_finite(x) return type(x) == "number" and x == x and x ~= huge and x ~= -huge end

local function describe(v)
  if type(v) == "number" then return tostring(v) end
  return type(v)
end

-- Raises with the position of the first caller outside this file.
local THIS_FILE = debug.getinfo(1, "S").source
local function fail(fn, fmt, ...)
  local level = 2
  while true do
    local info = debug.getinfo(level, "S")
    if not info or info.source ~= THIS_FILE then break end
    level = level + 1
  end
  error("stats." .. fn .. ": " .. string.format(fmt, ...), level)
end

local function check_list(fn, xs, what)
  what = what or "values"
  if type(xs) ~= "table" then fail(fn, "expected a list of numbers (%s), got %s", what, type(xs)) end
  local n = #xs
  if n == 0 then fail(fn, "empty list of %s", what) end
  for i = 1, n do
    if not is_finite(xs[i]) then
      fail(fn, "%s[%d] is not a finite number (%s)", what, i, describe(xs[i]))
    end
  end
  return n
end

local function check_level(fn, level)
  if level == nil then return 0.95 end
  if not (type(level) == "number" and level > 0 and level < 1) then
    fail(fn, "level must be a number in (0, 1), got %s", describe(level))
  end
  return level
end

local function check_df(fn, df)
  if not (is_finite(df) and df > 0) then fail(fn, "df must be a finite number > 0, got %s", describe(df)) end
end

-- ---- descriptive ------------------------------------------------------------

-- Sums and squares run on the values times 2^-k, 2^k near max |x| (k clamped
-- to [-1000, 1000]), and the result is scaled back: a product by a power of
-- two is exact, so for ordinary values every bit is as without the scaling,
-- while values near the double limits (1e308, 1e-320) neither overflow nor
-- underflow on the way.
local function scale_of(xs, n)
  local top = 0.0
  for i = 1, n do
    local a = abs(xs[i])
    if a > top then top = a end
  end
  if top == 0 then return 1.0 end
  local k = floor(log(top, 2))
  if k > 1000 then k = 1000 elseif k < -1000 then k = -1000 end
  return 2.0 ^ k
end

local function mean_of(xs, n)
  local sc = scale_of(xs, n)
  local inv = 1.0 / sc
  local s = 0.0
  for i = 1, n do s = s + xs[i] * inv end
  local m = s / n
  -- one correction pass (the mean of the residuals) for extra accuracy
  local r = 0.0
  for i = 1, n do r = r + (xs[i] * inv - m) end
  return (m + r / n) * sc
end

-- The sample sd; nil when it overflows a double (callers raise).
local function sd_of(xs, n, m)
  local sc = scale_of(xs, n)
  local inv = 1.0 / sc
  local ms = m * inv
  local ss = 0.0
  for i = 1, n do
    local e = xs[i] * inv - ms
    ss = ss + e * e
  end
  local s = sqrt(ss / (n - 1)) * sc
  if s == huge then return nil end
  return s
end

local function sd_or_fail(fn, xs, n, m)
  local s = sd_of(xs, n, m)
  if not s then fail(fn, "the standard deviation of these values overflows a double (values near +-1.8e308)") end
  return s
end

function M.mean(xs)
  local n = check_list("mean", xs)
  return mean_of(xs, n)
end

function M.sd(xs)
  local n = check_list("sd", xs)
  if n < 2 then return nil, "the sample standard deviation needs at least 2 values" end
  return sd_or_fail("sd", xs, n, mean_of(xs, n))
end

local function quantile_sorted(s, n, p)
  local h = (n - 1) * p + 1
  local lo = floor(h)
  if lo >= n then return s[n] end
  return s[lo] + (h - lo) * (s[lo + 1] - s[lo])
end

local function sorted_copy(xs, n)
  local s = {}
  for i = 1, n do s[i] = xs[i] end
  table.sort(s)
  return s
end

function M.quantile(xs, p)
  local n = check_list("quantile", xs)
  if not (type(p) == "number" and p >= 0 and p <= 1) then
    fail("quantile", "p must be a number in [0, 1], got %s", describe(p))
  end
  return quantile_sorted(sorted_copy(xs, n), n, p)
end

-- ---- special functions ------------------------------------------------------

-- log(1 + x) without the cancellation of log(1 + x) for small x.
local function log1p(x)
  local u = 1.0 + x
  if u == 1.0 then return x end
  return log(u) * (x / (u - 1.0))
end

local HALF_LOG_2PI = 0.5 * log(2 * math.pi)

-- Stirling series remainder: lgamma(x) - ((x - 1/2) log x - x + log(2 pi)/2), x >= 10
-- (Bernoulli terms up to x^-13; the next one is below 1e-17 there).
local function stirling_rest(x)
  local x2 = 1.0 / (x * x)
  return (1 / 12 + x2 * (-1 / 360 + x2 * (1 / 1260 + x2 * (-1 / 1680 + x2 * (1 / 1188
          + x2 * (-691 / 360360 + x2 * (1 / 156))))))) / x
end

-- log Gamma(x) for x > 0: shift up to x >= 10, then Stirling.
local function lgamma(x)
  local shift = 0.0
  if x < 10 then
    local prod = 1.0
    while x < 10 do
      prod = prod * x
      x = x + 1
    end
    shift = log(prod)
  end
  return (x - 0.5) * log(x) - x + HALF_LOG_2PI + stirling_rest(x) - shift
end

-- log B(a, b), without the cancellation of lgamma(a) + lgamma(b) - lgamma(a + b) when
-- one argument is large (as R's lbeta): the large Stirling parts are combined by hand.
local function lbeta(a, b)
  local p, q = math.min(a, b), math.max(a, b)
  if p >= 10 then
    local corr = stirling_rest(p) + stirling_rest(q) - stirling_rest(p + q)
    return -0.5 * log(q) + HALF_LOG_2PI + corr + (p - 0.5) * log(p / (p + q)) + q * log1p(-p / (p + q))
  elseif q >= 10 then
    local corr = stirling_rest(q) - stirling_rest(p + q)
    return lgamma(p) + corr + p - p * log(p + q) + (q - 0.5) * log1p(-p / (p + q))
  end
  return lgamma(p) + lgamma(q) - lgamma(p + q)
end

-- Continued fraction of I_x(a, b) (without its prefactor), modified Lentz method.
-- Converges quickly for x < (a + 1) / (a + b + 2).
local TINY = 1e-300
local function beta_cf(a, b, x, y)
  local qab, qap, qam = a + b, a + 1, a - 1
  -- 1 - (a+b) x / (a+1); for b <= 1 as (1 - b + (a+b) y) / (a+1), a sum of terms >= 0,
  -- which keeps its accuracy when x is near 1 (large a, the t distribution's large df)
  local c, d = 1.0, nil
  if b <= 1 then d = (1.0 - b + qab * y) / qap else d = 1.0 - qab * x / qap end
  if abs(d) < TINY then d = TINY end
  d = 1.0 / d
  local h = d
  local max_iter = 100000 + floor(50 * sqrt(math.max(a, b)))
  for m = 1, max_iter do
    local m2 = 2 * m
    -- even step: d_{2m} = m (b - m) x / ((a + 2m - 1)(a + 2m))
    local aa = m * (b - m) * x / ((qam + m2) * (a + m2))
    d = 1.0 + aa * d
    if abs(d) < TINY then d = TINY end
    c = 1.0 + aa / c
    if abs(c) < TINY then c = TINY end
    d = 1.0 / d
    h = h * d * c
    -- odd step: d_{2m+1} = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1))
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
    d = 1.0 + aa * d
    if abs(d) < TINY then d = TINY end
    c = 1.0 + aa / c
    if abs(c) < TINY then c = TINY end
    d = 1.0 / d
    local del = d * c
    h = h * del
    if abs(del - 1.0) < 1e-16 then return h end
  end
  error(string.format("stats: incomplete beta continued fraction did not converge (a=%g, b=%g, x=%g)", a, b, x))
end

-- I_x(a, b) and its complement I_y(b, a) = 1 - I_x(a, b), where y = 1 - x is given
-- separately (with lx = log x, ly = log y) so that neither loses accuracy.
local function beta_inc_pair(a, b, x, y, lx, ly)
  if x <= 0 then return 0.0, 1.0 end
  if y <= 0 then return 1.0, 0.0 end
  local front = exp(a * lx + b * ly - lbeta(a, b))
  if x < (a + 1) / (a + b + 2) then
    local v = front * beta_cf(a, b, x, y) / a
    return v, 1.0 - v
  else
    local w = front * beta_cf(b, a, y, x) / b
    return 1.0 - w, w
  end
end

-- erf(x) and erfc(x) for x >= 0, each to full relative accuracy: for x < 1 the series
-- erf(x) = 2/sqrt(pi) exp(-x^2) sum_n 2^n x^(2n+1) / (1*3*...*(2n+1)) (positive terms),
-- otherwise Laplace's continued fraction
-- erfc(x) = exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))).
local SQRT_PI = sqrt(math.pi)
local function erf_erfc(x)
  if x < 1 then
    local x2, term, sum, k = 2 * x * x, x, x, 0
    repeat
      k = k + 1
      term = term * x2 / (2 * k + 1)
      sum = sum + term
    until term <= sum * 1e-17
    local e = 2 / SQRT_PI * exp(-x * x) * sum
    return e, 1.0 - e
  end
  if x > 27 then return 1.0, 0.0 end           -- erfc(27) < 1e-318
  local f, c, d = x, x, 0.0                    -- modified Lentz, b_j = x, a_j = j/2
  for j = 1, 5000 do
    local a = j / 2
    d = x + a * d
    if d == 0 then d = TINY end
    d = 1.0 / d
    c = x + a / c
    if c == 0 then c = TINY end
    local del = c * d
    f = f * del
    if abs(del - 1.0) < 1e-16 then break end
  end
  local ec = exp(-x * x) / SQRT_PI / f
  return 1.0 - ec, ec
end

-- Above this df the continued fraction for I_x(df/2, 1/2) loses accuracy near x = 1
-- (rounding grows like df * 1e-17); Hill's asymptotic normalisation is used instead.
local HILL_DF = 1e5

-- For t >= 0: P(T > t) and P(0 < T <= t) = 1/2 - P(T > t), each computed directly.
local function t_tails(t, df)
  if t == huge then return 0.0, 0.5 end
  if t == 0 then return 0.5, 0.0 end
  local r = t * t / df                     -- may overflow to inf for huge t
  if df >= HILL_DF then
    -- G. W. Hill (1970), CACM algorithm 395: with a = df - 1/2, y = a log(1 + t^2/df),
    -- z = sqrt(y) (1 + (y + 3 + (((-0.4 y - 3.3) y - 24) y - 85.5) / (0.8 y^2 + 100 + 48 a^2))
    -- / (48 a^2)) is standard normal to O(df^-3) and better (checked against 50-digit
    -- quadrature: relative error of the tail < 1e-17 for df >= 1e5 wherever it is
    -- representable), so P(T > t) = erfc(z / sqrt 2) / 2.
    if r == huge then return 0.0, 0.5 end
    local a = df - 0.5
    local b = 48 * a * a
    local y = a * log1p(r)
    local z = (((((-0.4 * y - 3.3) * y - 24) * y - 85.5) / (0.8 * y * y + 100 + b) + y + 3) / b + 1) * sqrt(y)
    local e, ec = erf_erfc(z / sqrt(2))
    return 0.5 * ec, 0.5 * e
  end
  local x, y, lx, ly
  if r == huge then
    x, y = 0.0, 1.0
  else
    x, y = 1.0 / (1.0 + r), r / (1.0 + r)   -- x = df/(df+t^2), y = t^2/(df+t^2)
    lx = -log1p(r)
    ly = log(r) + lx
  end
  if x == 0 then
    -- beyond double range for r: use the leading term of the tail, P(T > t) ~ C t^-df
    local lt = df / 2 * log(df) - df * log(t) - lbeta(df / 2, 0.5) - log(df)
    local tail = exp(lt)
    return tail, 0.5 - tail
  end
  local ix, iy = beta_inc_pair(df / 2, 0.5, x, y, lx, ly)
  return 0.5 * ix, 0.5 * iy
end

local function t_density(t, df)
  return exp(-(df + 1) / 2 * log1p(t * t / df) - 0.5 * log(df) - lbeta(df / 2, 0.5))
end

function M.t_cdf(x, df)
  if type(x) ~= "number" or x ~= x then fail("t_cdf", "x must be a number, got %s", describe(x)) end
  check_df("t_cdf", df)
  local tail, mid = t_tails(abs(x), df)
  if x < 0 then return tail end
  return 0.5 + mid
end

-- The t >= 0 with P(T > t) = q (kind "tail") or P(0 < T <= t) = q (kind "mid").
local function t_solve(q, df, kind)
  local function f(t)
    local tail, mid = t_tails(t, df)
    if kind == "tail" then return log(tail) - log(q) end
    return mid - q
  end
  local function fprime(t)
    local dens = t_density(t, df)
    if kind == "tail" then return -dens / t_tails(t, df) end
    return dens
  end
  -- bracket: f(lo) and f(hi) of opposite signs (f decreasing for "tail", increasing for "mid")
  local lo, hi = 0.0, 1.0
  local sgn = kind == "tail" and -1 or 1
  while sgn * f(hi) < 0 do
    lo = hi
    hi = hi * 2
    if hi == huge then return huge end
  end
  local t = (lo + hi) / 2
  for _ = 1, 400 do
    local ft = f(t)
    if ft == 0 then return t end
    if sgn * ft < 0 then lo = t else hi = t end
    local step = ft / fprime(t)
    local nt = t - step
    if not (nt > lo and nt < hi) then nt = (lo + hi) / 2 end
    if abs(nt - t) <= 4e-16 * abs(nt) or hi - lo <= 4e-16 * hi then return nt end
    t = nt
  end
  return t
end

function M.t_quantile(p, df)
  if type(p) ~= "number" or not (p >= 0 and p <= 1) then
    fail("t_quantile", "p must be a number in [0, 1], got %s", describe(p))
  end
  check_df("t_quantile", df)
  if p == 0 then return -huge end
  if p == 1 then return huge end
  if p == 0.5 then return 0.0 end
  if p > 0.25 and p < 0.75 then
    local t = t_solve(abs(p - 0.5), df, "mid")
    return p > 0.5 and t or -t
  end
  if p > 0.5 then return t_solve(1 - p, df, "tail") end
  return -t_solve(p, df, "tail")
end

-- ---- one-sample tests and intervals ----------------------------------------

function M.t_interval(xs, level)
  local n = check_list("t_interval", xs)
  level = check_level("t_interval", level)
  if n < 2 then return nil, "a t interval needs at least 2 values" end
  local m = mean_of(xs, n)
  local half = t_solve((1 - level) / 2, n - 1, "tail") * sd_or_fail("t_interval", xs, n, m) / sqrt(n)
  local lo, hi = m - half, m + half
  if not (is_finite(lo) and is_finite(hi)) then
    fail("t_interval", "the interval's bounds overflow a double (mean %g, half-width %g)", m, half)
  end
  return lo, hi
end

function M.paired_t_p(xs)
  local n = check_list("paired_t_p", xs)
  if n < 2 then return nil, "a t test needs at least 2 values" end
  local m = mean_of(xs, n)
  local s = sd_or_fail("paired_t_p", xs, n, m)
  if s == 0 then
    if m == 0 then return 1.0, 0.0 end
    return 0.0, m > 0 and huge or -huge
  end
  local t = m / (s / sqrt(n))
  local tail = t_tails(abs(t), n - 1)
  return math.min(1.0, 2 * tail), t
end

function M.wilcoxon_p(xs)
  local n0 = check_list("wilcoxon_p", xs)
  -- drop zeros, rank |x| with average ranks for ties; doubled ranks are integers
  local items = {}
  for i = 1, n0 do
    local v = xs[i]
    if v ~= 0 then items[#items + 1] = {a = abs(v), pos = v > 0} end
  end
  local n = #items
  if n == 0 then return nil, "every value is zero: no non-zero value left for the signed-rank test" end
  table.sort(items, function(u, v) return u.a < v.a end)
  local r2 = {}
  local i = 1
  while i <= n do
    local j = i
    while j < n and items[j + 1].a == items[i].a do j = j + 1 end
    for k = i, j do r2[k] = i + j end -- 2 * average of ranks i..j
    i = j + 1
  end
  local w2, total = 0, 0
  for k = 1, n do
    total = total + r2[k]
    if items[k].pos then w2 = w2 + r2[k] end
  end
  -- null distribution of the doubled W+: each rank positive with probability 1/2
  local prob = {[0] = 1.0}
  for s = 1, total do prob[s] = 0.0 end
  local reach = 0
  for k = 1, n do
    local r = r2[k]
    reach = reach + r
    for s = reach, r, -1 do prob[s] = 0.5 * (prob[s] + prob[s - r]) end
    for s = r - 1, 0, -1 do prob[s] = 0.5 * prob[s] end
  end
  local lowest = math.min(w2, total - w2)   -- the distribution is symmetric about total/2
  local p
  if 2 * lowest == total then
    p = 1.0
  else
    local cum = 0.0
    for s = 0, lowest do cum = cum + prob[s] end
    p = math.min(1.0, 2 * cum)
  end
  return p, w2 / 2
end


function M.bootstrap_interval(xs, opts)
  local n = check_list("bootstrap_interval", xs)
  if opts ~= nil and type(opts) ~= "table" then
    fail("bootstrap_interval", "opts must be a table, got %s", type(opts))
  end
  opts = options.check("stats.bootstrap_interval", opts, {"level", "resamples", "seed"}, 3)
  local level = check_level("bootstrap_interval", opts.level)
  local b = opts.resamples or 10000
  if math.type(b) ~= "integer" or b < 1 then
    fail("bootstrap_interval", "resamples must be a positive integer, got %s", describe(b))
  end
  local seed = opts.seed or 0
  if math.type(seed) ~= "integer" then
    fail("bootstrap_interval", "seed must be an integer, got %s", describe(seed))
  end
  local g = require("xsa.core").generator(seed) -- the one use of C here
  local sc = scale_of(xs, n) -- see mean_of
  local inv = 1.0 / sc
  local means = {}
  local rows = math.max(1, 65536 // n)
  local done = 0
  while done < b do
    local k = math.min(rows, b - done)
    local idx = g:randint(1, n + 1, k, n):totable()
    for r = 1, k do
      local row, s = idx[r], 0.0
      for j = 1, n do s = s + xs[row[j]] * inv end
      means[done + r] = s / n * sc
    end
    done = done + k
  end
  table.sort(means)
  return quantile_sorted(means, b, (1 - level) / 2), quantile_sorted(means, b, (1 + level) / 2)
end

-- ---- how many seeds ---------------------------------------------------------

-- ---- chi-square and Holm -------------------------------------------------------

-- The regularized lower incomplete gamma P(a, x), a > 0, x >= 0 (Numerical
-- Recipes' split: the series converges fast below a + 1, the continued
-- fraction of Q above it).
local function gamma_p(a, x)
  if x <= 0 then return 0.0 end
  local lpre = a * log(x) - x - lgamma(a)
  if x < a + 1 then
    local sum, term, ap = 1.0 / a, 1.0 / a, a
    for _ = 1, 10000 do
      ap = ap + 1
      term = term * x / ap
      sum = sum + term
      if abs(term) < abs(sum) * 1e-16 then break end
    end
    return math.min(1.0, sum * exp(lpre))
  end
  local tiny = 1e-300
  local b, c = x + 1 - a, 1 / tiny
  local d = 1 / b
  local h = d
  for i = 1, 10000 do
    local an = -i * (i - a)
    b = b + 2
    d = an * d + b
    if abs(d) < tiny then d = tiny end
    c = b + an / c
    if abs(c) < tiny then c = tiny end
    d = 1 / d
    local del = d * c
    h = h * del
    if abs(del - 1) < 1e-16 then break end
  end
  return math.max(0.0, 1.0 - exp(lpre) * h)
end

function M.chi2_cdf(x, df)
  if type(x) ~= "number" or x ~= x then fail("chi2_cdf", "x must be a number, got %s", describe(x)) end
  check_df("chi2_cdf", df)
  if x == huge then return 1.0 end
  return gamma_p(df / 2, x / 2)
end

function M.chi2_quantile(p, df)
  if type(p) ~= "number" or not (p > 0 and p < 1) then
    fail("chi2_quantile", "p must be a number in (0, 1), got %s", describe(p))
  end
  check_df("chi2_quantile", df)
  local lo, hi = 0.0, math.max(1.0, df)
  while gamma_p(df / 2, hi / 2) < p do lo, hi = hi, hi * 2 end
  for _ = 1, 200 do
    local mid = (lo + hi) / 2
    if gamma_p(df / 2, mid / 2) < p then lo = mid else hi = mid end
    if hi - lo <= 1e-12 * hi then break end
  end
  return (lo + hi) / 2
end

function M.sd_upper(s, df, level)
  if not (is_finite(s) and s >= 0) then fail("sd_upper", "s must be a finite number >= 0, got %s", describe(s)) end
  level = check_level("sd_upper", level)
  return s * sqrt(df / M.chi2_quantile(1 - level, df))
end

-- The least-squares slope of ys on xs (two lists of equal length, xs not all equal).
function M.slope(xs, ys)
  local n = check_list("slope", xs)
  if check_list("slope", ys) ~= n then fail("slope", "xs and ys differ in length (%d, %d)", n, #ys) end
  local mx, my, sxx, sxy = mean_of(xs, n), mean_of(ys, n), 0, 0
  for i = 1, n do
    sxx = sxx + (xs[i] - mx) ^ 2
    sxy = sxy + (xs[i] - mx) * (ys[i] - my)
  end
  if sxx == 0 then fail("slope", "the xs are all equal") end
  return sxy / sxx
end

function M.holm(ps)
  local m = check_list("holm", ps)
  local order = {}
  for i = 1, m do
    if not (ps[i] >= 0 and ps[i] <= 1) then fail("holm", "p-values must lie in [0, 1], got %s", describe(ps[i])) end
    order[i] = i
  end
  table.sort(order, function(a, b) return ps[a] < ps[b] or (ps[a] == ps[b] and a < b) end)
  local adj, run = {}, 0.0
  for j, i in ipairs(order) do
    run = math.max(run, math.min(1.0, (m - j + 1) * ps[i]))
    adj[i] = run
  end
  return adj
end

-- A sample size cap: beyond it the answer is "more than this" (a study of a
-- million seeds is not a plan, and the loop below must end).
local MAX_SEEDS = 1000000

function M.seeds_needed(sd, half_width, level)
  if not (is_finite(sd) and sd >= 0) then fail("seeds_needed", "sd must be a finite number >= 0, got %s", describe(sd)) end
  if not (is_finite(half_width) and half_width > 0) then
    fail("seeds_needed", "half_width must be a finite number > 0, got %s", describe(half_width))
  end
  level = check_level("seeds_needed", level)
  if sd == 0 then return 2 end
  local q = (1 - level) / 2
  -- t(q, df) falls with df, so with z = t(q, MAX_SEEDS) no n <= MAX_SEEDS below
  -- (z sd / h)^2 can do: start there and walk up (a few steps: t(n-1) -> z)
  local z = t_solve(q, MAX_SEEDS, "tail")
  local n = math.max(2, floor((z * sd / half_width) ^ 2))
  while n <= MAX_SEEDS do
    if t_solve(q, n - 1, "tail") * sd / sqrt(n) <= half_width then return n end
    n = n + 1
  end
  return nil, string.format("more than %d seeds", MAX_SEEDS)
end

-- ---- paired comparison ------------------------------------------------------

local function pct_level(level)
  return string.format("%g%%", 100 * level)
end

-- A number for a verdict: two decimals, or two significant digits when two
-- decimals would print 0.00 for a value that is not 0.
local function fmt(v, dec)
  dec = dec or 2
  if v ~= 0 and abs(v) < 0.5 * 10 ^ -dec then return string.format("%.2g", v) end
  return string.format("%." .. dec .. "f", v)
end

-- How a paired summary measures and words its differences (opts of
-- paired_summary): d = SA - XSA (or XSA - SA when higher is better),
-- relative (in % of |SA|, so the sign of d does not flip with the sign of
-- the metric) or absolute (in `unit`; relative = false says the same);
-- words for the verdict.
local function diff_spec(opts)
  local diff, better = opts.diff or (opts.relative == false and "absolute") or "relative", opts.better or "lower"
  if opts.relative ~= nil and type(opts.relative) ~= "boolean" then
    fail("paired_summary", "relative must be true or false, got %s", describe(opts.relative))
  end
  if diff ~= "relative" and diff ~= "absolute" then
    fail("paired_summary", "diff must be \"relative\" or \"absolute\", got %s", describe(diff))
  end
  if better ~= "lower" and better ~= "higher" then
    fail("paired_summary", "better must be \"lower\" or \"higher\" (lower: a loss; higher: an accuracy), got %s", describe(better))
  end
  local w = opts.words or {}
  local spec = {diff = diff, better = better, sign = better == "lower" and 1 or -1,
    better_word = w.better or "better", worse_word = w.worse or "worse", ahead_word = w.ahead or better,
    unit = diff == "relative" and "%" or (opts.unit or "")}
  -- the number with its unit: 1.23% (two decimals), 12.5 steps (one), or
  -- more where the interval is narrower (spec.decimals: paired_summary)
  spec.decimals = diff == "relative" and 2 or 1
  spec.fmt = diff == "relative" and function(x) return fmt(x, spec.decimals) .. "%" end
    or function(x) return fmt(x, spec.decimals) .. (spec.unit ~= "" and (" " .. spec.unit) or "") end
  spec.cifmt = function(x) return fmt(x, spec.decimals) end
  return spec
end

local function verdict(s, spec, lv)
  local n, m, f = s.n, s.mean, spec.fmt
  if n == 1 then
    if m == 0 then return "no difference on one seed (one seed cannot give an interval)" end
    return string.format("XSA %s by %s on one seed (one seed cannot give an interval)",
      m >= 0 and spec.better_word or spec.worse_word, f(abs(m)))
  end
  local ci = spec.cifmt(s.t_lo) .. " to " .. spec.cifmt(s.t_hi)
  if s.sd == 0 and m == 0 then
    return string.format("no difference at N=%d seeds (SA and XSA give the same values)", n)
  elseif s.t_lo > 0 then
    return string.format("XSA %s by %s (%s CI %s, N=%d)", spec.better_word, f(m), lv, ci, n)
  elseif s.t_hi < 0 then
    return string.format("XSA %s by %s (%s CI %s, N=%d)", spec.worse_word, f(-m), lv, ci, n)
  end
  return string.format("inconclusive at N=%d seeds (mean %s, %s CI %s)", n, f(m), lv, ci)
end

-- d[i] (positive: XSA better) and the count of seeds where XSA is ahead.
local function differences(sa, xs, n, spec)
  local d, k = {}, 0
  for i = 1, n do
    if spec.diff == "relative" then
      if sa[i] == 0 then
        fail("paired_summary", "SA value %d is 0: the improvement 100*(SA-XSA)/|SA| is undefined " ..
          "(relative = false compares differences instead)", i)
      end
      d[i] = spec.sign * 100 * (sa[i] - xs[i]) / abs(sa[i])
      -- SA - XSA can overflow where the ratio does not (values of opposite signs near 1e308)
      if not is_finite(d[i]) then d[i] = spec.sign * 100 * (sa[i] / abs(sa[i]) - xs[i] / abs(sa[i])) end
    else
      d[i] = spec.sign * (sa[i] - xs[i])
    end
    if not is_finite(d[i]) then
      fail("paired_summary", "the improvement of seed %d is not finite (SA %s, XSA %s)", i, sa[i], xs[i])
    end
    if d[i] > 0 then k = k + 1 end
  end
  return d, k
end

local SUMMARY_OPTIONS = {"level", "resamples", "seed", "better", "relative", "diff", "unit", "words", "half_widths"}

function M.paired_summary(sa, xs, opts)
  local n = check_list("paired_summary", sa, "SA values")
  local nx = check_list("paired_summary", xs, "XSA values")
  if n ~= nx then fail("paired_summary", "%d SA values but %d XSA values (one pair per seed)", n, nx) end
  if opts ~= nil and type(opts) ~= "table" then
    fail("paired_summary", "opts must be a table, got %s", type(opts))
  end
  opts = options.check("stats.paired_summary", opts, SUMMARY_OPTIONS, 3)
  local level = check_level("paired_summary", opts.level)
  local spec = diff_spec(opts)
  local d, k = differences(sa, xs, n, spec)
  local lower = 0
  for i = 1, n do if xs[i] < sa[i] then lower = lower + 1 end end
  local s = {n = n, level = level, d = d, mean = mean_of(d, n), k_xsa_lower = lower, k_xsa_better = k,
    diff = spec.diff, better = spec.better, relative = spec.diff == "relative", unit = spec.unit,
    ahead_word = spec.ahead_word}
  local pw, w_or_why = M.wilcoxon_p(d)
  s.p_wilcoxon = pw
  if not pw then s.wilcoxon_note = w_or_why end
  if n > 1 then
    s.sd = sd_or_fail("paired_summary", d, n, s.mean)
    s.t_lo, s.t_hi = M.t_interval(d, level)
    s.boot_lo, s.boot_hi = M.bootstrap_interval(d, {level = level, resamples = opts.resamples, seed = opts.seed})
    s.p_t = M.paired_t_p(d)
    s.seeds_needed = {}
    for i, h in ipairs(opts.half_widths or (spec.diff == "relative" and {1, 0.5} or {})) do
      local need, why = M.seeds_needed(s.sd, h, level)
      s.seeds_needed[i] = {half_width = h, n = need, note = why}
    end
  end
  -- two significant digits of the interval's half-width (of the mean with one seed or no spread)
  local half = n > 1 and (s.t_hi - s.t_lo) / 2 or 0
  spec.decimals = numbers.decimals(half > 0 and half or abs(s.mean), spec.decimals)
  s.decimals = spec.decimals
  s.verdict = verdict(s, spec, pct_level(level))
  return s
end

return M
