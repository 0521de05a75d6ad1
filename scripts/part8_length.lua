-- part8_length.lua: the paper's length claim at equal tokens, each seen
-- once: SA/XSA pairs at seq_len 64, 256 and 1024 (2 layers x 128), 256 steps
-- of 1,024 tokens each, warmup + cosine at the swept peak lr, evaluated on
-- the held-out tail every cell shares (doc/preregistration.md). Prints the
-- gain per length and, once every cell of the grid has its N seeds, the
-- registered verdicts; plots/part8_length.png.
--   xsa scripts/pilot.lua ...                      # first: the lr and N
--   xsa scripts/part8_length.lua --jobs 2          # the registered N seeds
local xsa = xsa or require "xsa"
local DIR = (debug.getinfo(1, "S").source:match("^@(.-)[^/]*$") or "./")
local plan, axis = dofile(DIR .. "plan.lua"), dofile(DIR .. "axis.lua")

local P = axis.part{name = "part8", title = "Sequence length at equal tokens", report = "report/part8.lua",
  summary = "The paper's length claim, pre-registered: SA/XSA pairs at seq_len 64, 256 and 1024 on equal tokens,\n" ..
    "each seen once, under warmup + cosine; the gain per length and its slope per doubling.",
  cells = plan.part8, x = function(c) return math.log(c.seq_len, 2) end, tic = function(c) return tostring(c.seq_len) end,
  xlabel = "sequence length (log scale)", column = "seq_len", figure = "part8_length"}

return xsa.experiment.part(P, ...)
