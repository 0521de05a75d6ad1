-- fake_xsa.lua: a stand-in for the parts of the engine the training loop
-- and the scripts call (models, AdamW, loaders, no_grad), for tests of
-- xsa.train that must control the losses exactly (NaN at a chosen step, an
-- interrupt at a chosen step) and run in milliseconds.
--
--   local fake = require "fake_xsa"
--   local m = fake.model{name = "sa", losses = function(t) return 5 - 0.1 * t end}
--   local loader = fake.loader{batches = 6, batch_size = 2, seq_len = 4}
--   fake.install(xsa)   -- xsa.optim.adamw / xsa.no_grad on a table without them
-- Only the protocols train.pair relies on are imitated (model:loss/parameters/
-- config, the loader protocol in lua/xsa/data.lua, xsa.optim.adamw, xsa.no_grad;
-- doc/lua-api.md describes the real ones); nothing is learned.
local M = {}

local Loss = {}
Loss.__index = Loss
function Loss:item() return self.v end
function Loss:backward() self.model.backward_calls = self.model.backward_calls + 1 end

local Model = {}
Model.__index = Model

-- losses(t, batch_index, grad_mode) -> number; t = optimizer steps so far.
function M.model(o)
  return setmetatable({name = o.name or "m", losses = o.losses, t = 0, backward_calls = 0,
    forward_calls = 0, batches_seen = {}, raise_at = o.raise_at, cfg = o.config or {attention = o.name}}, Model)
end

function Model:loss(x, y)
  self.forward_calls = self.forward_calls + 1
  if self.raise_at and self.t + 1 == self.raise_at and M.grad_enabled then
    error("fake.lua:1: interrupted!")
  end
  if M.grad_enabled then self.batches_seen[#self.batches_seen + 1] = x.id end
  return setmetatable({v = self.losses(self.t, x.id, M.grad_enabled), model = self}, Loss)
end
function Model:parameters() return {model = self} end
function Model:config() return self.cfg end

function M.adamw(params, o)
  assert(params.model, "fake adamw: parameters of a fake model expected")
  return {
    model = params.model, o = o,
    step = function(self) self.model.t = self.model.t + 1 end,
    zero_grad = function() end,
  }
end

M.grad_enabled = true
function M.no_grad(fn, ...)
  local prev = M.grad_enabled
  M.grad_enabled = false
  local r = table.pack(pcall(fn, ...))
  M.grad_enabled = prev
  if not r[1] then error(r[2], 0) end
  return table.unpack(r, 2, r.n)
end

-- A loader over `batches` fake batches; inputs carry their batch id.
function M.loader(o)
  local L = {batch_size = o.batch_size or 2, seq_len = o.seq_len or 4, num_windows = (o.batches or 4) * (o.batch_size or 2),
    n = o.batches or 4, pos = 0, epoch = 1}
  function L:num_batches() return self.n end
  function L:batch(i)
    assert(i >= 1 and i <= self.n, "batch index out of range")
    -- train order changes each epoch; ids = epoch * 1000 + index
    return {id = (o.shuffle and self.epoch * 1000 or 0) + i}, {}
  end
  function L:next()
    self.pos = self.pos + 1
    if self.pos > self.n then
      self.pos = 1
      self.epoch = self.epoch + 1
    end
    return self:batch(self.pos)
  end
  function L:reset() self.pos = 0; self.epoch = 1 end
  return L
end

function M.install(x)
  x.optim = x.optim or {}
  x.optim.adamw = M.adamw
  x.no_grad = M.no_grad
  return x
end

return M
