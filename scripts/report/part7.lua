-- The report's section of part 7 (scripts/part7_recipe.lua declares it): what the part
-- measures, why, and sentences computed from the numbers of its summary.
local xsa = xsa or require "xsa"
xsa.sys.library_file()

return {
  -- its claim: every endpoint of the warmup + cosine recipe (scripts/claims.lua)
  claim = {text = "XSA still beats SA under the usual recipe, linear warmup then cosine decay (part 7)",
    short = "holds under warmup + cosine", rows = function(s, C, claim)
      local out, r7 = {}, s and s.recipes and s.recipes.cosine
      if r7 then C.endpoint_rows(claim, r7.endpoints, out) end
      return out
    end},
  verdicts = function(s, row) -- the published verdicts (make results): final and mean val loss per recipe
    local rows = {}
    for _, rc in ipairs{"constant", "cosine"} do
      local r7, by = s.recipes and s.recipes[rc], {}
      for _, e in ipairs(r7 and r7.endpoints or {}) do by[e.key] = e.stats end
      if by.final then rows[#rows + 1] = row("part 7: " .. r7.label, by.final, by.mean) end
    end
    return rows
  end,

  title = "Part 7: does the verdict survive a standard training recipe?",
  command = "xsa scripts/part7_recipe.lua",
  paper = "not in the notebook: the same pair under the recipe small GPTs are usually trained with",
  about = "Part 3's pair (same model, data and 300 steps) under the notebook's constant learning rate and under " ..
    "a linear warmup followed by cosine decay to a tenth of the peak. The constant-rate runs are part 3's own. " ..
    "Every endpoint of doc/study.md (final and mean validation loss, the steps at which fixed losses are " ..
    "reached, the plateau-escape step) is compared per recipe, paired by seed.",
  explain = {"Why ask: at this scale standard attention sits on a loss plateau near the unigram entropy and " ..
    "leaves it at a step that depends on small differences. A warmup changes the first steps of Adam; if the " ..
    "plateau and its seed-to-seed spread shrink under it, the notebook's verdict may be a property of its recipe."},
  words = function(s)
    local out = {}
    for _, key in ipairs{"constant", "cosine"} do
      local r = (s.recipes or {})[key]
      for _, e in ipairs(r and r.endpoints or {}) do
        if e.stats and e.stats.verdict then out[#out + 1] = string.format("%s, %s: %s.", r.label, e.label, e.stats.verdict) end
      end
    end
    return out
  end,
}
