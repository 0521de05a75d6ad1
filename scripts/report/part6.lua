-- The report's section of part 6 (scripts/part6_lambda_sweep.lua declares it): what the part
-- measures, why, and sentences computed from the numbers of its summary.
local xsa = xsa or require "xsa"
xsa.sys.library_file()
local R = xsa.report
local f4, finite, pct, ci = R.f4, xsa.numbers.finite, xsa.study.pct, R.ci

return {
  -- its claim: per seed, the gain at λ = 0.5 minus the gain at each other λ (scripts/claims.lua)
  claim = {text = "λ = 0.5 gives the largest gain (part 6: the λ sweep)", short = "λ = 0.5 is best",
    rows = function(s, C, claim) local out = {}; C.lambda_rows(s, claim, out); return out end},
  -- the published verdict (make results): the notebook's claimed lambda; every lambda is in doc/results.md
  verdicts = xsa.report.sweep_verdicts(function(r) return string.format("part 6: λ = %g (the notebook's claim)", r.lambda) end,
    function(r) return r.lambda == 0.5 end),

  title = "Part 6: how much projection (λ sweep)",
  command = "xsa scripts/part6_lambda_sweep.lua",
  paper = "not in the paper: an extension (partial XSA, 0 < λ < 1)",
  about = "One initialisation per seed for every λ; each XSA(λ) model is trained against its own SA baseline " ..
    "cloned from that initialisation, on the same batches. The left panel is the paired improvement in percent " ..
    "of the final validation loss; the right panel the remaining self-value bias (mean cos(z_i, v_i) over " ..
    "layers and positions ≥ 1, on 8 validation batches of the first 80,000 tokens, part 5's probe set) of the " ..
    "trained models. No run is trained twice: λ = 1 is part 3's pair and λ = 0 its SA model (XSA(0) computes what SA " ..
    "computes), probed by part 5, and the other λ train against part 3's SA model.",
  explain = {"The question: is removing the whole component (λ = 1) best, or does keeping part of it help? " ..
    "Any λ lowers the post-projection alignment roughly in proportion; whether the loss follows is what the " ..
    "left panel measures."},
  words = function(s)
    local runs = (s.result or {}).runs or {}
    local out = {}
    local best
    for _, r in ipairs(runs) do
      local st = r.stats
      if st and st.n and st.n > 1 then
        out[#out + 1] = string.format("λ = %g: %s; XSA lower in %d of %d seeds; XSA mean cos(z,v) %s%s (SA baseline %s).",
          r.lambda, st.verdict, st.k_xsa_lower, st.n, f4(r.xsa_post_cos), ci(r.xsa_post_cos_ci, "%.4f"), f4(r.sa_post_cos))
      else
        out[#out + 1] = string.format("λ = %g: improvement %s, XSA mean cos(z,v) %s (SA baseline %s).", r.lambda,
          pct(r.improvement_pct), f4(r.xsa_post_cos), f4(r.sa_post_cos))
      end
      if finite(r.improvement_pct) and (not best or r.improvement_pct > best.improvement_pct) then best = r end
    end
    if best then
      local st = best.stats
      out[#out + 1] = string.format("The largest %s paired improvement in this sweep is %s at λ = %g%s.",
        st and st.n and st.n > 1 and "mean" or "", pct(best.improvement_pct), best.lambda,
        st and st.t_lo and string.format(" (95%% t interval %+.2f to %+.2f)", st.t_lo, st.t_hi) or " (one seed: no interval)")
    end
    return out
  end,
}
