-- dump_grads.lua: one forward + backward of a checkpoint on one batch, all
-- results written to a safetensors file, for comparison with a reference
-- implementation (e.g. PyTorch on the same checkpoint).
--
--   xsa scripts/dump_grads.lua CKPT BATCH OUT
--
-- CKPT   a model checkpoint (model:save / GPT-2 names, config as metadata)
-- BATCH  safetensors with int32 `inputs` and `targets` [B,T]
-- OUT    written (atomically): loss [1], logits [B,T,V], grad.<name> for
--        every parameter (wte.weight's includes the tied lm_head's part);
--        metadata: the model's config plus "source" = CKPT
local xsa = require "xsa"

local function usage(msg)
  local text = "usage: xsa " .. (arg and arg[0] or "scripts/dump_grads.lua") .. " CKPT BATCH OUT\n\n" ..
    "One forward and backward of checkpoint CKPT on the batch in BATCH (safetensors, int32 inputs and targets [B,T]).\n" ..
    "Writes OUT (safetensors, atomically): loss, logits and grad.<name> of every parameter, for comparison\n" ..
    "with a reference implementation.\n"
  if not msg then io.stdout:write(text); os.exit(0) end
  io.stderr:write(msg, "\n", text)
  os.exit(2)
end

if arg[1] == "--help" or arg[1] == "-h" then usage() end
local ckpt, batch, out = arg[1], arg[2], arg[3]
if not (ckpt and batch and out) or arg[4] then usage("expected three arguments") end

local model = xsa.gpt.load(ckpt)
local b = xsa.safetensors.load(batch)
local inputs, targets = b.inputs, b.targets
if not inputs or not targets then usage(batch .. ": needs tensors 'inputs' and 'targets'") end

local loss = model:loss(inputs, targets)
loss:backward()
local res = {loss = loss:view(1):clone()}
for _, p in ipairs(model:parameters()) do
  res["grad." .. p.name] = p.tensor.grad:clone()
end
-- the logits of the same (deterministic) forward, run after the backward
-- so the loss's graph is used first
res.logits = xsa.no_grad(function() return model:forward(inputs) end)

local meta = {source = ckpt}
for k, v in pairs(model:config()) do meta[k] = tostring(v) end
meta.lambda = string.format("%.17g", model:config().lambda or 1) -- SA: 1, the engine's default
xsa.safetensors.save(out, res, meta)
print(string.format("%s: loss %.6f, %d gradients, logits [%s]", out, loss:item(),
  #model:parameters(), table.concat(res.logits:shape(), ",")))
