-- test_train.lua: xsa.train.pair and xsa.train.runs with stand-in models
-- whose losses are known exactly (tests/lib/fake_xsa.lua): the recorded
-- points and means, the same batches to every model, NaN and Ctrl-C
-- handling, resuming; N = 1 and N = 3 real models against each alone; plus
-- xsa.args, xsa.cache and xsa.progress, which need no engine.
local T = require "testing"
local fake = require "fake_xsa"
local real = xsa or require "xsa"

-- train.pair takes the optimiser and no_grad from xsa.core: point them at
-- the fakes for the duration of fn, then put the engine's back.
local function with_fake(fn, adamw)
  local core = require "xsa.core"
  local saved = {optim = core.optim, no_grad = core.no_grad}
  core.optim = setmetatable({adamw = adamw or fake.adamw}, {__index = saved.optim})
  core.no_grad = fake.no_grad
  local ok, err = pcall(fn)
  core.optim, core.no_grad = saved.optim, saved.no_grad
  if not ok then error(err, 0) end
end

local train = require "xsa.train"

T.case("a reused SA baseline gives the same result without training SA", function()
  with_fake(function()
    local function pair_of()
      return fake.model{name = "sa", losses = function(t, id) return 9 - 0.1 * t + (id % 1000) * 0.001 end},
        fake.model{name = "xsa", losses = function(t, id) return 9 - 0.3 * t + (id % 1000) * 0.002 end}
    end
    local opts = {steps = 7, eval_every = 3, eval_batches = 2, progress = false, quiet = true}
    local sa_model1, xsa_model1 = pair_of()
    local full = train.pair(sa_model1, xsa_model1, fake.loader{batches = 4, shuffle = true}, fake.loader{batches = 3}, opts)
    local sa_model2, xsa_model2 = pair_of()
    opts.baseline = full.sa
    local reused = train.pair(sa_model2, xsa_model2, fake.loader{batches = 4, shuffle = true}, fake.loader{batches = 3}, opts)
    T.eq(sa_model2.backward_calls, 0, "the SA model is not trained")
    T.eq(xsa_model2.backward_calls, 7)
    T.ok(reused.sa.reused)
    for _, k in ipairs{"train", "val"} do
      T.eq(table.concat(reused.sa[k], ","), table.concat(full.sa[k], ","), "sa " .. k)
      T.eq(table.concat(reused.xsa[k], ","), table.concat(full.xsa[k], ","), "xsa " .. k)
    end
    T.eq(reused.sa.final_val, full.sa.final_val)
    T.eq(reused.improvement_pct, full.improvement_pct)
    opts.baseline = {step_loss = {1, 2}, val = {}}
    local sa_model3, xsa_model3 = pair_of()
    T.raises(function() train.pair(sa_model3, xsa_model3, fake.loader{batches = 4}, fake.loader{batches = 3}, opts) end,
      "baseline must be the sa record of a run of the same length")
  end)
end)

T.case("pair records points, means and final val", function()
  with_fake(function()
    local sa_model = fake.model{name = "sa", losses = function(t, id) return 10 - 0.1 * t + (id % 1000) * 0.001 end}
    local xsa_model = fake.model{name = "xsa", losses = function(t, id) return 10 - 0.2 * t + (id % 1000) * 0.001 end}
    local tl = fake.loader{batches = 5, shuffle = true}
    local vl = fake.loader{batches = 3}
    local saved_status
    local r = train.pair(sa_model, xsa_model, tl, vl, {steps = 12, eval_every = 5, eval_batches = 2, progress = false,
      save = function(res, status, ctx)
        saved_status = status
        T.ok(ctx.sa == sa_model and ctx.xsa == xsa_model and ctx.sa_opt and ctx.xsa_opt, "save gets models and optimizers")
        return "nowhere"
      end})
    T.eq(r.status, "done")
    T.eq(saved_status, "done")
    T.eq(table.concat(r.steps, ","), "0,5,10,12")
    -- val at a point: mean over val batches 1..2 of 10 - 0.1 t + id/1000
    T.near(r.sa.val[2], 10 - 0.5 + 0.0015, 1e-12)
    T.near(r.xsa.val[3], 10 - 2.0 + 0.0015, 1e-12)
    -- train at step 5: mean of step losses at t = 0..4 on batches 1001..1005
    local s = 0
    for t = 0, 4 do s = s + 10 - 0.1 * t + (t + 1) * 0.001 end
    T.near(r.sa.train[2], s / 5, 1e-12)
    -- step 0: the first training batch before any update
    T.near(r.sa.train[1], 10 + 0.001, 1e-12)
    -- last interval 11..12 (t = 10, 11) on epoch-3 batches 3001, 3002
    T.near(r.xsa.train[4], ((10 - 2.0 + 0.001) + (10 - 2.2 + 0.002)) / 2, 1e-12)
    -- final over all three val batches, and it is the last point of the curve
    T.near(r.sa.final_val, 10 - 1.2 + 0.002, 1e-12)
    T.eq(r.sa.val[4], r.sa.final_val)
    T.eq(r.xsa.val[4], r.xsa.final_val)
    T.eq(r.config.final_point, "all")
    T.near(r.improvement_pct, 100 * (r.sa.final_val - r.xsa.final_val) / r.sa.final_val, 1e-12)
    T.eq(#r.sa.step_loss, 12)
    T.eq(r.completed_steps, 12)
    T.eq(r.config.eval_batches, 2)
    T.eq(r.config.val_batches, 3)
    -- same batches to both, in the loader's (reshuffled) order
    T.eq(table.concat(sa_model.batches_seen, ","), table.concat(xsa_model.batches_seen, ","))
    T.eq(sa_model.batches_seen[6], 2001)
    -- serialises
    local back = real.json.decode(real.json.encode(r))
    T.eq(back.steps[4], 12)
  end)
end)

T.case("pair: final_point = \"subset\" keeps the last point on eval_batches", function()
  with_fake(function()
    local function run(fp)
      return train.pair(fake.model{losses = function(t, id) return 10 - 0.1 * t + (id % 1000) * 0.001 end},
        fake.model{losses = function(t, id) return 10 - 0.2 * t + (id % 1000) * 0.001 end},
        fake.loader{batches = 5, shuffle = true}, fake.loader{batches = 3},
        {steps = 12, eval_every = 5, eval_batches = 2, progress = false, final_point = fp})
    end
    local sub, all = run("subset"), run()
    T.near(sub.sa.val[4], 10 - 1.2 + 0.0015, 1e-12)  -- batches 1..2
    T.near(sub.sa.final_val, 10 - 1.2 + 0.002, 1e-12) -- all three, evaluated apart
    T.eq(all.sa.final_val, sub.sa.final_val)
    T.eq(all.sa.val[4], all.sa.final_val)
    T.eq(table.concat(all.sa.val, ",", 1, 3), table.concat(sub.sa.val, ",", 1, 3), "earlier points unchanged")
    T.raises(function() run("some") end, "final_point must be")
  end)
end)

T.case("pair: eval_batches above the val set is clamped and final reuses it", function()
  with_fake(function()
    local sa_model = fake.model{losses = function(t) return 5 - 0.01 * t end}
    local xsa_model = fake.model{losses = function(t) return 5 - 0.02 * t end}
    local r = train.pair(sa_model, xsa_model, fake.loader{batches = 4}, fake.loader{batches = 2},
      {steps = 3, eval_every = 10, eval_batches = 50, progress = false})
    T.eq(table.concat(r.steps, ","), "0,3")
    T.eq(r.config.eval_batches, 2)
    T.eq(r.sa.final_val, r.sa.val[2])
  end)
end)

T.case("pair: counts must be integers and lr a finite positive number", function()
  with_fake(function()
    local function run(o)
      local sa_model = fake.model{losses = function() return 3 end}
      local xsa_model = fake.model{losses = function() return 3 end}
      o.steps, o.progress = o.steps or 2, false
      return train.pair(sa_model, xsa_model, fake.loader{batches = 4}, fake.loader{batches = 2}, o)
    end
    T.raises(function() run{eval_batches = 2.5} end, "eval_batches must be a positive integer")
    T.raises(function() run{eval_batches = 0} end, "eval_batches must be a positive integer")
    T.raises(function() run{steps = 2.5} end, "steps must be a positive integer")
    T.raises(function() run{lr = 1e300} end, "lr must be a positive finite number")
    T.raises(function() run{lr = 0 / 0} end, "lr must be a positive finite number")
    T.raises(function() train.evaluate(fake.model{losses = function() return 3 end}, fake.loader{batches = 2}, 1.5) end,
      "n must be a positive integer")
  end)
end)

T.case("pair stops on NaN naming the step and model, after saving", function()
  with_fake(function()
    local sa_model = fake.model{losses = function() return 3 end}
    local xsa_model = fake.model{losses = function(t) return t == 6 and 0 / 0 or 3 end}
    local saved
    local err = T.raises(function()
      train.pair(sa_model, xsa_model, fake.loader{}, fake.loader{}, {steps = 20, eval_every = 5, progress = false, label = "run1",
        save = function(res, status) saved = res; return "/tmp/somewhere" end})
    end, "the XSA loss became NaN at step 7")
    T.ok(err:find("run1", 1, true) and err:find("/tmp/somewhere", 1, true), err)
    T.eq(saved.status, "nan")
    T.eq(saved.completed_steps, 6)
    T.eq(saved.failure.model, "XSA")
    T.raises(function()
      train.pair(fake.model{losses = function(t) return t == 0 and 1 / 0 or 1 end}, fake.model{losses = function() return 1 end},
        fake.loader{}, fake.loader{}, {steps = 3, progress = false})
    end, "the SA loss became +inf at step 1")
  end)
end)

T.case("pair on Ctrl-C saves what it has and re-raises interrupted!", function()
  with_fake(function()
    local sa_model = fake.model{losses = function() return 3 end}
    local xsa_model = fake.model{losses = function() return 3 end, raise_at = 4}
    local saved
    local msgs = {}
    local old = io.stderr
    T.raises(function()
      train.pair(sa_model, xsa_model, fake.loader{}, fake.loader{}, {steps = 20, eval_every = 2, progress = false,
        save = function(res, status) saved = {status = status, steps = res.completed_steps, points = #res.steps}; return "X" end})
    end, "interrupted!")
    T.eq(saved.status, "interrupted")
    T.eq(saved.steps, 3)
    T.eq(saved.points, 2) -- step 0 and step 2
  end)
end)

-- Resuming: a run stopped anywhere and continued from its saved state (through
-- JSON, as on disk) gives the uninterrupted run's numbers and batches.
local function resume_pair(k_sa, k_xsa)
  return fake.model{name = "sa", losses = function(t, id) return 10 - 0.1 * t + (id % 1000) * 0.001 end, raise_at = k_sa},
    fake.model{name = "xsa", losses = function(t, id) return 10 - 0.2 * t + (id % 1000) * 0.003 end, raise_at = k_xsa}
end
local ROPTS = {steps = 12, eval_every = 5, eval_batches = 2, progress = false, quiet = true}
local function ropts(extra)
  local o = {}
  for k, v in pairs(ROPTS) do o[k] = v end
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end
local function same_numbers(a, b, what)
  T.eq(table.concat(a.steps, ","), table.concat(b.steps, ","), what .. ": steps")
  for _, m in ipairs{"sa", "xsa"} do
    for _, k in ipairs{"train", "val", "step_loss"} do
      T.eq(real.json.encode(a[m][k]), real.json.encode(b[m][k]), what .. ": " .. m .. "." .. k)
    end
    T.eq(a[m].final_val, b[m].final_val, what .. ": " .. m .. ".final_val")
  end
  T.eq(a.improvement_pct, b.improvement_pct, what .. ": improvement")
  T.eq(a.completed_steps, b.completed_steps)
end
-- continues from `state` with fakes at the steps each model took; returns the
-- result and the batches each model trained on in this session
local function resume_from(state)
  state = real.json.decode(real.json.encode(state))
  local sa_model, xsa_model = resume_pair()
  sa_model.t, xsa_model.t = state.model_steps.sa, state.model_steps.xsa
  local r = train.pair(sa_model, xsa_model, fake.loader{batches = 5, shuffle = true}, fake.loader{batches = 3},
    ropts{resume = state})
  return r, sa_model.batches_seen, xsa_model.batches_seen
end
local function concat(a, b)
  local out = {}
  for _, x in ipairs(a) do out[#out + 1] = x end
  for _, x in ipairs(b) do out[#out + 1] = x end
  return table.concat(out, ",")
end

T.case("pair resumes from periodic saves and from an interrupt with one model a step ahead", function()
  with_fake(function()
    local states = {}
    local sa_model, xsa_model = resume_pair()
    local full = train.pair(sa_model, xsa_model, fake.loader{batches = 5, shuffle = true}, fake.loader{batches = 3},
      ropts{save_every = 4, save = function(res, status, ctx)
        if status == "checkpoint" then states[#states + 1] = ctx.state end
      end})
    T.eq(#states, 2, "saved after steps 4 and 8 (not after the last)")
    T.eq(states[1].completed_steps, 4)
    T.eq(states[2].loader.epoch, 2, "8 batches of 5: epoch 2")
    T.eq(states[2].loader.position, 3)
    T.eq(states[1].result.status, "running")
    for i, st in ipairs(states) do
      local r, sa_seen, xsa_seen = resume_from(st)
      same_numbers(r, full, "from save " .. i)
      T.eq(#sa_seen, 12 - st.completed_steps)
      T.eq(sa_seen[1], sa_model.batches_seen[st.completed_steps + 1], "the batch after the save")
    end
    -- Ctrl-C inside XSA's step 8: SA has taken step 8, XSA has not
    local a, b = resume_pair(nil, 8)
    local state
    T.raises(function()
      train.pair(a, b, fake.loader{batches = 5, shuffle = true}, fake.loader{batches = 3},
        ropts{save = function(_, status, ctx) if status == "interrupted" then state = ctx.state end end})
    end, "interrupted!")
    T.eq(state.result.status, "interrupted")
    T.eq(state.completed_steps, 7)
    T.eq(state.model_steps.sa, 8)
    T.eq(state.model_steps.xsa, 7)
    T.eq(#state.result.sa.step_loss, 8)
    T.eq(#state.result.xsa.step_loss, 7)
    local r, sa_seen, xsa_seen = resume_from(state)
    same_numbers(r, full, "from the interrupt")
    T.eq(concat(a.batches_seen, sa_seen), table.concat(sa_model.batches_seen, ","), "SA's batches over both sessions")
    T.eq(concat(b.batches_seen, xsa_seen), table.concat(xsa_model.batches_seen, ","), "XSA's batches over both sessions")
  end)
end)

T.case("pair resumes from an interrupt during an evaluation or the final val loss", function()
  with_fake(function()
    local full = train.pair(fake.model{losses = function(t, id) return 4 - 0.1 * t + id * 1e-4 end},
      fake.model{losses = function(t, id) return 4 - 0.2 * t + id * 1e-4 end},
      fake.loader{batches = 5, shuffle = true}, fake.loader{batches = 3}, ropts())
    -- val batch calls: 2 per model at the points 0, 5, 10 (calls 1-12), then all
    -- 3 per model at the last point, 12, whose value is the final val loss
    -- (SA 13-15, XSA 16-18); call 6 is SA's second at step 5, 14 is in SA's
    -- last point, 17 in XSA's
    for _, stop_at in ipairs{6, 14, 17} do
      local vl = fake.loader{batches = 3}
      local plain, calls = vl.batch, 0
      function vl:batch(i)
        calls = calls + 1
        if calls == stop_at then error("fake.lua:1: interrupted!") end
        return plain(self, i)
      end
      local a = fake.model{losses = function(t, id) return 4 - 0.1 * t + id * 1e-4 end}
      local b = fake.model{losses = function(t, id) return 4 - 0.2 * t + id * 1e-4 end}
      local state
      T.raises(function()
        train.pair(a, b, fake.loader{batches = 5, shuffle = true}, vl,
          ropts{save = function(_, status, ctx) if status == "interrupted" then state = ctx.state end end})
      end, "interrupted!")
      state = real.json.decode(real.json.encode(state))
      local c, d = fake.model{losses = function(t, id) return 4 - 0.1 * t + id * 1e-4 end},
        fake.model{losses = function(t, id) return 4 - 0.2 * t + id * 1e-4 end}
      c.t, d.t = state.model_steps.sa, state.model_steps.xsa
      local r = train.pair(c, d, fake.loader{batches = 5, shuffle = true}, fake.loader{batches = 3}, ropts{resume = state})
      same_numbers(r, full, "interrupted at val call " .. stop_at)
    end
    T.raises(function()
      train.pair(fake.model{losses = function() return 1 end}, fake.model{losses = function() return 1 end},
        fake.loader{batches = 5}, fake.loader{batches = 3}, ropts{steps = 13, resume = {model_steps = {sa = 0, xsa = 0},
          result = full}})
    end, "opts.resume was saved by another run (steps 12, not 13)")
  end)
end)

T.case("pair: other errors propagate with a traceback, after saving", function()
  with_fake(function()
    local sa_model = fake.model{losses = function(t) if t == 2 then error("boom in model") end return 1 end}
    local st
    T.raises(function()
      train.pair(sa_model, fake.model{losses = function() return 1 end}, fake.loader{}, fake.loader{},
        {steps = 5, progress = false, save = function(_, status) st = status end})
    end, "boom in model")
    T.eq(st, "error")
  end)
end)

T.case("pair: argument errors", function()
  with_fake(function()
    local m = fake.model{losses = function() return 1 end}
    T.raises(function() train.pair(m, m, fake.loader{}, fake.loader{}, {steps = 0}) end, "steps must be a positive integer")
    T.raises(function() train.pair(m, m, fake.loader{}, fake.loader{batches = 0}, {steps = 2}) end, "val loader has no batches")
  end)
end)

T.case("lr_at: warmup, then constant or cosine to min_lr_frac (hand-worked values)", function()
  local o = {lr = 1, steps = 6, warmup = 2, schedule = "cosine", min_lr_frac = 0.1}
  -- updates 1, 2: 1/2, 2/2; then 0.1 + 0.9 (1 + cos(pi r)) / 2 with r = 0, 1/4, 2/4, 3/4
  local want = {0.5, 1, 1, 0.1 + 0.45 * (1 + math.sqrt(0.5)), 0.55, 0.1 + 0.45 * (1 - math.sqrt(0.5))}
  for s = 1, 6 do T.near(train.lr_at(s, o), want[s], 1e-15, "cosine update " .. s) end
  o.schedule = "constant"
  for s = 1, 6 do T.near(train.lr_at(s, o), s == 1 and 0.5 or 1, 1e-15, "constant after warmup " .. s) end
  -- no warmup: the first update has the peak, and the last is a hair above the floor
  o = {lr = 1e-3, steps = 300, warmup = 0, schedule = "cosine", min_lr_frac = 0.1}
  T.eq(train.lr_at(1, o), 1e-3)
  T.near(train.lr_at(151, o), 0.55e-3, 1e-15, "half-way")
  T.near(train.lr_at(300, o), 1e-4 + 0.45e-3 * (1 - math.cos(math.pi / 300)), 1e-18, "last: 1e-4 + 2.5e-8")
end)

-- A fake AdamW that records the rate of every update and counts writes to lr.
local function recording_adamw(log)
  return function(params, o)
    local opt = fake.adamw(params, o)
    local lr, writes = o.lr, 0
    log[#log + 1] = {rates = {}}
    local rec = log[#log]
    local step = opt.step
    opt.step = function(self) rec.rates[#rec.rates + 1] = lr; step(self) end
    return setmetatable(opt, {__index = function(_, k) if k == "lr" then return lr end end,
      __newindex = function(_, k, v) if k == "lr" then lr, writes = v, writes + 1; rec.writes = writes else rawset(opt, k, v) end end})
  end
end

T.case("pair: the schedule's rate reaches both optimizers; the default never sets it", function()
  local log = {}
  with_fake(function()
    local function run(o)
      for k, v in pairs{steps = 6, eval_every = 3, eval_batches = 1, progress = false, quiet = true, lr = 2} do
        if o[k] == nil then o[k] = v end
      end
      return train.pair(fake.model{losses = function(t) return 5 - 0.1 * t end},
        fake.model{losses = function(t) return 5 - 0.2 * t end}, fake.loader{batches = 4}, fake.loader{batches = 2}, o)
    end
    local r = run{schedule = "cosine", warmup = 2, min_lr_frac = 0.1}
    local want = {1, 2, 2, 0.2 + 0.9 * (1 + math.sqrt(0.5)), 1.1, 0.2 + 0.9 * (1 - math.sqrt(0.5))}
    for k = 1, 2 do
      T.eq(#log[k].rates, 6)
      for s = 1, 6 do T.near(log[k].rates[s], want[s], 1e-14, "model " .. k .. " update " .. s) end
    end
    T.eq(r.config.schedule, "cosine")
    T.eq(r.config.warmup, 2)
    T.eq(r.config.min_lr_frac, 0.1)
    r = run{}
    T.eq(log[3].writes, nil, "constant, no warmup: lr never written")
    T.eq(table.concat(log[3].rates, ","), "2,2,2,2,2,2")
    T.eq(r.config.schedule, nil, "the default adds nothing to the config")
    r = run{schedule = "constant", warmup = 3}
    local w3 = {2 / 3, 4 / 3, 2, 2, 2, 2}
    for i = 1, 6 do T.near(log[5].rates[i], w3[i], 1e-15, "warmup 3, constant: update " .. i) end
    T.raises(function() run{schedule = "linear"} end, "schedule must be \"constant\" or \"cosine\"")
    T.raises(function() run{warmup = 7} end, "warmup must be an integer from 0 to steps")
    T.raises(function() run{warmup = 1.5} end, "warmup must be an integer from 0 to steps")
    T.raises(function() run{schedule = "cosine", min_lr_frac = 2} end, "min_lr_frac must be a number in [0, 1]")
  end, recording_adamw(log))
end)

----------------------------------------------------------------------------
-- xsa.train.runs: any number of models on the same batches

-- Real models (the engine): three trained together give each exactly the
-- losses and weights it gets trained alone (runs of one), and the first two
-- as a pair give the same records: a model's numbers never depend on the
-- others in the step.
T.case("runs: three real models together equal each trained alone and the pair, to the bit", function()
  local function data() return real.data.tinystories{seq_len = 16, max_tokens = 12000, batch = 4, seed = 0} end
  local function models()
    local sa = real.gpt{seed = 0, n_layer = 1, d_model = 32, n_head = 2, seq_len = 16}
    return {sa, sa:clone{attention = "xsa", lambda = 1}, sa:clone{attention = "xsa", lambda = 0.5}}
  end
  local o = {steps = 6, eval_every = 4, eval_batches = 2, progress = false, quiet = true, schedule = "cosine", warmup = 2}
  local function bytes(m)
    local p = os.tmpname()
    m:save(p)
    local b = real.read_file(p)
    os.remove(p)
    return b
  end
  local function same(a, b, what)
    for _, k in ipairs{"train", "val", "step_loss"} do
      T.eq(real.json.encode(a[k]), real.json.encode(b[k]), what .. ": " .. k)
    end
    T.eq(a.final_val, b.final_val, what .. ": final_val")
  end
  local ms = models()
  local tl, vl = data()
  local together = train.runs({{model = ms[1], label = "SA"}, {model = ms[2], label = "XSA"},
    {model = ms[3], label = "XSA/2"}}, tl, vl, o)
  T.eq(#together.runs, 3)
  T.eq(together.runs[3].label, "XSA/2")
  T.eq(#together.config.models, 3)
  T.eq(together.config.models[3].lambda, 0.5)
  T.eq(#together.runs[1].step_loss, 6)
  T.eq(together.status, "done")
  for i = 1, 3 do
    local alone_model = models()[i]
    local tl1, vl1 = data()
    local alone = train.runs({{model = alone_model}}, tl1, vl1, o)
    T.eq(alone.runs[1].label, "run 1")
    same(together.runs[i], alone.runs[1], "model " .. i .. " alone")
    T.ok(bytes(ms[i]) == bytes(alone_model), "model " .. i .. ": the same weights, byte for byte")
  end
  local pm = models()
  local tl2, vl2 = data()
  local p = train.pair(pm[1], pm[2], tl2, vl2, o)
  same(p.sa, together.runs[1], "pair SA")
  same(p.xsa, together.runs[2], "pair XSA")
  T.eq(p.runs, nil)
  T.eq(together.improvement_pct, nil)
end)

local function three(raise_at)
  return {
    {model = fake.model{losses = function(t, id) return 10 - 0.1 * t + (id % 1000) * 0.001 end}, label = "A"},
    {model = fake.model{losses = function(t, id) return 10 - 0.2 * t + (id % 1000) * 0.002 end, raise_at = raise_at},
      label = "B"},
    {model = fake.model{losses = function(t, id) return 10 - 0.3 * t + (id % 1000) * 0.003 end}, label = "C"},
  }
end

T.case("runs: three models resume from an interrupt in the second one's step", function()
  with_fake(function()
    local full_runs = three()
    local full = train.runs(full_runs, fake.loader{batches = 5, shuffle = true}, fake.loader{batches = 3}, ropts())
    local state, ctx_seen
    T.raises(function()
      train.runs(three(8), fake.loader{batches = 5, shuffle = true}, fake.loader{batches = 3},
        ropts{save = function(_, status, ctx)
          if status == "interrupted" then state, ctx_seen = ctx.state, ctx end
        end})
    end, "interrupted!")
    T.eq(#ctx_seen.models, 3)
    T.eq(#ctx_seen.optimizers, 3)
    T.eq(state.completed_steps, 7)
    T.eq(table.concat(state.model_steps, ","), "8,7,7", "A took step 8, B and C did not")
    T.ok(train.check_resume(state, 12))
    state = real.json.decode(real.json.encode(state))
    local again = three()
    for i, r in ipairs(again) do r.model.t = state.model_steps[i] end
    local r = train.runs(again, fake.loader{batches = 5, shuffle = true}, fake.loader{batches = 3}, ropts{resume = state})
    T.eq(table.concat(r.steps, ","), table.concat(full.steps, ","))
    for i = 1, 3 do
      for _, k in ipairs{"train", "val", "step_loss"} do
        T.eq(real.json.encode(r.runs[i][k]), real.json.encode(full.runs[i][k]), "run " .. i .. " " .. k)
      end
      T.eq(r.runs[i].final_val, full.runs[i].final_val)
    end
    -- a pair's state is not a three-run state, and the other way round
    local damaged = real.json.decode(real.json.encode(state))
    damaged.result.runs[3] = nil
    T.raises(function()
      train.runs(three(), fake.loader{batches = 5, shuffle = true}, fake.loader{batches = 3}, ropts{resume = damaged})
    end, "saved by another run (2 runs, not 3 runs)")
    local a, b = resume_pair()
    T.raises(function()
      train.pair(a, b, fake.loader{batches = 5, shuffle = true}, fake.loader{batches = 3}, ropts{resume = state})
    end, "saved by another run (3 runs, not pair)")
  end)
end)

T.case("runs: a reused baseline, a NaN, and misuse refused with clear errors", function()
  with_fake(function()
    local first = train.runs(three(), fake.loader{batches = 4}, fake.loader{batches = 3}, ropts())
    local rs = three()
    rs[1].baseline = first.runs[1]
    local r = train.runs(rs, fake.loader{batches = 4}, fake.loader{batches = 3}, ropts())
    T.eq(rs[1].model.backward_calls, 0, "the baseline's model is not trained")
    T.ok(r.runs[1].reused)
    T.eq(real.json.encode(r.runs[1].val), real.json.encode(first.runs[1].val))
    T.eq(real.json.encode(r.runs[3].val), real.json.encode(first.runs[3].val))
    local nan = three()
    nan[3].model.losses = function(t) return t == 4 and 0 / 0 or 1 end
    T.raises(function() train.runs(nan, fake.loader{}, fake.loader{}, ropts()) end,
      "train.runs: runs: the C loss became NaN at step 5")
    local m = fake.model{losses = function() return 1 end}
    T.raises(function() train.runs({}, fake.loader{}, fake.loader{}) end, "train.runs: runs must be a list")
    T.raises(function() train.runs({{label = "x"}}, fake.loader{}, fake.loader{}) end, "train.runs: runs[1].model is missing")
    T.raises(function() train.runs({{model = m, lable = "x"}}, fake.loader{}, fake.loader{}) end,
      "train.runs: runs[1]: unknown option 'lable' (did you mean 'label'?)")
    T.raises(function() train.runs({{model = m}}, fake.loader{}, fake.loader{}, {names = {"a"}}) end,
      "train.runs: unknown option 'names'")
    T.raises(function() train.runs({{model = m, baseline = {step_loss = {}}}}, fake.loader{}, fake.loader{}) end,
      "runs[1].baseline must be the record of a run of the same length")
    local ok, err = pcall(train.runs, {{model = m}}, fake.loader{}, fake.loader{}, {steps = 0})
    T.ok(not ok and err == "train.runs: steps must be a positive integer", tostring(err))
  end)
end)

T.case("defaults are written once: xsa.study's flags are xsa.train's", function()
  local D = train.DEFAULTS
  local flags = {}
  for _, e in ipairs(require("xsa.study").options({})) do flags[e[1]] = e[3] end
  T.eq(flags.steps, D.steps)
  T.eq(flags.lr, D.lr)
  T.eq(flags["weight-decay"], D.weight_decay)
  T.eq(flags["eval-every"], D.eval_every)
  T.eq(flags["eval-batches"], D.eval_batches)
end)

----------------------------------------------------------------------------
local args = require "xsa.args"
local spec = {name = "t.lua", options = {
  {"steps", "int", 300, "steps"}, {"lr", "number", 1e-3, "lr"}, {"seq-len", "int", 64, "T"},
  {"lams", "numbers", {0, 1}, "l"}, {"no-cache", "bool", false, "nc"}, {"quick", "bool", false, "q"},
  {"out", "string", "cache", "o"},
}, quick = {steps = 10, seq_len = 16}}

T.case("args: values, defaults, --quick and explicit flags", function()
  local o = assert(args.try_parse({"--lr", "0.01", "--seq-len=32", "--no-cache", "--lams", "0,0.5,1"}, spec))
  T.eq(o.lr, 0.01)
  T.eq(o.seq_len, 32)
  T.eq(o.steps, 300)
  T.eq(o.no_cache, true)
  T.eq(#o.lams, 3)
  T.eq(o.given.seq_len, true)
  local q = assert(args.try_parse({"--quick", "--seq-len", "48"}, spec))
  T.eq(q.steps, 10)
  T.eq(q.seq_len, 48) -- an explicit flag wins over --quick
  T.eq(math.type(q.steps), "integer")
  T.eq(table.concat(args.to_argv(q, spec, true), " "), "--seq-len 48 --quick")
end)

T.case("args: --no-NAME turns a bool flag off", function()
  local sp = {name = "t", options = {{"resume", "bool", true, "resume"}, {"no-cache", "bool", false, "x"},
    {"steps", "int", 3, "n"}}}
  local o = assert(args.try_parse({}, sp))
  T.eq(o.resume, true)
  o = assert(args.try_parse({"--no-resume", "--no-cache"}, sp))
  T.eq(o.resume, false)
  T.eq(o.no_cache, true, "a declared --no-X flag is itself")
  T.eq(o.given.resume, true)
  T.eq(table.concat(args.to_argv(o, sp, true), " "), "--no-resume --no-cache")
  T.eq(assert(args.try_parse({"--resume"}, sp)).resume, true)
  T.ok(select(2, args.try_parse({"--no-steps"}, sp)):find("unknown option '--no-steps'", 1, true))
  T.ok(select(2, args.try_parse({"--no-resume=1"}, sp)):find("unknown option '--no-resume'", 1, true))
  T.ok(args.help(sp):find("--resume, --no-resume", 1, true), args.help(sp))
end)

T.case("args: errors and help", function()
  local o, err = args.try_parse({"--stpes", "3"}, spec)
  T.eq(o, nil)
  T.ok(err:find("unknown option '--stpes'", 1, true), err)
  _, err = args.try_parse({"--steps", "1.5"}, spec)
  T.ok(err:find("expects an integer", 1, true), err)
  _, err = args.try_parse({"--steps"}, spec)
  T.ok(err:find("needs a value", 1, true), err)
  _, err = args.try_parse({"--lr", "abc"}, spec)
  T.ok(err:find("expects a number", 1, true), err)
  _, err = args.try_parse({"stray"}, spec)
  T.ok(err:find("unexpected argument", 1, true), err)
  T.eq(args.try_parse({"--help"}, spec).help, true)
  local h = args.help(spec)
  T.ok(h:find("--seq-len INT", 1, true) and h:find("(default 64) [--quick: 16]", 1, true), h)
end)

----------------------------------------------------------------------------
local cache = require "xsa.cache"

local tmpdir = T.tmpdir

T.case("cache: canonical keys", function()
  T.eq(cache.key({b = 1, a = {2, 3.5}, c = "x"}), cache.key({c = "x", a = {2, 3.5}, b = 1.0}))
  T.ok(cache.key({a = 1}) ~= cache.key({a = 2}))
  T.ok(cache.key({a = 0.1}) ~= cache.key({a = 0.1000001}))
  -- the same content inserted in another order is the same key (and file)
  local names = {"steps", "lr", "model", "data", "seed", "z", "a", "eval_every", "lambda"}
  local a, b = {}, {}
  for i = 1, #names do a[names[i]] = i end
  for i = #names, 1, -1 do b[names[i]] = i end
  a.model = {n_layer = 2, d_model = 128, attention = "xsa", betas = {0.9, 0.999}}
  b.model = {betas = {0.9, 0.999}, attention = "xsa", d_model = 128, n_layer = 2}
  T.eq(cache.key(a), cache.key(b))
  T.eq(cache.path("d", "n", a), cache.path("d", "n", b))
  -- numbers are exact: 0.1 and 0.1000000001 are different configurations
  T.ok(cache.key({lr = 0.1}) ~= cache.key({lr = 0.1000000001}))
  T.ok(cache.path("d", "n", {lr = 0.1}) ~= cache.path("d", "n", {lr = 0.1000000001}))
  -- the text is xsa.json's: sorted keys, shortest exact floats, 300.0 as 300
  T.eq(cache.key({b = 300.0, a = {0.1, 1e-3, -0.0}, c = true}), '{"a":[0.1,0.001,0],"b":300,"c":true}')
  T.eq(cache.key({a = 1}), cache.key({a = 1}), "deterministic")
  -- what JSON cannot hold is an error, not a key
  T.raises(function() cache.key({x = 0 / 0}) end, "cache.key: ")
  T.raises(function() cache.key({f = print}) end, "cache.key: ")
  T.eq(#cache.hash("abc"), 16)
  T.eq(cache.hash(""), "cbf29ce484222325") -- FNV-1a offset basis
  T.eq(cache.hash("a"), "af63dc4c8601ec8c")  -- published FNV-1a 64 test vector
end)

T.case("cache: miss, hit, changed config, --no-cache, corrupt entry", function()
  local d = tmpdir()
  local calls = 0
  local function compute(c) calls = calls + 1; return {value = c.x * 2, n = calls} end
  local r, st = cache.fetch(d, "t", {x = 1}, compute, {quiet = true})
  T.eq(st, "miss"); T.eq(r.value, 2)
  r, st = cache.fetch(d, "t", {x = 1}, compute, {quiet = true})
  T.eq(st, "hit"); T.eq(r.n, 1); T.eq(calls, 1)
  r, st = cache.fetch(d, "t", {x = 2}, compute, {quiet = true})
  T.eq(st, "miss"); T.eq(r.value, 4)
  r, st = cache.fetch(d, "t", {x = 1}, compute, {quiet = true, no_cache = true})
  T.eq(st, "refresh"); T.eq(r.n, 3)
  local path = cache.path(d, "t", {x = 1})
  local f = assert(io.open(path, "w")); f:write("{ not json"); f:close()
  r, st = cache.fetch(d, "t", {x = 1}, compute, {quiet = true})
  T.eq(st, "corrupt"); T.eq(r.n, 4)
  r, st = cache.fetch(d, "t", {x = 1}, compute, {quiet = true})
  T.eq(st, "hit")
  -- a valid entry that fails the caller's check is corrupt too
  r, st = cache.fetch(d, "t", {x = 1}, compute, {quiet = true, check = function(res) return res.n > 100, "n too small" end})
  T.eq(st, "corrupt")
  local _, why = cache.load(d, "t", {x = 1}, function() return false, "nope" end)
  T.eq(why, "corrupt: nope")
  os.execute("rm -rf '" .. d .. "'")
end)

----------------------------------------------------------------------------
local progress = require "xsa.progress"

T.case("progress: formatting and log mode", function()
  T.eq(progress.duration(5), "5s")
  T.eq(progress.duration(125), "2m05s")
  T.eq(progress.duration(3725), "1h02m")
  T.eq(progress.duration(0 / 0), "?")
  T.eq(progress.rate(21345), "21.3k")
  T.eq(progress.rate(1.5e6), "1.50M")
  local lines = {}
  local stream = {write = function(_, ...) for _, s in ipairs{...} do lines[#lines + 1] = s end end, flush = function() end}
  local bar = progress.new{label = "x", total = 10, stream = stream, mode = "log"}
  bar:update(3, "loss 1")
  T.eq(#lines, 0) -- no bar when not on a terminal
  bar:log("step 3")
  T.eq(table.concat(lines), "step 3\n")
  local bl = {}
  local s2 = {write = function(_, ...) for _, s in ipairs{...} do bl[#bl + 1] = s end end, flush = function() end}
  local b2 = progress.new{label = "run", total = 10, stream = s2, mode = "bar"}
  b2:update(5, "SA 1.0", 2000)
  local text = table.concat(bl)
  T.ok(text:find("run [############............]  5/10  SA 1.0  2000 tok/s  ETA", 1, true), text)
  T.ok(progress.now() > 0)
end)

T.done()
