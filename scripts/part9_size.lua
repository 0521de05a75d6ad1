-- part9_size.lua: the paper's size claim at equal tokens, each seen once:
-- SA/XSA pairs of 2x128, 4x256 and 6x384 (layers x width) at seq_len 256,
-- 256 steps of 1,024 tokens, warmup + cosine at each size's swept peak lr,
-- the same held-out tail as part 8 (doc/preregistration.md). Prints the gain
-- per size and, once every cell has its N seeds, the registered verdicts;
-- plots/part9_size.png. Its 2x128 cell is part 8's (one record, both parts).
--   xsa scripts/part9_size.lua --jobs 2
local xsa = xsa or require "xsa"
local DIR = (debug.getinfo(1, "S").source:match("^@(.-)[^/]*$") or "./")
local plan, axis = dofile(DIR .. "plan.lua"), dofile(DIR .. "axis.lua")

local P = axis.part{name = "part9", title = "Model size at equal tokens", report = "report/part9.lua",
  summary = "The paper's size claim, pre-registered: SA/XSA pairs of three sizes at seq_len 256 on equal tokens,\n" ..
    "each seen once, under warmup + cosine; the gain per size and its slope per doubling of the parameters.",
  cells = plan.part9, x = function(c) return math.log(c.params, 2) end,
  tic = function(c) return string.format("%s (%.1fM)", c.size, c.params / 1e6) end,
  xlabel = "non-embedding parameters (log scale)", column = "size", figure = "part9_size"}

return xsa.experiment.part(P, ...)
