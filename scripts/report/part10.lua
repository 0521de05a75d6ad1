-- The report's section of part 10 (scripts/part10_sensitivity.lua declares
-- it): the registered secondary question, the gain of one cell at half and
-- at twice the swept peak lr. No claim: doc/preregistration.md keeps it out
-- of the family.
local xsa = xsa or require "xsa"
xsa.sys.library_file()

return {
  title = "Part 10: the gain at half and at twice the chosen learning rate",
  command = "xsa scripts/part10_sensitivity.lua",
  paper = "nothing of the paper itself: a registered check of parts 8-9's recipe (the paper tunes its schedule; here one sweep per size chose the peak lr)",
  about = "The 2 x 128 model at seq_len 256, seeds 0-4, SA and XSA both at half, once and twice the peak lr the " ..
    "pilot's sweep chose for that size, on part 8's recipe and token budget. The once row is the grid's own cell.",
  explain = {"Why: a gain that exists only at one lr says more about the recipe than about the attention. This is " ..
    "registered as secondary: it is reported, never counted as support for a claim, and carries no verdict."},
  words = function(s)
    if s.incomplete then return {s.incomplete} end
    return {"Secondary and registered: no verdict; the table gives the gain at each lr with its 95% t interval."}
  end,
}
