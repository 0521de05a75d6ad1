-- The report's section of part 8 (scripts/part8_length.lua declares it): the
-- registered family's gain claim and the paper's length claim, decided as
-- doc/preregistration.md states (Holm over gain, length and size).
local xsa = xsa or require "xsa"
xsa.sys.library_file()
local family = dofile((debug.getinfo(1, "S").source:match("^@(.-)[^/]*$") or "./") .. "family.lua")

return {
  claims = {family.claim("gain", "XSA's final validation loss is lower than SA's at equal tokens, each seen once " ..
      "(parts 8-9, registered)", "XSA beats SA (equal tokens)"),
    family.claim("length", "XSA's gain grows with the sequence length at equal tokens (part 8, registered)",
      "gain grows with seq_len (equal tokens)")},
  title = "Part 8: the gain against the sequence length, at equal tokens",
  command = "xsa scripts/part8_length.lua",
  paper = "the paper's claim that XSA's gains grow with the sequence length (up to 16K there), at laptop scale",
  about = "SA/XSA pairs of the smallest model (2 layers x 128) at seq_len 64, 256 and 1024. Every run takes 256 " ..
    "AdamW steps of 1,024 tokens (batch 16, 4, 1) read once from the corpus, under warmup + cosine at the peak lr " ..
    "the pilot chose, and every cell is evaluated on the same held-out 65,600 tokens. The grid, the seeds, the " ..
    "endpoint and the correction were registered before the first record (doc/preregistration.md).",
  explain = {"Why equal tokens: part 4 fixed the text and let the steps grow with the length, so its longer " ..
    "contexts saw their data up to 7.6 times, and its length effect was mostly overfitting. Here every cell " ..
    "takes the same steps of the same number of tokens, and no training token is read twice."},
  words = family.words("length"),
}
