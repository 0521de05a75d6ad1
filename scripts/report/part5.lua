-- The report's section of part 5 (scripts/part5_bias_trained.lua declares it): what the part
-- measures, why, and sentences computed from the numbers of its summary.
local xsa = xsa or require "xsa"
xsa.sys.library_file()
local R = xsa.report
local f4, finite, ci = R.f4, xsa.numbers.finite, R.ci

return {
  title = "Part 5: the bias after training",
  command = "xsa scripts/part5_bias_trained.lua --train",
  paper = "the diagnostic of the paper's Figure 1 again, now after training",
  about = "The probe of part 1 applied to the trained models of part 3 (every seed) and to their shared initial " ..
    "weights, on the validation batches of the first 80,000 tokens. A fourth metric, the mean cos(z_i, v_i) " ..
    "after the projection, shows what is left of the self-value component in what each layer passes on " ..
    "(for SA, z = y). \"Bias removed\" is 100·(|pre| − |post|)/|pre|. Both cosines are averaged over positions " ..
    "≥ 1: at position 0 a token attends only to itself, so y_0 = v_0 (cosine 1) and z_0 is rounding residue; " ..
    "including it would raise the pre-projection mean by about 1/64 of the gap to 1 and make \"bias removed\" " ..
    "partly float noise.",
  explain = {"What to look for: the projection does not stop the alignment from forming inside the raw attention " ..
    "output Y (a trained XSA model can even align Y with v more strongly than SA does, since whatever forms there " ..
    "is removed before it leaves the layer); it removes it from Z, the output the rest of the network sees."},
  words = function(s)
    local out = {}
    local names = {untrained = "the untrained model", sa = "trained SA", xsa = "trained XSA"}
    local by = {}
    local n = #(s.runs or {})
    for _, m in ipairs(s.means or {}) do
      by[m.model] = m
      out[#out + 1] = string.format("For %s, averaged over layers (positions ≥ 1%s), cos(y_i,v_i) before the projection is %s%s and cos(z_i,v_i) after it is %s%s (%s of the bias removed); over all positions %s and %s.",
        names[m.model] or m.model, n > 1 and string.format(", mean over %d seeds", n) or "", f4(m.pre), ci(m.pre_ci, "%.4f"),
        f4(m.post), ci(m.post_ci, "%.4f"), finite(m.removed_pct) and string.format("%.1f%%", m.removed_pct) or "n/a",
        f4(m.pre_all), f4(m.post_all))
    end
    if by.sa and by.xsa and finite(by.sa.pre) and finite(by.xsa.pre) then
      out[#out + 1] = string.format("Before the projection, trained XSA's mean cos(y_i,v_i) is %s trained SA's (%s vs %s).",
        by.xsa.pre > by.sa.pre and "higher than" or (by.xsa.pre < by.sa.pre and "lower than" or "equal to"),
        f4(by.xsa.pre), f4(by.sa.pre))
    end
    return out
  end,
}
