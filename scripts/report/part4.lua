-- The report's section of part 4 (scripts/part4_seqlen.lua declares it): what the part
-- measures, why, and sentences computed from the numbers of its summary.
local xsa = xsa or require "xsa"
xsa.sys.library_file()
local finite, compare = xsa.numbers.finite, xsa.study.compare_words

return {
  -- its claim: per seed, the slope of the gain over log2(seq_len) (scripts/claims.lua)
  claim = {text = "XSA's gain grows with the sequence length (part 4: seq_len 64 to 256, 500 steps)",
    short = "gain grows with seq_len", rows = function(s, C, claim) local out = {}; C.seqlen_rows(s, claim, out); return out end},
  -- the published verdicts (make results): one per length
  verdicts = xsa.report.sweep_verdicts(function(r) return string.format("part 4: seq_len %d (500 steps)", r.seq_len) end),

  title = "Part 4: sequence length",
  command = "xsa scripts/part4_seqlen.lua",
  paper = "the question of the paper's Figure 5 (does the gain grow with the sequence length?), at toy scale",
  about = "The paired training of part 3, repeated with a fresh pair of models for each sequence length " ..
    "(the window of text the model sees) and each seed. The figure shows the final validation loss of both " ..
    "models per length and XSA's improvement in percent (positive when XSA's loss is lower).",
  explain = {"The reasoning behind the question: with a longer window each token attends over more positions, " ..
    "so there is more room for the self-value lean to accumulate and more for XSA to remove. The paper reports " ..
    "the gain growing with length at 1.3B parameters; a 2-layer model on a small corpus may or may not show the " ..
    "same trend, and the intervals below say how much of any difference is beyond seed-to-seed noise."},
  words = function(s)
    local runs = (s.result or {}).runs or {}
    local out, better, clear = {}, 0, 0
    for _, r in ipairs(runs) do
      local st = r.stats
      if st and st.n and st.n > 1 then
        out[#out + 1] = string.format("seq_len %d: %s; XSA lower in %d of %d seeds.", r.seq_len, st.verdict,
          st.k_xsa_lower, st.n)
        if st.t_lo and (st.t_lo > 0 or st.t_hi < 0) then clear = clear + 1 end
      else
        out[#out + 1] = string.format("seq_len %d: %s.", r.seq_len, compare(r.sa_val, r.xsa_val, "final validation loss"))
      end
      if finite(r.xsa_val) and finite(r.sa_val) and r.xsa_val < r.sa_val then better = better + 1 end
    end
    if #runs > 0 then
      local st = runs[1].stats
      if st and st.n and st.n > 1 then
        out[#out + 1] = string.format("The 95%% interval of the mean improvement excludes 0 at %d of the %d lengths.",
          clear, #runs)
      else
        out[#out + 1] = string.format("XSA's loss is lower at %d of the %d lengths in this run (one seed: no interval).",
          better, #runs)
      end
    end
    return out
  end,
}
