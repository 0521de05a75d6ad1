-- xsa.train: training loops of the study: any number of models on the same
-- batches, and the SA/XSA pair as the call with two.
--
--   local res = xsa.train.pair(sa_model, xsa_model, train_loader, val_loader,
--     {steps = 300, lr = 1e-3, eval_every = 20, eval_batches = 10})
--   local res = xsa.train.runs({{model = a, label = "A"}, {model = b, label = "B"},
--     {model = c, label = "C"}}, train_loader, val_loader, {steps = 300})
--
-- The train loader is reset, then each step takes the next batch and gives
-- the same batch to every model, each with its own AdamW. A model's numbers
-- do not depend on the others it is trained with: three runs together give
-- each the losses and weights it gets trained alone, to the bit. For a pair
-- the two models must start from identical weights
-- (sa_model:clone{attention="xsa"} gives that).
--
-- Evaluation points: step 0, every eval_every steps, and the last step. At
-- each point the result records, for every model,
--   val[i]    mean loss over the first `eval_batches` val batches (the same
--             batches every time: loader:batch(1..k) is deterministic), under
--             no_grad; default k = min(10, all val batches);
--   train[i]  the mean training loss of the steps since the previous point
--             (each step's loss is the forward pass before that step's update);
--             at step 0 the loss of the first training batch, before any update.
-- The last point (the last step) is evaluated on the whole val set, not on
-- the first eval_batches, and final_val is that point: the end of the
-- validation curve is the number a table reports (opts.final_point =
-- "subset" keeps the last point on eval_batches and evaluates final_val
-- separately, as before).
--
-- The result is plain data (serialises to JSON):
--   { status = "done" | "interrupted" | "nan",
--     steps = {0, 20, ...}, completed_steps = n,
--     sa  = {label=, train={...}, val={...}, step_loss={...}, final_val=},
--     xsa = {...same...},
--     improvement_pct = 100 * (sa.final_val - xsa.final_val) / sa.final_val,
--     elapsed_s, train_s, eval_s, tokens (per model), tokens_per_s (all models),
--     config = {steps, lr, ..., batch_size, seq_len, val_batches, sa=model config, xsa=...} }
-- Positive improvement_pct means XSA's final val loss is lower. runs() has
-- runs = {record, ...} in place of sa and xsa, config.models = {model
-- config, ...} in place of config.sa and config.xsa, and no improvement_pct.
--
-- Stopping: opts.save(result, status, ctx) is called when training ends, when a
-- loss becomes NaN/inf, and on Ctrl-C or SIGTERM (the "interrupted!" error); it writes
-- whatever the caller keeps (results; checkpoints from ctx = {sa=, xsa=,
-- sa_opt=, xsa_opt=}, the models and their AdamW; for runs() ctx = {models=,
-- optimizers=}) and returns a short text saying where, which is printed. A
-- NaN/inf loss then raises an error naming the step and the model; an
-- interrupt is re-raised as "interrupted!".
--
-- Resuming: with opts.save_every = N the save hook is also called with status
-- "checkpoint" after every N-th step (not the last), and on Ctrl-C; then
-- ctx.state is the plain-data state the run can continue from
-- (xsa.checkpoint describes it). pair(..., {resume = state, optimizers =
-- {sa_opt, xsa_opt}}) (runs(): runs[i].optimizer) with the models and AdamW
-- saved with it (model:save{optimizer=}, xsa.gpt.load) continues the run:
-- the loader is put back, the steps a model already took are skipped, a
-- point that was being evaluated is evaluated again; the numbers are those
-- of a run never stopped, to the bit. Timings add up over the sessions. The
-- optimizers passed in are not freed here.
--
-- Reusing a baseline: opts.baseline (runs(): runs[i].baseline) = the `sa`
-- record of an earlier result with the same data, initial weights,
-- optimizer settings, steps and eval settings (it must hold step_loss). The
-- SA model is then neither trained nor evaluated: training is deterministic,
-- so its numbers would be the same to the last bit; its record is copied.
-- The lambda sweep uses this so that five lambdas cost six trainings
-- instead of ten.
--
-- How a step is spread (a strategy; the step itself is written once):
-- serial, or data-parallel with opts.data_parallel = true under mpirun with
-- K > 1 ranks. Every rank runs the same loop on the same batches and takes
-- its rows of each: rank r the rows floor(r B / K) + 1 .. floor((r + 1) B / K)
-- (as even as it gets; with fewer rows than ranks some ranks get none and
-- add nothing). All models' gradients, each rank's scaled by its rows / B,
-- and their step losses are summed over the ranks in ONE MPI_Allreduce per
-- step (xsa.mpi.allreduce_grads), which gives the gradient of the whole
-- batch's mean loss however the rows fell; every rank then applies the same
-- AdamW update, so the models stay identical. Evaluation splits each val
-- batch the same way and sums the weighted losses (xsa.mpi.sum). The numbers
-- equal the one-process run's up to the order of summation (1e-5 relative,
-- not bit for bit). Only rank 0 shows progress and calls opts.save; a run
-- cannot be resumed from a saved state (save_every is ignored). One process
-- (or no mpirun): the option does nothing.
--
-- Learning-rate schedule: opts.schedule = "constant" (the default, the
-- notebook's: lr at every step) or "cosine", opts.warmup = W steps (default
-- 0) and opts.min_lr_frac (default 0.1). Update s (1-based) uses M.lr_at:
-- lr s / W during the warmup (s <= W), then lr (constant), or (cosine)
-- lr_min + (lr - lr_min)(1 + cos(pi (s - 1 - W) / (steps - W))) / 2 with
-- lr_min = min_lr_frac lr, as llm.c's get_learning_rate: the last update
-- is a hair above lr_min. Every model gets the same rate at every step. The
-- default schedule never touches the optimizers' rate (the numbers of runs
-- before schedules existed stay the same to the bit) and adds nothing to
-- result.config; another one adds schedule, warmup and min_lr_frac there.
--
-- Non-goals: gradient accumulation, schedules other than the two above.
local progress = require "xsa.progress"
local finite = require("xsa.numbers").finite
local sys = require "xsa.sys"
local options = require "xsa.options"
local checkpoint = require "xsa.checkpoint"

local M = {}

local core = require "xsa.core" -- the C functions and libraries

local function free(t)
  if type(t) == "userdata" and t.free then t:free() end
end

-- The defaults, here only (xsa.study's flags read them too); AdamW's are
-- the optimizer's own (xsa.optim.defaults).
local AD = core.optim.defaults
M.DEFAULTS = {steps = 300, eval_every = 20, eval_batches = 10, lr = AD.lr, weight_decay = AD.weight_decay,
  betas = {AD.betas[1], AD.betas[2]}, eps = AD.eps, save_every = 0, final_point = "all", schedule = "constant", warmup = 0,
  min_lr_frac = 0.1}

-- The options pair reads (xsa.options.check refuses any other key).
M.PAIR_OPTIONS = {"steps", "eval_every", "lr", "save_every", "eval_batches", "final_point", "data_parallel",
  "resume", "names", "label", "betas", "eps", "weight_decay", "baseline", "optimizers", "progress_bar",
  "progress", "on_point", "save", "quiet", "schedule", "warmup", "min_lr_frac"}

-- runs() takes the same, less what it reads per run (label, baseline,
-- optimizer), plus layout: "pair" (two runs, SA then XSA) lays the result,
-- the save hook's ctx and the saved state out as pair() does (pair() is
-- runs() with it), so a pair trained as a group keeps a pair's records.
M.RUNS_OPTIONS = {"layout"}
for _, k in ipairs(M.PAIR_OPTIONS) do
  if k ~= "names" and k ~= "baseline" and k ~= "optimizers" then M.RUNS_OPTIONS[#M.RUNS_OPTIONS + 1] = k end
end
local RUN_FIELDS = {"model", "label", "optimizer", "baseline"}

-- Misuse found while preparing a run is raised as a refusal, and the public
-- function re-raises its text at level 2: the message names the caller's
-- line, whichever helper found the fault.
local Refusal = {}
local function refuse(msg) error(setmetatable({msg = msg}, Refusal), 0) end
local function refusal_text(err)
  if getmetatable(err) == Refusal then return err.msg end
  error(err, 0) -- anything else (an interrupt, a bad model) goes on as it was
end

----------------------------------------------------------------------------
-- strategies: how the rows of a batch are split over processes and how
-- gradients and losses are reduced; nothing else differs between them

-- This rank's rows of a batch of b rows under data parallelism: the first
-- row (1-based), the count, and its weight count / b. A batch of fewer rows
-- than ranks (a last, partial val batch) leaves some ranks none: count 0,
-- weight 0.
local function share(b)
  local mpi = core.mpi
  local K, r = mpi.size(), mpi.rank()
  local lo, hi = (r * b) // K, ((r + 1) * b) // K
  return lo + 1, hi - lo, (hi - lo) / b
end
M.share = share

-- One process: every row, nothing to reduce. Each model is updated as soon
-- as its backward is done (a group of one), so an interrupt finds the
-- models before it in the step already updated.
local serial = {root = true}
function serial.rows(x, y) return x, y, 1 end
function serial.release() end
function serial.sum(values) return values end
function serial.reduce(_, _, losses) return losses end
function serial.groups(list)
  local g = {}
  for i, e in ipairs(list) do g[i] = {e} end
  return g
end

-- K ranks: this rank's rows (nil, nil, 0 when it has none of a batch), and
-- every model of a step in one group, reduced by one allreduce.
local function data_parallel(mpi)
  local s = {root = mpi.rank() == 0}
  function s.rows(x, y)
    local first, n, w = share(x:size(1))
    if n == 0 then return nil, nil, 0 end
    return x:narrow(1, first, n), y:narrow(1, first, n), w
  end
  function s.release(x, y) free(x); free(y) end
  function s.sum(values) return mpi.sum(values) end
  function s.reduce(models, w, losses) return mpi.allreduce_grads(models, w, losses) end
  function s.groups(list) return {list} end
  return s
end

local function strategy(wanted)
  if wanted and core.mpi and core.mpi.size() > 1 then return data_parallel(core.mpi) end
  return serial
end

-- Mean loss of model over loader:batch(1..n) under no_grad, each batch
-- split and the weighted losses summed by strategy s.
local function evaluate_with(model, loader, n, s)
  local sum = core.no_grad(function()
    local acc = 0
    for i = 1, n do
      local x, y, w = s.rows(loader:batch(i))
      if x then -- nil: none of this batch's rows are this rank's
        local loss = model:loss(x, y)
        acc = acc + w * loss:item()
        free(loss)
        s.release(x, y)
      end
    end
    return acc
  end)
  return s.sum({sum})[1] / n
end

-- Mean loss of model over loader:batch(1..n) under no_grad; with
-- data_parallel (under mpirun) each rank evaluates its rows of every batch
-- and the weighted losses are summed over the ranks.
function M.evaluate(model, loader, n, data_parallel_wanted)
  local total = loader:num_batches()
  if n ~= nil and (math.type(n) ~= "integer" or n < 1) then
    error("train.evaluate: n must be a positive integer", 2)
  end
  n = math.min(n or total, total)
  if n < 1 then error("train.evaluate: the loader has no batches", 2) end
  return evaluate_with(model, loader, n, strategy(data_parallel_wanted))
end

----------------------------------------------------------------------------
-- small pieces

local function mean(list, from, to)
  local s, c = 0, 0
  for i = from, to do s = s + list[i]; c = c + 1 end
  return c > 0 and s / c or 0 / 0
end

local function improvement(sa_value, xsa_value)
  if not (finite(sa_value) and finite(xsa_value)) or sa_value == 0 then return nil end
  return 100 * (sa_value - xsa_value) / sa_value
end
M.improvement = improvement

-- A copy of a model's config() without functions/userdata (JSON-safe).
local function plain(v)
  local t = type(v)
  if t == "table" then
    local out = {}
    for k, x in pairs(v) do
      local px = plain(x)
      if px ~= nil then out[k] = px end
    end
    return out
  elseif t == "number" or t == "string" or t == "boolean" then
    return v
  end
  return nil
end

local function model_config(m)
  if type(m.config) == "function" or (type(m) == "userdata" and m.config) then
    local ok, c = pcall(m.config, m)
    if ok then
      local p = plain(c)
      -- an attention written in Lua: named as its checkpoints name it
      if type(c) == "table" and type(c.attention) == "function" then p.attention = "function" end
      return p
    end
  end
  return nil
end

M.loader_position = checkpoint.loader_position
M.check_resume = checkpoint.check

-- The learning rate of update `step` (1-based) under schedule o = {lr=,
-- steps=, warmup=, schedule=, min_lr_frac=} (see the header).
function M.lr_at(step, o)
  local lr, warmup = o.lr, o.warmup or M.DEFAULTS.warmup
  if step <= warmup then return lr * step / warmup end
  if (o.schedule or M.DEFAULTS.schedule) == "constant" then return lr end
  local lr_min = (o.min_lr_frac or M.DEFAULTS.min_lr_frac) * lr
  local ratio = (step - 1 - warmup) / (o.steps - warmup)
  return lr_min + 0.5 * (1 + math.cos(math.pi * ratio)) * (lr - lr_min)
end

-- "name v name v ..." of labels and values in format fmt.
local function by_label(entries, values, fmt)
  local parts = {}
  for i, e in ipairs(entries) do parts[i] = string.format("%s " .. fmt, e.label, values[i]) end
  return table.concat(parts, " ")
end

----------------------------------------------------------------------------
-- preparing a run: the settings checked, the result, resume, optimizers

-- The schedule of opts checked, or nil for the default (constant, no
-- warmup): then the optimizers' rate is never set.
local function schedule_of(what, opts, steps, lr)
  local D = M.DEFAULTS
  local schedule, warmup, frac = opts.schedule or D.schedule, opts.warmup or D.warmup, opts.min_lr_frac or D.min_lr_frac
  if schedule ~= "constant" and schedule ~= "cosine" then refuse(what .. ": schedule must be \"constant\" or \"cosine\"") end
  if math.type(warmup) ~= "integer" or warmup < 0 or warmup > steps then
    refuse(what .. ": warmup must be an integer from 0 to steps")
  end
  if type(frac) ~= "number" or not (frac >= 0 and frac <= 1) then refuse(what .. ": min_lr_frac must be a number in [0, 1]") end
  if schedule == "constant" and warmup == 0 then return nil end
  return {lr = lr, steps = steps, warmup = warmup, schedule = schedule, min_lr_frac = frac}
end

-- The run's settings from opts, checked (in the order pair always checked them).
local function settings(what, opts, train_loader, val_loader)
  local D = M.DEFAULTS
  local S = {what = what, opts = opts, train_loader = train_loader, val_loader = val_loader}
  S.steps, S.eval_every = opts.steps or D.steps, opts.eval_every or D.eval_every
  S.lr, S.save_every = opts.lr or D.lr, opts.save_every or D.save_every
  if math.type(S.steps) ~= "integer" or S.steps < 1 then refuse(what .. ": steps must be a positive integer") end
  if math.type(S.eval_every) ~= "integer" or S.eval_every < 1 then refuse(what .. ": eval_every must be a positive integer") end
  if math.type(S.save_every) ~= "integer" or S.save_every < 0 then refuse(what .. ": save_every must be an integer >= 0") end
  S.nval = val_loader:num_batches()
  if S.nval < 1 then refuse(what .. ": the val loader has no batches") end
  local eb = opts.eval_batches or D.eval_batches
  if math.type(eb) ~= "integer" or eb < 1 then refuse(what .. ": eval_batches must be a positive integer") end
  S.eval_batches = math.min(eb, S.nval)
  if type(S.lr) ~= "number" or not (S.lr > 0 and S.lr <= 3.4e38) then refuse(what .. ": lr must be a positive finite number") end
  S.sched = schedule_of(what, opts, S.steps, S.lr)
  S.final_point = opts.final_point or D.final_point
  if S.final_point ~= "all" and S.final_point ~= "subset" then refuse(what .. ": final_point must be \"all\" or \"subset\"") end
  S.strategy = strategy(opts.data_parallel == true)
  if S.strategy ~= serial then
    if opts.resume then refuse(what .. ": data_parallel runs cannot resume from a saved state") end
    S.save_every = 0
  end
  S.label = opts.label or (what == "train.pair" and "pair" or "runs")
  S.adam = {lr = S.lr, betas = opts.betas or {D.betas[1], D.betas[2]}, eps = opts.eps or D.eps,
    weight_decay = opts.weight_decay or D.weight_decay}
  S.bs, S.T = train_loader.batch_size, train_loader.seq_len
  return S
end

-- The result so far: nothing recorded yet; the records and the models'
-- configs are placed by layout.place (pair: sa and xsa; runs: lists).
local function new_result(S)
  local tl, vl, sched, adam = S.train_loader, S.val_loader, S.sched, S.adam
  local result = {
    status = "running", steps = {}, completed_steps = 0,
    config = {
      steps = S.steps, lr = S.lr, eval_every = S.eval_every, eval_batches = S.eval_batches,
      final_point = S.final_point, val_batches = S.nval, train_batches = tl:num_batches(),
      batch_size = S.bs, seq_len = S.T, weight_decay = adam.weight_decay, betas = adam.betas, eps = adam.eps,
      schedule = sched and sched.schedule, warmup = sched and sched.warmup, min_lr_frac = sched and sched.min_lr_frac,
      train_windows = tl.num_windows, val_windows = vl.num_windows,
    },
    elapsed_s = 0, train_s = 0, eval_s = 0, tokens = 0, tokens_per_s = 0,
  }
  local recs, cfgs = {}, {}
  for i, e in ipairs(S.entries) do
    e.rec = {label = e.label, train = {}, val = {}, step_loss = {}}
    recs[i], cfgs[i] = e.rec, model_config(e.model)
  end
  S.layout.place(result, recs, cfgs)
  return result
end

-- A reused baseline: its step losses copied in; the model is not trained.
local function use_baseline(S, e)
  local base = e.base
  if type(base.step_loss) ~= "table" or #base.step_loss < S.steps or type(base.val) ~= "table" then
    refuse(S.what .. ": " .. e.baseline_misuse)
  end
  for i = 1, S.steps do e.rec.step_loss[i] = base.step_loss[i] end
  e.rec.reused = true
end

-- Each model's AdamW: the one given (its settings must be the run's) or a
-- new one, freed when the run ends. count0 and the steps taken before are
-- what taken() counts from.
local function attach_optimizers(S)
  for _, e in ipairs(S.entries) do
    local o = e.opt
    if o then
      if o.weight_decay and (o.weight_decay ~= S.adam.weight_decay or o.eps ~= S.adam.eps) then
        refuse(S.what .. ": " .. e.optimizer_misuse)
      end
      o.lr = S.lr
    end
  end
  for _, e in ipairs(S.entries) do
    if not e.opt then e.opt, e.own_opt = core.optim.adamw(e.model:parameters(), S.adam), true end
    e.count0, e.done = e.opt.step_count, e.ms0
  end
end

-- The checked settings, entries, result, resume state and optimizers of a
-- run; `entries` = {{key=, model=, label=, opt=, base=, ...}, ...}.
local function prepare(S, entries, layout)
  local opts = S.opts
  S.entries, S.layout = entries, layout
  S.result = new_result(S)
  local active = {}
  for _, e in ipairs(entries) do
    e.ms0 = 0
    active[e.key] = e.base == nil
    if e.base then use_baseline(S, e) end
  end
  S.prior = {elapsed = 0, train = 0, eval = 0}
  if opts.resume then
    local prior, why = checkpoint.resume(opts.resume, S.result, S.steps, S.what, active)
    if not prior then refuse(S.what .. ": " .. why) end
    S.prior, S.resume = prior, opts.resume
    for _, e in ipairs(entries) do e.ms0 = opts.resume.model_steps[e.key] end
  end
  attach_optimizers(S)
  S.bar = opts.progress_bar or progress.new{label = S.label, total = S.steps,
    mode = (opts.progress == false or not S.strategy.root) and "off" or nil}
  S.t0 = progress.now()
  S.train_time, S.eval_time = S.prior.train, S.prior.eval
  S.start = S.result.completed_steps
  return S
end

----------------------------------------------------------------------------
-- the run

-- Optimizer steps entry e's model has taken: AdamW's own count when it has
-- one (right even when an interrupt lands between opt:step() and the next line).
local function taken(e)
  local c = e.opt.step_count
  if math.type(c) == "integer" and math.type(e.count0) == "integer" then return e.ms0 + c - e.count0 end
  return e.done
end

local function rate(S)
  local n = 0
  for _, e in ipairs(S.entries) do if not e.base then n = n + 1 end end
  return S.train_time > 0 and (n * S.result.completed_steps * S.bs * S.T) / S.train_time or 0 / 0
end

local function is_point(S, step) return step % S.eval_every == 0 or step == S.steps end

-- The mean step loss of every model over the steps after `from` up to `to`.
local function since(S, from, to)
  local t = {}
  for i, e in ipairs(S.entries) do t[i] = mean(e.rec.step_loss, from + 1, to) end
  return t
end

-- An evaluation point at `step` with the train losses `trains`.
local function point(S, step, trains)
  local result = S.result
  local te = progress.now()
  local n = (step == S.steps and S.final_point == "all") and S.nval or S.eval_batches
  local vals = {}
  for i, e in ipairs(S.entries) do
    if e.base then vals[i] = e.base.val[#result.steps + 1] else vals[i] = evaluate_with(e.model, S.val_loader, n, S.strategy) end
  end
  S.eval_time = S.eval_time + (progress.now() - te)
  result.steps[#result.steps + 1] = step
  for i, e in ipairs(S.entries) do
    e.rec.val[#e.rec.val + 1] = vals[i]
    e.rec.train[#e.rec.train + 1] = trains[i]
  end
  local eta = step > S.start and (progress.now() - S.t0) / (step - S.start) * (S.steps - step) or nil
  local line = string.format("%s step %d/%d  train %s  val %s  %s tok/s  ETA %s", S.label, step, S.steps,
    by_label(S.entries, trains, "%.4f"), by_label(S.entries, vals, "%.4f"), progress.rate(rate(S)), progress.duration(eta))
  if S.bar.mode == "log" then S.bar:log(line) end
  S.bar.val_text = "val " .. by_label(S.entries, vals, "%.3f")
  if S.opts.on_point then S.opts.on_point(step, vals, trains, result) end
end

-- Step 0: the loss of the first training batch before any update.
local function first_point(S)
  local s = S.strategy
  S.train_loader:reset()
  local x, y, w = s.rows(S.train_loader:batch(1))
  local vals = {}
  for i, e in ipairs(S.entries) do
    vals[i] = (e.base or not x) and 0 or w * core.no_grad(function()
      local l = e.model:loss(x, y)
      local v = l:item()
      free(l)
      return v
    end)
  end
  s.release(x, y)
  local sums, l0 = s.sum(vals), {}
  for i, e in ipairs(S.entries) do l0[i] = e.base and e.base.train[1] or sums[i] end
  point(S, 0, l0)
end

local function forward_backward(model, x, y)
  local loss = model:loss(x, y)
  local v = loss:item()
  loss:backward()
  free(loss)
  return v
end

-- One training step of every model on the next batch: each model not yet
-- past it (a reused baseline, or one that took this step before the run was
-- stopped, keeps its recorded loss) runs its rows forward and backward, the
-- strategy reduces gradients and losses, then each is updated. Returns
-- false, with S.nan set, when a loss is NaN/inf (the same on every rank: all
-- stop here).
local function train_step(S, step)
  local s = S.strategy
  local x, y = S.train_loader:next()
  local xs, ys, w = s.rows(x, y)
  local todo = {}
  for _, e in ipairs(S.entries) do
    if e.base or taken(e) >= step then e.cur = e.rec.step_loss[step] else todo[#todo + 1] = e end
  end
  for _, group in ipairs(s.groups(todo)) do
    local models, losses = {}, {}
    for i, e in ipairs(group) do
      e.opt:zero_grad()
      models[i] = e.model
      losses[i] = xs and forward_backward(e.model, xs, ys) or 0 -- no rows here: zero gradient, weight 0
    end
    losses = s.reduce(models, w, losses)
    for i, e in ipairs(group) do
      local v = losses[i]
      if not finite(v) then
        S.nan = {step = step, model = e.label, value = (v ~= v) and "NaN" or (v > 0 and "+inf" or "-inf")}
        s.release(xs, ys)
        return false
      end
      e.rec.step_loss[step] = v -- before the update: a state saved after it has this step's loss
      if S.sched then e.opt.lr = M.lr_at(step, S.sched) end
      e.opt:step()
      e.done, e.cur = step, v
    end
  end
  s.release(xs, ys)
  return true
end

-- The final numbers: the last point when it covered the whole val set.
local function final_vals(S)
  local te = progress.now()
  for _, e in ipairs(S.entries) do
    if e.base then
      e.rec.final_val = e.base.final_val
    elseif S.eval_batches == S.nval or S.final_point == "all" then
      e.rec.final_val = e.rec.val[#e.rec.val]
    else
      e.rec.final_val = evaluate_with(e.model, S.val_loader, S.nval, S.strategy)
    end
  end
  S.eval_time = S.eval_time + (progress.now() - te)
  S.layout.complete(S.result)
end

local function finish_times(S)
  local result = S.result
  result.elapsed_s = S.prior.elapsed + (progress.now() - S.t0)
  result.train_s = S.train_time
  result.eval_s = S.eval_time
  result.tokens = result.completed_steps * S.bs * S.T
  result.tokens_per_s = S.train_time > 0 and rate(S) or 0
end

-- The resumable state (xsa.checkpoint.state) as the run stands.
local function snapshot(S, status)
  local c = S.result.completed_steps
  local ms, active = {}, {}
  for _, e in ipairs(S.entries) do ms[e.key], active[e.key] = taken(e), e.base == nil end
  local mark = S.rng_mark
  local rng = (mark and mark[1] == c) and mark[2] or (core.get_rng_state and core.get_rng_state())
  return checkpoint.state{result = S.result, status = status, model_steps = ms, active = active,
    loader = S.train_loader, rng = rng}
end

-- Calls opts.save (rank 0 only); returns where it wrote, or nil.
local function save(S, status)
  local result, opts = S.result, S.opts
  result.status = status
  finish_times(S)
  if not (opts.save and S.strategy.root) then return nil end
  local ctx = S.layout.ctx(S.entries)
  if status == "checkpoint" or status == "interrupted" then
    ctx.state = snapshot(S, status == "checkpoint" and "running" or status)
  end
  local ok, where = pcall(opts.save, result, status, ctx)
  if status == "checkpoint" then result.status = "running" end
  if not ok then
    -- Ctrl-C while saving is still Ctrl-C (the interrupted save follows)
    if status ~= "interrupted" and sys.interrupted(where) then error(where, 0) end
    io.stderr:write(S.what, ": saving failed: ", tostring(where), "\n")
    return nil
  end
  return where
end

local function loop(S)
  if S.resume then checkpoint.restore(S.resume, S.train_loader) else first_point(S) end
  local start = S.start
  local last = S.result.steps[#S.result.steps]
  if last < start and is_point(S, start) then -- stopped while evaluating
    point(S, start, since(S, last, start))
    last = start
  end
  for step = start + 1, S.steps do
    S.rng_mark = {step - 1, core.get_rng_state and core.get_rng_state()}
    local ts = progress.now()
    if not train_step(S, step) then return end
    S.train_time = S.train_time + (progress.now() - ts)
    S.result.completed_steps = step
    -- evaluate first, so the bar shows this point's val loss, not the last one
    if is_point(S, step) then
      point(S, step, since(S, last, step))
      last = step
    end
    local cur = {}
    for i, e in ipairs(S.entries) do cur[i] = e.cur end
    S.bar:update(step, "loss " .. by_label(S.entries, cur, "%.3f") .. (S.bar.val_text and ("  " .. S.bar.val_text) or ""),
      rate(S))
    if S.save_every > 0 and step % S.save_every == 0 and step < S.steps then save(S, "checkpoint") end
  end
  final_vals(S)
end

-- The optimizers made here are internal: their state (2 x parameters each)
-- goes as soon as the run has been saved, not whenever the GC gets to it.
local function free_optimizers(S)
  for _, e in ipairs(S.entries) do if e.own_opt then free(e.opt) end end
end

-- Runs the loop, then saves and reports how it ended.
local function run(S)
  local ok, err = xpcall(loop, sys.traceback_unless_interrupted, S)
  S.bar:finish()
  if not ok then
    local interrupted = sys.interrupted(err)
    local where = save(S, interrupted and "interrupted" or "error")
    free_optimizers(S)
    if interrupted then
      io.stderr:write(string.format("\n%s: interrupted after %d of %d steps%s\n", S.label,
        S.result.completed_steps, S.steps, where and ("; results so far written to " .. where) or ""))
      error("interrupted!", 0)
    end
    error(err, 0)
  end
  local nan = S.nan
  if nan then
    S.result.failure = {step = nan.step, model = nan.model, value = nan.value}
    local where = save(S, "nan")
    free_optimizers(S)
    error(string.format("%s: %s: the %s loss became %s at step %d; training stopped%s", S.what, S.label,
      nan.model, nan.value, nan.step, where and ("; what was saved: " .. where) or ""), 0)
  end
  local where = save(S, "done")
  free_optimizers(S)
  if where and not S.opts.quiet then io.stderr:write(string.format("%s: written %s\n", S.label, where)) end
  return S.result
end

----------------------------------------------------------------------------
-- the two calls

-- Where a pair keeps its two records and how its save hook sees the models.
local PAIR = {}
function PAIR.place(result, recs, cfgs)
  result.sa, result.xsa = recs[1], recs[2]
  result.config.sa, result.config.xsa = cfgs[1], cfgs[2]
end
function PAIR.ctx(entries)
  return {sa = entries[1].model, xsa = entries[2].model, sa_opt = entries[1].opt, xsa_opt = entries[2].opt}
end
function PAIR.complete(result) result.improvement_pct = improvement(result.sa.final_val, result.xsa.final_val) end

local RUNS = {}
function RUNS.place(result, recs, cfgs) result.runs, result.config.models = recs, cfgs end
function RUNS.ctx(entries)
  local ctx = {models = {}, optimizers = {}}
  for i, e in ipairs(entries) do ctx.models[i], ctx.optimizers[i] = e.model, e.opt end
  return ctx
end
function RUNS.complete() end

-- opts checked by xsa.options (unknown names refused), or a refusal.
local function checked_options(what, opts, allowed)
  local ok, o = pcall(options.check, what, opts, allowed, 0)
  if not ok then refuse(o) end
  return o
end

-- runs[i]'s entry: keyed as the layout keeps its record (pair: "sa",
-- "xsa", with pair()'s messages), or i.
local function run_entry(r, i, pair)
  local where = string.format("runs[%d]", i)
  checked_options("train.runs: " .. where, r, RUN_FIELDS)
  if r.model == nil then refuse("train.runs: " .. where .. ".model is missing") end
  local e = {key = i, model = r.model, label = r.label or ("run " .. i), opt = r.optimizer, base = r.baseline,
    baseline_misuse = where .. ".baseline must be the record of a run of the same length (with step_loss)",
    optimizer_misuse = where .. ".optimizer has other settings than the run"}
  if pair then
    e.key, e.optimizer_misuse = i == 1 and "sa" or "xsa", "opts.optimizers have other settings than the run"
    e.baseline_misuse = "opts.baseline must be the sa record of a run of the same length (with step_loss)"
  end
  return e
end

local function prepare_runs(runs, train_loader, val_loader, opts)
  opts = checked_options("train.runs", opts, M.RUNS_OPTIONS)
  local pair = opts.layout == "pair"
  if opts.layout ~= nil and not pair then refuse("train.runs: layout must be \"pair\" or nil") end
  if type(runs) ~= "table" or #runs < 1 then refuse("train.runs: runs must be a list of {model = ...}") end
  if pair and (#runs ~= 2 or runs[2].baseline ~= nil) then
    refuse("train.runs: layout \"pair\" takes two runs, SA then XSA (only SA's may be a baseline)")
  end
  local entries = {}
  for i, r in ipairs(runs) do entries[i] = run_entry(r, i, pair) end
  local S = settings(pair and "train.pair" or "train.runs", opts, train_loader, val_loader)
  return prepare(S, entries, pair and PAIR or RUNS)
end

-- pair()'s two models as runs() with layout "pair", opts checked as pair's.
local function prepare_pair(sa_model, xsa_model, train_loader, val_loader, opts)
  opts = checked_options("train.pair", opts, M.PAIR_OPTIONS)
  local names, given = opts.names or {"SA", "XSA"}, opts.optimizers or {}
  local o = {layout = "pair"}
  for k, v in pairs(opts) do if k ~= "names" and k ~= "baseline" and k ~= "optimizers" then o[k] = v end end
  return prepare_runs({{model = sa_model, label = names[1], optimizer = given[1], baseline = opts.baseline},
    {model = xsa_model, label = names[2], optimizer = given[2]}}, train_loader, val_loader, o)
end

-- Raises a refusal from fn at the level of the public function's caller.
local function prepared(fn, ...)
  local ok, S = pcall(fn, ...)
  if not ok then error(refusal_text(S), 3) end
  return S
end

-- Paired training (the header): two models, result.sa and result.xsa.
function M.pair(sa_model, xsa_model, train_loader, val_loader, opts)
  return run(prepared(prepare_pair, sa_model, xsa_model, train_loader, val_loader, opts))
end

-- Any number of models on the same batches: runs = {{model=, label=,
-- optimizer=, baseline=}, ...}; result.runs[i] is run i's record.
function M.runs(runs, train_loader, val_loader, opts)
  return run(prepared(prepare_runs, runs, train_loader, val_loader, opts))
end

return M
