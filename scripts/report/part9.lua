-- The report's section of part 9 (scripts/part9_size.lua declares it): the
-- paper's size claim, decided as doc/preregistration.md states (Holm over
-- gain, length and size).
local xsa = xsa or require "xsa"
xsa.sys.library_file()
local family = dofile((debug.getinfo(1, "S").source:match("^@(.-)[^/]*$") or "./") .. "family.lua")

return {
  claims = {family.claim("size", "XSA's gain grows with the model size at equal tokens (part 9, registered)",
    "gain grows with size (equal tokens)")},
  title = "Part 9: the gain against the model size, at equal tokens",
  command = "xsa scripts/part9_size.lua",
  paper = "the paper's claim that XSA's gains grow with the model size (0.7B to 2.7B there), at laptop scale",
  about = "SA/XSA pairs of 2 x 128, 4 x 256 and 6 x 384 (layers x width; 0.4M, 3.1M and 10.6M non-embedding " ..
    "parameters) at seq_len 256, on the recipe and the token budget of part 8, each size at the peak lr its own " ..
    "sweep chose. The 2 x 128 cell is part 8's: one record serves both parts.",
  explain = {"What it can say: whether, over a 27-fold range of small models, the gain has a trend per doubling. " ..
    "The paper's sizes are 70 to 7,000 times larger; doc/study.md says what approaching them would take."},
  words = family.words("size"),
}
