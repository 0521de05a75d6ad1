-- grid.lua: the runs of the registered grid (scripts/plan.lua) and of its
-- pilot: one group of runs per (cell, seed) that share initial weights and
-- batches (SA alone in the lr sweep; SA and XSA in the grid), trained on
-- equal tokens with each training token seen at most once, evaluated on the
-- held-out tail every cell shares, recorded once in results/<folder>/ and
-- read back from there by every part that needs it (part 8 and part 9 share
-- the cell 2x128-T256: one record, counted once).
--
--   local grid = dofile(dir .. "grid.lua")
--   local cfg = grid.config(plan, "grid", plan.cell["2x128-T256"], 0, 2e-3, {"sa", "xsa"})
--   local r = grid.group(ex, cfg)        -- r.runs = {SA's record, XSA's record}, r.cpu_s, r.tokens_seen
-- Not here: statistics and verdicts (verdicts.lua), figures (the parts).
local xsa = xsa or require "xsa"
xsa.sys.library_file() -- run alone, it says what it is
local study, train, state_files, store = xsa.study, xsa.train, xsa.state_files, xsa.store

local M = {}

-- The configuration of one group: what defines its numbers (the record's key).
-- o: max_tokens, tokens_per_step, steps override the plan (exploratory runs).
function M.config(plan, folder, cell, seed, lr, arms, o)
  o = o or {}
  local steps, tps = o.steps or plan.steps, o.tokens_per_step or plan.tokens_per_step
  local T = cell.seq_len
  assert(tps % T == 0, "tokens per step must be a multiple of seq_len")
  local r = plan.recipe
  return {part = folder, arms = arms, lambda = 1.0,
    data = {max_tokens = o.max_tokens or plan.max_tokens, val_tokens = o.val_tokens or plan.val_tokens, seq_len = T,
      batch_size = tps // T, seed = seed, once = true},
    model = {vocab = 50257, n_layer = cell.n_layer, d_model = cell.d_model, n_head = cell.n_head, seq_len = T, seed = seed},
    train = {steps = steps, lr = lr, weight_decay = r.weight_decay, schedule = r.schedule,
      warmup = math.max(0, math.floor(r.warmup * steps / plan.steps + 0.5)), min_lr_frac = r.min_lr_frac,
      eval_every = o.eval_every or plan.eval_every, eval_batches = o.eval_batches or plan.eval_batches,
      final_point = "all"}}
end

-- The record name of a group: FOLDER-CELL-[lrX-]seedS ("grid-2x128-T256-seed0").
function M.name(config, cell, with_lr)
  local lr = with_lr and string.format("-lr%g", config.train.lr) or ""
  return string.format("%s-%s%s-seed%d", config.part, cell.key, lr, config.model.seed)
end

-- Train and val loaders of a data configuration; raises when the run would
-- see a training window twice (steps x batch beyond one epoch).
function M.loaders(dc, steps)
  local tl, vl, info = xsa.data.tinystories{max_tokens = dc.max_tokens, seq_len = dc.seq_len, batch = dc.batch_size,
    val_tokens = dc.val_tokens, seed = dc.seed}
  if steps * dc.batch_size > tl.num_windows then
    error(string.format("grid: %d steps of %d windows need %d training windows; the %d training tokens give %d " ..
      "(each token is seen once: lower the steps or add text)", steps, dc.batch_size, steps * dc.batch_size,
      info.val_first, tl.num_windows), 0)
  end
  return tl, vl, info
end

-- The 0-based first training token of every window a run of `steps` steps
-- reads, in order (the test that no token repeats reads these).
function M.windows_read(tl, steps)
  local out = {}
  for k = 1, steps * tl.batch_size do out[k] = (tl:window(k) - 1) * (tl.seq_len + 1) end
  return out
end

-- Steps between the saved states of a group: a stopped session (SIGKILL
-- too) costs at most this many steps of every run it was training.
M.save_every = 16

-- Trains a group (its record result): runs in arm order, each a plain
-- record of xsa.train (label, train, val, step_loss, final_val), plus the
-- group's CPU seconds (all threads, summed over the sessions a resumed
-- group took; elapsed_s is the wall time, summed too) and the training
-- tokens each run saw. Every M.save_every steps, and when stopped, the
-- state is saved beside the cache entry `f`; the same call continues it to
-- the bit.
local function train_group(config, label, f, key)
  local tl, vl = M.loaders(config.data, config.train.steps)
  local say = function(fmt, ...) io.stderr:write(string.format(fmt, ...), "\n") end
  local runs, saved = xsa.runs.start(config, f, key, say, function(arm) return arm:upper() end)
  local c0, before = os.clock(), saved and tonumber(saved.extra.cpu_s) or 0
  local o = study.pair_options(config.train, {label = label, save_every = M.save_every,
    resume = saved and saved.resume, save = function(_, status, ctx)
      if status == "checkpoint" or status == "interrupted" then
        return state_files.write_group(f.base, key, ctx, {cpu_s = before + os.clock() - c0})
      end
      if status == "nan" then state_files.remove_group(f.base, #runs) end -- resuming would diverge again
    end})
  local r = train.runs(runs, tl, vl, o)
  r.cpu_s = before + os.clock() - c0
  r.tokens_seen = config.train.steps * config.data.batch_size * config.data.seq_len
  for _, e in ipairs(runs) do
    e.model:free()
    if e.optimizer then e.optimizer:free() end
  end
  tl:free()
  vl:free()
  return r
end

-- a finished group's result: every run done, every number finite (xsa.runs')
local check = xsa.runs.check
M.check = check

-- The group of `config`: from its record, else trained (and recorded).
-- Returns the result, its status ("record", "hit", "miss") and where.
function M.group(ex, config, cell, with_lr)
  local name = M.name(config, cell, with_lr)
  local key = store.cache_config(config)
  local f = store.files(ex.opts.out, name, key)
  local r, status, where = ex:cached(function(c) return train_group(c, name, f, key) end, {name = name,
    config = config, check = check, label = name})
  -- the entry (or record) holds the finished group now: its saved state is done with
  if status ~= "record" then state_files.remove_group(f.base, #config.arms) end
  return r, status, where
end

-- {arm = final val loss} and the end-of-training gap (val - the mean train
-- loss of the last eval interval) of a group's result.
function M.finals(r, arms)
  local f, gap = {}, {}
  for i, arm in ipairs(arms) do
    local x = r.runs[i]
    f[arm], gap[arm] = x.final_val, x.final_val - x.train[#x.train]
  end
  return f, gap
end

-- {steps =, arm = its val curve} of a group's result (the evaluation
-- points on the first eval_batches of the held-out tail; xsa.runs.check,
-- which every record read here passes, holds a point at every step), nil
-- when it kept no evaluation steps.
function M.curves(r, arms)
  if r.steps == nil then return nil end
  local out = {steps = r.steps}
  for i, arm in ipairs(arms) do out[arm] = r.runs[i].val end
  return out
end

return M
