-- plan.lua: the registered plan of parts 8 and 9 (doc/preregistration.md in
-- numbers). The parts, the pilot and the verdicts read it; nothing here is
-- changed after the first record of part 8 or part 9 (git log says when it
-- was committed). What a flag can change (--max-tokens, --tokens-per-step,
-- --steps) makes another configuration: its records and numbers are then
-- exploratory, never the registered grid's.
--
--   local plan = dofile("scripts/plan.lua")
--   for _, c in ipairs(plan.cells) do print(c.key, c.n_layer, c.d_model, c.seq_len, c.batch) end

if xsa then xsa.sys.library_file() end -- run alone, it says what it is
local P = {}

-- Equal tokens, each seen once: every run takes STEPS optimizer steps of
-- TOKENS_PER_STEP tokens (batch x seq_len), drawn without replacement from
-- the training text (the corpus minus the held-out tail), so no training
-- token is seen twice within a run and every cell sees the same number.
P.tokens_per_step = 1024
P.steps = 256
P.tokens = P.tokens_per_step * P.steps -- 262,144 per run
-- The held-out stories: the last 65,600 tokens of the corpus (64 windows of
-- 1024 + 1), the same tokens for every cell, evaluated whole at the end.
P.val_tokens = 65600
P.max_tokens = 1000000000 -- the whole corpus (1,760,266 tokens of the committed one)
P.eval_every, P.eval_batches = 32, 8 -- curve points on the first 8 val batches (8,192 tokens)

-- The recipe: AdamW, linear warmup over 10% of the steps, cosine decay to a
-- tenth of the peak lr at the last step; the peak lr per model size from the
-- registered sweep below.
P.recipe = {schedule = "cosine", warmup = 26, min_lr_frac = 0.1, weight_decay = 0.1}

-- Model sizes (layers x width; heads of 64). Non-embedding parameters:
-- 12 L d^2 (attention 4 d^2 and MLP 8 d^2 per block; biases, norms and the
-- embeddings left out, as the paper counts).
P.sizes = {
  {key = "2x128", n_layer = 2, d_model = 128, n_head = 2},
  {key = "4x256", n_layer = 4, d_model = 256, n_head = 4},
  {key = "6x384", n_layer = 6, d_model = 384, n_head = 6},
}
for _, s in ipairs(P.sizes) do s.params = 12 * s.n_layer * s.d_model * s.d_model end

-- The grid: part 8 varies seq_len at the smallest size, part 9 the size at
-- seq_len 256. The cell 2x128 at 256 belongs to both and is trained once.
P.lengths = {64, 256, 1024}
P.size_length = 256
local function cell(size, T)
  return {key = string.format("%s-T%d", size.key, T), size = size.key, n_layer = size.n_layer, d_model = size.d_model,
    n_head = size.n_head, params = size.params, seq_len = T, batch = P.tokens_per_step // T}
end
P.cells, P.part8, P.part9 = {}, {}, {}
local by = {}
local function add(c)
  if not by[c.key] then by[c.key] = c; P.cells[#P.cells + 1] = c end
  return by[c.key]
end
for _, T in ipairs(P.lengths) do P.part8[#P.part8 + 1] = add(cell(P.sizes[1], T)) end
for _, s in ipairs(P.sizes) do P.part9[#P.part9 + 1] = add(cell(s, P.size_length)) end
P.cell = by

-- The learning-rate sweep (the pilot's first stage): per size, SA alone at
-- seq_len 256, seed 1000, the peak lrs below; the chosen lr is the one with
-- the lowest final validation loss, used by SA and XSA alike. When the best
-- is at an end of the list, the next factor of 2 beyond it is run too, at
-- most twice per size.
P.lr_sweep = {seed = 1000, lrs = {1e-3, 2e-3, 4e-3}, factor = 2, max_extensions = 2}

-- The pilot's second stage: paired runs at the chosen lr, seeds 1000-1002,
-- in the cells below; the spread of its per-seed improvement sets N.
P.pilot = {seeds = {1000, 1001, 1002}, cells = {"2x128-T256", "4x256-T256"}}

-- Seeds of the grid: seeds 0 .. N-1 in every cell, N fixed from the pilot
-- (P.seeds_rule in scripts/verdicts.lua): s = the pooled sd of the pilot's
-- per-seed improvement % over its cells, raised to its 80% upper confidence
-- limit; N = the least n >= min with t(0.975, n-1) s / sqrt(n) <= half_width,
-- at most max (the compute budget: about 25 h of a 2-core Zen 3).
P.seeds = {half_width = 1.0, level = 0.95, upper = 0.80, min = 5, max = 24}

-- The family of confirmatory hypotheses, tested two-sided at alpha over the
-- grid's seeds with Holm's step-down correction. Each per-seed number is a
-- paired quantity (SA and XSA of one seed share init and batches):
--   gain    the mean over the five cells of the improvement % of XSA's final
--           val loss over SA's, 100 (SA - XSA) / SA;
--   length  the least-squares slope of the improvement % on log2(seq_len)
--           over part 8's cells: points per doubling of the context;
--   size    the slope on log2(non-embedding parameters) over part 9's cells:
--           points per doubling of the model.
-- Verdicts: "supported" (Holm-adjusted p < alpha, the paper's sign: XSA
-- better, gains growing), "contradicted" (adjusted p < alpha, the other
-- sign), "not decided" otherwise.
P.family = {
  {key = "gain", claim = "XSA's final validation loss is lower than SA's (mean over the grid's cells)", sign = 1},
  {key = "length", claim = "XSA's gain grows with the sequence length", sign = 1},
  {key = "size", claim = "XSA's gain grows with the model size", sign = 1},
}
P.alpha = 0.05
P.correction = "holm"

-- Stopping rule: a fixed N. No verdict is computed from fewer than N seeds
-- in every cell; the parts then say "k of N seeds" and nothing more.
P.stopping = "fixed"

-- Secondary (reported, outside the family, labelled exploratory): per-cell
-- improvement with its 95% t interval, the gap between validation and
-- training loss per cell and model, and the sensitivity of one cell
-- (2x128-T256, seeds 0-4) to half and twice the chosen lr.
P.sensitivity = {cell = "2x128-T256", seeds = {0, 1, 2, 3, 4}, factors = {0.5, 2}}

return P
