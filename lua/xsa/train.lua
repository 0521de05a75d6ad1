-- xsa.train: the paired training loop of the study.
--
--   local res = xsa.train.pair(sa_model, xsa_model, train_loader, val_loader,
--     {steps = 300, lr = 1e-3, eval_every = 20, eval_batches = 10})
--
-- The two models must start from identical weights (sa_model:clone{attention="xsa"}
-- gives that). The train loader is reset, then each step takes the next batch
-- and gives the same batch to both models, each with its own AdamW.
--
-- Evaluation points: step 0, every eval_every steps, and the last step. At
-- each point the result records, for both models,
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
--     elapsed_s, train_s, eval_s, tokens (per model), tokens_per_s (both models),
--     config = {steps, lr, ..., batch_size, seq_len, val_batches, sa=model config, xsa=...} }
-- Positive improvement_pct means XSA's final val loss is lower.
--
-- Stopping: opts.save(result, status, ctx) is called when training ends, when a
-- loss becomes NaN/inf, and on Ctrl-C or SIGTERM (the "interrupted!" error); it writes
-- whatever the caller keeps (results; checkpoints from ctx = {sa=, xsa=,
-- sa_opt=, xsa_opt=}, the models and their AdamW) and returns a short text
-- saying where, which is printed. A NaN/inf loss then raises an error naming
-- the step and the model; an interrupt is re-raised as "interrupted!".
--
-- Resuming: with opts.save_every = N the save hook is also called with status
-- "checkpoint" after every N-th step (not the last), and on Ctrl-C; then
-- ctx.state is the plain-data state the run can continue from: the result so
-- far (status "running" / "interrupted"), completed_steps, model_steps =
-- {sa=, xsa=} (the optimizer steps each model took: after an interrupt one
-- model may be one step past completed_steps, its loss for that step
-- recorded), loader = {epoch=, position=} (the train loader after
-- completed_steps batches) and rng (xsa.get_rng_state() at that step).
-- pair(..., {resume = state, optimizers = {sa_opt, xsa_opt}}) with the
-- models and AdamW saved with it (model:save{optimizer=}, xsa.gpt.load)
-- continues the run: the loader is put back (loader:seek, else reset and
-- next() again), the steps a model already took are skipped, a point that
-- was being evaluated is evaluated again; the numbers are those of a run
-- never stopped, to the bit. Timings add up over the sessions. The
-- optimizers passed in are not freed here.
--
-- Reusing a baseline: opts.baseline = the `sa` record of an earlier result
-- with the same data, initial weights, optimizer settings, steps and eval
-- settings (it must hold step_loss). The SA model is then neither trained nor
-- evaluated: training is deterministic, so its numbers would be the same to
-- the last bit; its record is copied. The lambda sweep uses this so that five
-- lambdas cost six trainings instead of ten.
--
-- Data-parallel training: opts.data_parallel = true under mpirun with K > 1
-- ranks. Every rank runs the same loop on the same batches and takes its
-- rows of each: rank r the rows floor(r B / K) + 1 .. floor((r + 1) B / K)
-- (as even as it gets; with fewer rows than ranks some ranks get none and
-- add nothing). Both
-- models' gradients, each rank's scaled by its rows / B, and the two step
-- losses are summed over the ranks in ONE MPI_Allreduce per step
-- (xsa.mpi.allreduce_grads), which gives the gradient of the whole batch's
-- mean loss however the rows fell; every rank then applies the same AdamW
-- update, so the models stay identical. Evaluation splits each val batch the
-- same way and sums the weighted losses (xsa.mpi.sum). The numbers equal the
-- one-process run's up to the order of summation (1e-5 relative, not bit for
-- bit). Only rank 0 shows progress and calls opts.save; a run cannot be
-- resumed from a saved state (save_every is ignored). One process (or no
-- mpirun): the option does nothing.
--
-- Learning-rate schedule: opts.schedule = "constant" (the default, the
-- notebook's: lr at every step) or "cosine", opts.warmup = W steps (default
-- 0) and opts.min_lr_frac (default 0.1). Update s (1-based) uses M.lr_at:
-- lr s / W during the warmup (s <= W), then lr (constant), or (cosine)
-- lr_min + (lr - lr_min)(1 + cos(pi (s - 1 - W) / (steps - W))) / 2 with
-- lr_min = min_lr_frac lr, as llm.c's get_learning_rate: the last update
-- is a hair above lr_min. Both models get the same rate at every step. The
-- default schedule never touches the optimizers' rate (the numbers of runs
-- before schedules existed stay the same to the bit) and adds nothing to
-- result.config; another one adds schedule, warmup and min_lr_frac there.
--
-- Non-goals: gradient accumulation, schedules other than the two above, more
-- than two models per run (call pair again with a fresh pair).
local progress = require "xsa.progress"
local finite = require("xsa.numbers").finite
local sys = require "xsa.sys"
local options = require "xsa.options"

local M = {}

local function xsa_lib() return package.loaded.xsa end

local function free(t)
  if type(t) == "userdata" and t.free then t:free() end
end

-- This rank's rows of a batch of b rows under data parallelism: the first
-- row (1-based), the count, and its weight count / b. A batch of fewer rows
-- than ranks (a last, partial val batch) leaves some ranks none: count 0,
-- weight 0.
local function share(b)
  local mpi = xsa_lib().mpi
  local K, r = mpi.size(), mpi.rank()
  local lo, hi = (r * b) // K, ((r + 1) * b) // K
  return lo + 1, hi - lo, (hi - lo) / b
end
M.share = share

-- This rank's rows of inputs x and targets y and their weight; nil, nil, 0
-- when it has none of this batch.
local function my_rows(x, y)
  local first, n, w = share(x:size(1))
  if n == 0 then return nil, nil, 0 end
  return x:narrow(1, first, n), y:narrow(1, first, n), w
end

-- Mean loss of model over loader:batch(1..n) under no_grad; with
-- data_parallel (under mpirun) each rank evaluates its rows of every batch
-- and the weighted losses are summed over the ranks.
function M.evaluate(model, loader, n, data_parallel)
  local xsa = xsa_lib()
  local total = loader:num_batches()
  if n ~= nil and (math.type(n) ~= "integer" or n < 1) then
    error("train.evaluate: n must be a positive integer", 2)
  end
  n = math.min(n or total, total)
  if n < 1 then error("train.evaluate: the loader has no batches", 2) end
  local dp = data_parallel and xsa.mpi and xsa.mpi.size() > 1
  local sum = xsa.no_grad(function()
    local acc = 0
    for i = 1, n do
      local x, y = loader:batch(i)
      local w = 1
      if dp then x, y, w = my_rows(x, y) end
      if x then -- nil: none of this batch's rows are this rank's
        local loss = model:loss(x, y)
        acc = acc + w * loss:item()
        free(loss)
        if dp then free(x); free(y) end
      end
    end
    return acc
  end)
  if dp then sum = xsa.mpi.sum({sum})[1] end
  return sum / n
end

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
    if ok then return plain(c) end
  end
  return nil
end

-- A deep copy of plain data (lists and records of numbers, strings, booleans).
local function copy(v)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = copy(x) end
  return out
end

local function truncate(list, n)
  for i = #list, n + 1, -1 do list[i] = nil end
  return list
end

-- The loader's epoch (1-based) and position (batches taken in that epoch)
-- after `taken` calls of next() from reset().
local function loader_position(loader, taken)
  if taken == 0 then return {epoch = 1, position = 0} end
  local nb = loader:num_batches()
  return {epoch = (taken - 1) // nb + 1, position = (taken - 1) % nb + 1}
end
M.loader_position = loader_position

-- A saved state (ctx.state) that parses but is damaged. The rule: every
-- field pair() reads from opts.resume is checked here first, so a damaged
-- state is reported as damaged (xsa.experiment then removes it and starts
-- over with a message) instead of failing later with an unrelated error on
-- every rerun. Returns true, or false and what is wrong.
local function int_in(v, lo, hi) return math.type(v) == "integer" and v >= lo and v <= hi end

local function number_list(l, n, what)
  if type(l) ~= "table" then return false, what .. " is not a list" end
  if n and #l ~= n then return false, string.format("%s has %d values, not %d", what, #l, n) end
  for i = 1, #l do
    if type(l[i]) ~= "number" then return false, string.format("%s[%d] is not a number", what, i) end
  end
  return true
end

local function check_points(r, cs)
  if type(r.steps) ~= "table" or #r.steps == 0 then return false, "result.steps is empty" end
  local prev = -1
  for i = 1, #r.steps do
    local st = r.steps[i]
    if not int_in(st, prev + 1, cs) then return false, string.format("result.steps[%d] is out of order", i) end
    prev = st
  end
  return true
end

function M.check_resume(state, steps)
  if type(state) ~= "table" then return false, "the state is not a table" end
  local cs, r, ms = state.completed_steps, state.result, state.model_steps
  if not int_in(cs, 0, steps) then return false, "completed_steps is not a step of this run" end
  if type(r) ~= "table" or type(r.config) ~= "table" then return false, "result.config is missing" end
  if type(ms) ~= "table" then return false, "model_steps is missing" end
  if r.completed_steps ~= cs then return false, "result.completed_steps is not completed_steps" end
  local ok, why = check_points(r, cs)
  if not ok then return false, why end
  for _, k in ipairs{"sa", "xsa"} do
    local rec = r[k]
    if type(rec) ~= "table" then return false, "result." .. k .. " is missing" end
    if not int_in(ms[k], 0, math.min(steps, cs + 1)) then return false, "model_steps." .. k .. " is out of range" end
    for _, f in ipairs{"train", "val"} do
      ok, why = number_list(rec[f], #r.steps, k .. "." .. f)
      if not ok then return false, why end
    end
    -- the losses of the steps done (a reused baseline's: all of them)
    ok, why = number_list(rec.step_loss, nil, k .. ".step_loss")
    if not ok then return false, why end
    if #rec.step_loss < cs then return false, k .. ".step_loss is shorter than completed_steps" end
  end
  for _, f in ipairs{"elapsed_s", "train_s", "eval_s"} do
    if r[f] ~= nil and not (finite(r[f]) and r[f] >= 0) then return false, "result." .. f .. " is not a time" end
  end
  local l = state.loader
  if l ~= nil and not (type(l) == "table" and int_in(l.epoch, 1, 1 << 53) and int_in(l.position, 0, 1 << 53)) then
    return false, "loader is not an epoch and a position"
  end
  if state.rng ~= nil then
    local g = xsa_lib().generator(0)
    if type(state.rng) ~= "string" or not pcall(g.set_state, g, state.rng) then return false, "rng is not a generator state" end
  end
  return true
end

-- What must agree between a saved state and the run resuming it.
local SAME = {"steps", "lr", "eval_every", "eval_batches", "val_batches", "train_batches", "batch_size", "seq_len",
  "weight_decay", "eps", "final_point", "schedule", "warmup", "min_lr_frac"}

-- The learning rate of update `step` (1-based) under schedule o = {lr=,
-- steps=, warmup=, schedule=, min_lr_frac=} (see the header).
function M.lr_at(step, o)
  local lr, warmup = o.lr, o.warmup or 0
  if step <= warmup then return lr * step / warmup end
  if (o.schedule or "constant") == "constant" then return lr end
  local lr_min = (o.min_lr_frac or 0.1) * lr
  local ratio = (step - 1 - warmup) / (o.steps - warmup)
  return lr_min + 0.5 * (1 + math.cos(math.pi * ratio)) * (lr - lr_min)
end

-- The schedule of opts checked, or nil for the default (constant, no
-- warmup): then the optimizers' rate is never set.
local function schedule_of(opts, steps, lr)
  local schedule, warmup, frac = opts.schedule or "constant", opts.warmup or 0, opts.min_lr_frac or 0.1
  if schedule ~= "constant" and schedule ~= "cosine" then
    error("train.pair: schedule must be \"constant\" or \"cosine\"", 3)
  end
  if math.type(warmup) ~= "integer" or warmup < 0 or warmup > steps then
    error("train.pair: warmup must be an integer from 0 to steps", 3)
  end
  if type(frac) ~= "number" or not (frac >= 0 and frac <= 1) then
    error("train.pair: min_lr_frac must be a number in [0, 1]", 3)
  end
  if schedule == "constant" and warmup == 0 then return nil end
  return {lr = lr, steps = steps, warmup = warmup, schedule = schedule, min_lr_frac = frac}
end

-- The options pair reads (xsa.options.check refuses any other key).
M.PAIR_OPTIONS = {"steps", "eval_every", "lr", "save_every", "eval_batches", "final_point", "data_parallel",
  "resume", "names", "label", "betas", "eps", "weight_decay", "baseline", "optimizers", "progress_bar",
  "progress", "on_point", "save", "quiet", "schedule", "warmup", "min_lr_frac"}

function M.pair(sa_model, xsa_model, train_loader, val_loader, opts)
  local xsa = xsa_lib()
  opts = options.check("train.pair", opts, M.PAIR_OPTIONS)
  local steps = opts.steps or 300
  local eval_every = opts.eval_every or 20
  local lr = opts.lr or 1e-3
  local save_every = opts.save_every or 0
  if math.type(steps) ~= "integer" or steps < 1 then error("train.pair: steps must be a positive integer", 2) end
  if math.type(eval_every) ~= "integer" or eval_every < 1 then error("train.pair: eval_every must be a positive integer", 2) end
  if math.type(save_every) ~= "integer" or save_every < 0 then error("train.pair: save_every must be an integer >= 0", 2) end
  local nval = val_loader:num_batches()
  if nval < 1 then error("train.pair: the val loader has no batches", 2) end
  local eval_batches = opts.eval_batches or 10
  if math.type(eval_batches) ~= "integer" or eval_batches < 1 then
    error("train.pair: eval_batches must be a positive integer", 2)
  end
  eval_batches = math.min(eval_batches, nval)
  if type(lr) ~= "number" or not (lr > 0 and lr <= 3.4e38) then
    error("train.pair: lr must be a positive finite number", 2)
  end
  local sched = schedule_of(opts, steps, lr)
  local final_point = opts.final_point or "all"
  if final_point ~= "all" and final_point ~= "subset" then
    error("train.pair: final_point must be \"all\" or \"subset\"", 2)
  end
  local dp = opts.data_parallel == true and xsa.mpi ~= nil and xsa.mpi.size() > 1
  if dp then
    if opts.resume then error("train.pair: data_parallel runs cannot resume from a saved state", 2) end
    save_every = 0
  end
  local root = not dp or xsa.mpi.rank() == 0
  local names = opts.names or {"SA", "XSA"}
  local label = opts.label or "pair"
  local adam = {lr = lr, betas = opts.betas or {0.9, 0.999}, eps = opts.eps or 1e-8,
    weight_decay = opts.weight_decay or 0.01}
  local bs = train_loader.batch_size
  local T = train_loader.seq_len

  local result = {
    status = "running", steps = {}, completed_steps = 0,
    sa = {label = names[1], train = {}, val = {}, step_loss = {}},
    xsa = {label = names[2], train = {}, val = {}, step_loss = {}},
    config = {
      steps = steps, lr = lr, eval_every = eval_every, eval_batches = eval_batches, final_point = final_point,
      val_batches = nval, train_batches = train_loader:num_batches(),
      batch_size = bs, seq_len = T, weight_decay = adam.weight_decay,
      betas = adam.betas, eps = adam.eps,
      schedule = sched and sched.schedule, warmup = sched and sched.warmup, min_lr_frac = sched and sched.min_lr_frac,
      train_windows = train_loader.num_windows, val_windows = val_loader.num_windows,
      sa = model_config(sa_model), xsa = model_config(xsa_model),
    },
    elapsed_s = 0, train_s = 0, eval_s = 0, tokens = 0, tokens_per_s = 0,
  }
  local models = {sa_model, xsa_model}
  local recs = {result.sa, result.xsa}
  local keys = {"sa", "xsa"}
  local base = opts.baseline
  local active = {base == nil, true}
  if base then
    if type(base.step_loss) ~= "table" or #base.step_loss < steps or type(base.val) ~= "table" then
      error("train.pair: opts.baseline must be the sa record of a run of the same length (with step_loss)", 2)
    end
    for i = 1, steps do recs[1].step_loss[i] = base.step_loss[i] end
    result.sa.reused = true
  end

  -- a saved state to continue from: the result so far and how far each model got
  local resume = opts.resume
  local prior = {elapsed = 0, train = 0, eval = 0}
  local model_steps0 = {0, 0}
  if resume then
    local rr = type(resume) == "table" and resume.result
    if type(rr) ~= "table" or type(rr.config) ~= "table" or type(resume.model_steps) ~= "table" then
      error("train.pair: opts.resume must be a state saved by train.pair (ctx.state)", 2)
    end
    for _, k in ipairs(SAME) do
      if rr.config[k] ~= result.config[k] then
        error(string.format("train.pair: opts.resume was saved by another run (%s %s, not %s)", k,
          tostring(rr.config[k]), tostring(result.config[k])), 2)
      end
    end
    local ok, why = M.check_resume(resume, steps)
    if not ok then error("train.pair: opts.resume is damaged: " .. why, 2) end
    result.steps = copy(rr.steps)
    result.completed_steps = rr.completed_steps
    for k = 1, 2 do
      recs[k].train, recs[k].val = copy(rr[keys[k]].train), copy(rr[keys[k]].val)
      if active[k] then recs[k].step_loss = copy(rr[keys[k]].step_loss) end
      model_steps0[k] = resume.model_steps[keys[k]]
    end
    prior = {elapsed = rr.elapsed_s or 0, train = rr.train_s or 0, eval = rr.eval_s or 0}
  end

  local sa_opt, xsa_opt
  if opts.optimizers then
    sa_opt, xsa_opt = opts.optimizers[1], opts.optimizers[2]
    for _, o in ipairs{sa_opt, xsa_opt} do
      if o.weight_decay and (o.weight_decay ~= adam.weight_decay or o.eps ~= adam.eps) then
        error("train.pair: opts.optimizers have other settings than the run", 2)
      end
      o.lr = lr
    end
  else
    sa_opt = xsa.optim.adamw(sa_model:parameters(), adam)
    xsa_opt = xsa.optim.adamw(xsa_model:parameters(), adam)
  end
  local opt = {sa_opt, xsa_opt}
  -- optimizer steps each model has taken: AdamW's own count when it has one
  -- (right even when an interrupt lands between opt:step() and the next line)
  local done = {model_steps0[1], model_steps0[2]}
  local count0 = {sa_opt.step_count, xsa_opt.step_count}
  local function taken(k)
    local c = opt[k].step_count
    if math.type(c) == "integer" and math.type(count0[k]) == "integer" then return model_steps0[k] + c - count0[k] end
    return done[k]
  end

  local bar = opts.progress_bar or progress.new{label = label, total = steps,
    mode = (opts.progress == false or not root) and "off" or nil}
  local t0 = progress.now()
  local train_time, eval_time = prior.train, prior.eval
  local start = result.completed_steps
  local rng_mark -- {steps completed, global generator state} at the top of each step

  local function rate()
    local n = (active[1] and 1 or 0) + 1
    return train_time > 0 and (n * result.completed_steps * bs * T) / train_time or 0 / 0
  end

  local function point(step, ...)
    local te = progress.now()
    local vals = {}
    local n = (step == steps and final_point == "all") and nval or eval_batches
    for k = 1, 2 do
      vals[k] = active[k] and M.evaluate(models[k], val_loader, n, dp) or base.val[#result.steps + 1]
    end
    eval_time = eval_time + (progress.now() - te)
    local trains = {...}
    result.steps[#result.steps + 1] = step
    for k = 1, 2 do
      recs[k].val[#recs[k].val + 1] = vals[k]
      recs[k].train[#recs[k].train + 1] = trains[k]
    end
    local line = string.format("%s step %d/%d  train %s %.4f %s %.4f  val %s %.4f %s %.4f  %s tok/s  ETA %s",
      label, step, steps, names[1], trains[1], names[2], trains[2], names[1], vals[1], names[2], vals[2],
      progress.rate(rate()), progress.duration(step > start and (progress.now() - t0) / (step - start) * (steps - step) or nil))
    if bar.mode == "log" then bar:log(line) end
    bar.val_text = string.format("val %s %.3f %s %.3f", names[1], vals[1], names[2], vals[2])
    if opts.on_point then opts.on_point(step, vals, trains, result) end
  end

  local function finish_times()
    result.elapsed_s = prior.elapsed + (progress.now() - t0)
    result.train_s = train_time
    result.eval_s = eval_time
    result.tokens = result.completed_steps * bs * T
    result.tokens_per_s = train_time > 0 and rate() or 0
  end

  -- The state a run can resume from, whatever line an interrupt landed on:
  -- the points recorded in full, each model's step losses up to the steps it
  -- took (one model may be a step ahead of completed_steps), where the train
  -- loader stands after completed_steps batches, the global generator.
  -- nil before the step-0 point exists.
  local function snapshot(status)
    local c = result.completed_steps
    local n = math.min(#result.steps, #recs[1].val, #recs[1].train, #recs[2].val, #recs[2].train)
    if n == 0 then return nil end
    local r = copy(result)
    r.status = status
    truncate(r.steps, n)
    local ms = {}
    for k = 1, 2 do
      truncate(r[keys[k]].val, n)
      truncate(r[keys[k]].train, n)
      ms[keys[k]] = taken(k)
      if active[k] then truncate(r[keys[k]].step_loss, ms[keys[k]]) end
    end
    local rng = (rng_mark and rng_mark[1] == c) and rng_mark[2] or (xsa.get_rng_state and xsa.get_rng_state())
    return {completed_steps = c, model_steps = ms, loader = loader_position(train_loader, c), rng = rng, result = r}
  end

  local function save(status)
    result.status = status
    finish_times()
    if opts.save and root then
      local ctx = {sa = sa_model, xsa = xsa_model, sa_opt = sa_opt, xsa_opt = xsa_opt}
      if status == "checkpoint" or status == "interrupted" then
        ctx.state = snapshot(status == "checkpoint" and "running" or status)
      end
      local ok, where = pcall(opts.save, result, status, ctx)
      if status == "checkpoint" then result.status = "running" end
      if not ok then
        -- Ctrl-C while saving is still Ctrl-C (the interrupted save follows)
        if status ~= "interrupted" and sys.interrupted(where) then error(where, 0) end
        io.stderr:write("train.pair: saving failed: ", tostring(where), "\n")
        return nil
      end
      return where
    end
    return nil
  end

  local function is_point(step) return step % eval_every == 0 or step == steps end

  local nan_error
  local function loop()
    if resume then
      -- the train loader where it stood after `start` steps, the generator as then
      local p = loader_position(train_loader, start)
      if train_loader.seek then
        train_loader:seek(p.epoch, p.position)
      else
        train_loader:reset()
        for _ = 1, start do train_loader:next() end
      end
      if resume.rng and xsa.set_rng_state then xsa.set_rng_state(resume.rng) end
    else
      -- step 0: the loss of the first training batch before any update
      train_loader:reset()
      local x0, y0 = train_loader:batch(1)
      local w0 = 1
      if dp then x0, y0, w0 = my_rows(x0, y0) end
      local l0 = {}
      for k = 1, 2 do l0[k] = active[k] and (not x0 and 0 or xsa.no_grad(function()
        local l = models[k]:loss(x0, y0)
        local v = l:item()
        free(l)
        return v
      end)) or base.train[1] end
      if dp then
        local s0 = xsa.mpi.sum({w0 * l0[1], w0 * l0[2]})
        for k = 1, 2 do if active[k] then l0[k] = s0[k] end end
      end
      point(0, l0[1], l0[2])
    end
    local last_point = result.steps[#result.steps]
    if last_point < start and is_point(start) then -- stopped while evaluating
      point(start, mean(recs[1].step_loss, last_point + 1, start), mean(recs[2].step_loss, last_point + 1, start))
      last_point = start
    end
    for step = start + 1, steps do
      rng_mark = {step - 1, xsa.get_rng_state and xsa.get_rng_state()}
      local ts = progress.now()
      local x, y = train_loader:next()
      local cur = {}
      if dp then
        -- this rank's rows through both models, then one allreduce of both
        -- gradient blocks and both losses, then the same update everywhere
        local xs, ys, w = my_rows(x, y)
        local ks, ms, vals = {}, {}, {}
        for k = 1, 2 do
          if active[k] and taken(k) < step then
            opt[k]:zero_grad()
            if xs then
              local loss = models[k]:loss(xs, ys)
              vals[#vals + 1] = loss:item()
              loss:backward()
              free(loss)
            else
              vals[#vals + 1] = 0 -- no rows here: zero gradient, weight 0
            end
            ks[#ks + 1], ms[#ms + 1] = k, models[k]
          else
            cur[k] = recs[k].step_loss[step]
          end
        end
        free(xs)
        free(ys)
        local g = #ms > 0 and xsa.mpi.allreduce_grads(ms, w, vals) or {}
        for i, k in ipairs(ks) do
          local v = g[i]
          if not finite(v) then -- the same value on every rank: all stop here
            nan_error = {step = step, model = names[k], value = (v ~= v) and "NaN" or (v > 0 and "+inf" or "-inf")}
            return
          end
          recs[k].step_loss[step] = v
          if sched then opt[k].lr = M.lr_at(step, sched) end
          opt[k]:step()
          done[k] = step
          cur[k] = v
        end
        goto stepped
      end
      for k = 1, 2 do
        if not active[k] or taken(k) >= step then
          -- a reused baseline, or a model that took this step before the run was stopped
          cur[k] = recs[k].step_loss[step]
          goto next_model
        end
        opt[k]:zero_grad()
        local loss = models[k]:loss(x, y)
        local v = loss:item()
        if not finite(v) then
          nan_error = {step = step, model = names[k], value = (v ~= v) and "NaN" or (v > 0 and "+inf" or "-inf")}
          free(loss)
          return
        end
        recs[k].step_loss[step] = v -- before the update: a state saved after it has this step's loss
        loss:backward()
        free(loss)
        if sched then opt[k].lr = M.lr_at(step, sched) end
        opt[k]:step()
        done[k] = step
        cur[k] = v
        ::next_model::
      end
      ::stepped::
      train_time = train_time + (progress.now() - ts)
      result.completed_steps = step
      -- evaluate first, so the bar shows this point's val loss, not the last one
      if is_point(step) then
        point(step, mean(recs[1].step_loss, last_point + 1, step), mean(recs[2].step_loss, last_point + 1, step))
        last_point = step
      end
      bar:update(step, string.format("loss %s %.3f %s %.3f%s", names[1], cur[1], names[2], cur[2],
        bar.val_text and ("  " .. bar.val_text) or ""), rate())
      if save_every > 0 and step % save_every == 0 and step < steps then save("checkpoint") end
    end
    -- the final number: the whole val set
    local te = progress.now()
    for k = 1, 2 do
      if not active[k] then
        recs[k].final_val = base.final_val
      elseif eval_batches == nval or final_point == "all" then
        recs[k].final_val = recs[k].val[#recs[k].val]
      else
        recs[k].final_val = M.evaluate(models[k], val_loader, nval, dp)
      end
    end
    eval_time = eval_time + (progress.now() - te)
    result.improvement_pct = improvement(result.sa.final_val, result.xsa.final_val)
  end

  -- the optimizers made here are internal: their state (2 x parameters each)
  -- goes as soon as the run has been saved, not whenever the GC gets to it
  local function free_opts()
    if opts.optimizers then return end
    free(sa_opt)
    free(xsa_opt)
  end

  local ok, err = xpcall(loop, sys.traceback_unless_interrupted)
  bar:finish()
  if not ok then
    local interrupted = sys.interrupted(err)
    local where = save(interrupted and "interrupted" or "error")
    free_opts()
    if interrupted then
      io.stderr:write(string.format("\n%s: interrupted after %d of %d steps%s\n", label,
        result.completed_steps, steps, where and ("; results so far written to " .. where) or ""))
      error("interrupted!", 0)
    end
    error(err, 0)
  end
  if nan_error then
    result.failure = {step = nan_error.step, model = nan_error.model, value = nan_error.value}
    local where = save("nan")
    free_opts()
    error(string.format("train.pair: %s: the %s loss became %s at step %d; training stopped%s", label,
      nan_error.model, nan_error.value, nan_error.step,
      where and ("; what was saved: " .. where) or ""), 0)
  end
  local where = save("done")
  free_opts()
  if where and not opts.quiet then io.stderr:write(string.format("%s: written %s\n", label, where)) end
  return result
end

return M
