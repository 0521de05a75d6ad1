-- The report's section of part 3 (scripts/part3_train.lua declares it): what the part
-- measures, why, and sentences computed from the numbers of its summary.
local xsa = xsa or require "xsa"
xsa.sys.library_file()
local R = xsa.report
local f4, finite, pct, compare, stats_words = R.f4, xsa.numbers.finite, xsa.study.pct, xsa.study.compare_words, R.stats_words

return {
  -- its claim (scripts/claims.lua numbers the registry's claims): every endpoint of the pairs
  claim = {text = "XSA beats SA at the notebook's scale (part 3: seq_len 64, 300 steps, constant lr)", short = "XSA beats SA",
    rows = function(s, C, claim)
      local out = {}
      if s and s.runs then
        local ok, eps = pcall(xsa.study.endpoint_stats, s.runs, s.seeds)
        C.endpoint_rows(claim, ok and eps or {}, out)
      end
      return out
    end},
  -- the published verdict (make results): the primary endpoint and the mean val loss (doc/study.md, "Endpoints")
  verdicts = function(s, row)
    if not s.stats then return {} end
    local ok, eps, mean = pcall(xsa.study.endpoint_stats, s.runs or {}, s.seeds)
    for _, e in ipairs(ok and eps or {}) do if e.key == "mean" then mean = e.stats end end
    return {row("part 3: the notebook's pair (seq_len 64, 300 steps)", s.stats, mean)}
  end,

  title = "Part 3: paired training of SA and XSA",
  command = "xsa scripts/part3_train.lua",
  missing_note = "(so there are no text samples of its SA and XSA models)",
  html = function(s, out) return xsa.samples.pair_html(s, out) end, -- its checkpoints continue three fixed prompts
  paper = "the training comparison of the paper's Figure 3, at toy scale",
  about = "Two models start from the same initial weights: one with standard attention (SA), one with XSA. " ..
    "At every step both see the same batch and take an AdamW step, so a difference in loss comes from the " ..
    "attention alone. The curves show the mean training loss since the previous evaluation point and the " ..
    "validation loss on a fixed subset of validation batches; the last point of each validation curve is over " ..
    "the whole validation set and is the final value of the table. With --seeds N the pair is trained N times " ..
    "from independent initial weights and batch orders, and the improvement 100·(SA − XSA)/SA of each seed " ..
    "gives the verdict with a 95% interval.",
  words = function(s)
    local r = s.result or {}
    local out = {}
    local runs = s.runs or {}
    if #runs > 1 then
      out[#out + 1] = string.format("%d seeds, one paired run each (each seed's numbers: the table below).", #runs)
      stats_words(s.stats, "final val loss", out)
      if type(s.timing) == "string" then out[#out + 1] = "Training: " .. s.timing .. "."
      elseif finite(s.train_s) then out[#out + 1] = string.format("Training took %.0f s over the %d paired runs.", s.train_s, #runs) end
      return out
    end
    if r.sa and r.xsa then
      out[#out + 1] = "In this run " .. compare(r.sa.final_val, r.xsa.final_val, "final validation loss") ..
        string.format(" (improvement %s; positive means XSA is lower).", pct(r.improvement_pct))
      local n = #(r.steps or {})
      if n > 0 then
        out[#out + 1] = string.format("Over the last interval (to step %d) the mean training loss is %s for SA and %s for XSA.",
          r.steps[n], f4(r.sa.train[n]), f4(r.xsa.train[n]))
        -- how often each model was ahead on validation at the evaluation points
        local ahead = 0
        for i = 2, n do if r.xsa.val[i] < r.sa.val[i] then ahead = ahead + 1 end end
        out[#out + 1] = string.format("XSA's validation loss was below SA's at %d of the %d evaluation points after step 0.",
          ahead, n - 1)
      end
      if type(s.timing) == "string" then -- trained now, or when and where its record or cache entry was
        out[#out + 1] = string.format("Training: %s (%.1f s of it evaluating), %.0f tokens/s over both models.",
          s.timing, r.eval_s or 0, r.tokens_per_s or 0)
      elseif finite(r.elapsed_s) then
        out[#out + 1] = string.format("Training took %.1f s (%.1f s of it evaluating), %.0f tokens/s over both models.",
          r.elapsed_s, r.eval_s or 0, r.tokens_per_s or 0)
      end
      out[#out + 1] = "One seed cannot give an interval: a single run at this scale can favour either model. " ..
        "Run with --seeds 5 for the verdict with a 95% interval."
    end
    return out
  end,
}
