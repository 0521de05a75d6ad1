-- test_gpt.lua: the Lua face of the GPT model and AdamW (lua/l_gpt.c, lua/l_optim.c):
-- configuration errors, clone/copy_from, loss + backward through autograd,
-- AdamW reducing the loss, probe shape/values, checkpoint round trip
-- (bit-exact tensors and config, optimizer state), corrupt/truncated files.
local xsa = require "xsa"
local T = require "testing"

local tiny = {vocab = 40, n_layer = 2, d_model = 16, n_head = 2, seq_len = 8, seed = 5}
local function cfg(over)
  local c = {}
  for k, v in pairs(tiny) do c[k] = v end
  for k, v in pairs(over or {}) do c[k] = v end
  return c
end

local function tokens(B, Tn, V, seed)
  local g = xsa.generator(seed)
  return xsa.randint(g, 0, V, B, Tn)
end

local function same_tensor(a, b) return a:equal(b) end

local tmpdir = os.getenv("TMPDIR") or "/tmp"
local function tmpname(tag) return string.format("%s/xsa_gpt_test_%s_%d.safetensors", tmpdir, tag, math.random(1, 1e9)) end

T.case("config validation errors", function()
  T.raises(function() xsa.gpt{vocab = 0} end, "vocab must be an integer")
  T.raises(function() xsa.gpt{d_model = 10, n_head = 3} end, "d_model 10 is not divisible by n_head 3")
  T.raises(function() xsa.gpt{attention = "flash"} end, 'attention must be "sa", "xsa", "vsub", the name of a Lua ' ..
    'variant registered with xsa.attention.register (none is) or a function (got flash)')
  T.raises(function() xsa.gpt{attention = "XSA"} end, 'attention must be "sa", "xsa", "vsub", the name of a Lua ' ..
    'variant registered with xsa.attention.register (none is) or a function (got XSA)')
  T.raises(function() xsa.gpt{lambda = 0/0} end, "lambda must be finite")
  T.raises(function() xsa.gpt{lambda = "big"} end, "lambda must be a number")
  T.raises(function() xsa.gpt{n_layers = 2} end, "unknown option 'n_layers'")
  T.raises(function() xsa.gpt{seq_len = 1.5} end, "seq_len must be an integer")
  T.raises(function() xsa.gpt{seed = -1} end, "seed must be a non-negative integer")
  T.raises(function() xsa.gpt{precision = "fp16"} end, 'precision must be "f32" or "bf16"')
  -- lambda outside [0,1] is allowed
  local m = xsa.gpt(cfg{attention = "xsa", lambda = 1.5})
  T.eq(m:config().lambda, 1.5)
  T.eq(m:config().attention, "xsa")
  -- a variant of the core's table beyond the two (core/attention_vsub.c) through the binding
  local v = xsa.gpt(cfg{attention = "vsub", lambda = 0.5})
  T.eq(v:config().attention, "vsub"); T.eq(v:config().lambda, 0.5)
  T.eq(xsa.gpt(v:config()):config().attention, "vsub")
  T.eq(m:clone{attention = "vsub"}:config().attention, "vsub")
  T.raises(function() m:clone{attention = "vsubb"} end, '(got vsubb)')
  T.raises(function() xsa.gpt(cfg{attention = "sa", lambda = 0.5}) end, "lambda is XSA's strength")
  local x = xsa.randint(0, 40, 2, 8)
  local l1 = v:loss(x, x); l1:backward()
  T.ok(l1:item() == l1:item() and l1:item() ~= xsa.no_grad(function() return xsa.gpt(cfg()):loss(x, x):item() end),
    "vsub trains through the binding, with a loss of its own")
end)

T.case("defaults, num_params, config, tostring", function()
  local m = xsa.gpt(cfg())
  local C, V, S = 16, 40, 8
  T.eq(m:num_params(), V * C + S * C + 2 * (12 * C * C + 13 * C) + 2 * C)
  local c = m:config()
  T.eq(c.vocab, 40); T.eq(c.n_layer, 2); T.eq(c.attention, "sa"); T.eq(c.lambda, nil); T.eq(c.seed, 5)
  -- the constructor takes what config() gives, for every attention and precision
  local kinds = {{}, {attention = "xsa"}, {attention = "xsa", lambda = 0.25}}
  if pcall(xsa.gpt, cfg{precision = "bf16"}) then kinds[#kinds + 1] = {attention = "xsa", lambda = 0.5, precision = "bf16"} end
  for _, k in ipairs(kinds) do
    local a = xsa.gpt(cfg(k)):config()
    T.eq(xsa.json.encode(xsa.gpt(a):config()), xsa.json.encode(a), "xsa.gpt(m:config()) round trip")
  end
  T.ok(tostring(m):find("xsa.gpt(sa", 1, true))
  local ps = m:parameters()
  T.eq(#ps, 2 + 2 * 12 + 2)
  T.eq(ps[1].name, "wte.weight")
  T.eq(table.concat(ps["h.1.attn.c_attn.weight"]:shape(), ","), "16,48")
  T.eq(table.concat(ps["h.0.mlp.c_proj.weight"]:shape(), ","), "64,16")
  T.ok(ps[3].tensor:requires_grad())
end)

T.case("same seed same weights; clone keeps weights", function()
  local a, b = xsa.gpt(cfg()), xsa.gpt(cfg())
  local c = xsa.gpt(cfg{seed = 6})
  local pa, pb, pc = a:parameters(), b:parameters(), c:parameters()
  T.ok(same_tensor(pa["wte.weight"], pb["wte.weight"]))
  T.ok(not same_tensor(pa["wte.weight"], pc["wte.weight"]))
  local x = a:clone{attention = "xsa", lambda = 0.5}
  T.eq(x:config().attention, "xsa"); T.eq(x:config().lambda, 0.5)
  local px = x:parameters()
  for i, p in ipairs(pa) do T.ok(same_tensor(p.tensor, px[i].tensor), p.name) end
  -- clone owns its weights: changing one leaves the other
  xsa.no_grad(function() px["ln_f.bias"]:fill_(3) end)
  T.ok(not same_tensor(pa["ln_f.bias"], px["ln_f.bias"]))
  c:copy_from(a)
  T.ok(same_tensor(pa["h.1.mlp.c_fc.weight"], c:parameters()["h.1.mlp.c_fc.weight"]))
  T.raises(function() a:copy_from(xsa.gpt(cfg{d_model = 32})) end, "sizes differ")
  T.raises(function() a:clone{heads = 3} end, "unknown option 'heads'")
end)

T.case("loss, forward, errors", function()
  local m = xsa.gpt(cfg())
  local inp, tg = tokens(3, 8, 40, 1), tokens(3, 8, 40, 2)
  local loss = m:loss(inp, tg)
  T.eq(loss:dim(), 0)
  T.near(loss:item(), math.log(40), 0.05)
  local logits = m:forward(inp)
  T.eq(table.concat(logits:shape(), ","), "3,8,40")
  -- the loss from the logits with the generic ops agrees
  local ce = xsa.nn.cross_entropy(logits:view(24, 40), tg:view(24))
  T.near(ce:item(), loss:item(), 1e-5)
  T.raises(function() m:loss(inp, tokens(3, 7, 40, 3)) end, "differ in shape")
  T.raises(function() m:loss(xsa.zeros(3, 8), tg) end, "int32 [B,T]")
  T.raises(function() m:forward(tokens(1, 9, 40, 4)) end, "sequence length 9 exceeds the model's seq_len 8")
  T.raises(function() m:forward(xsa.full(2, 4, 40, {dtype = "int32"})) end, "input token 40 at [0,0] is outside [0, 40)")
end)

T.case("backward fills the parameter gradients (matches C finite differences sign)", function()
  local m = xsa.gpt(cfg{attention = "xsa", lambda = 1})
  local inp, tg = tokens(2, 8, 40, 1), tokens(2, 8, 40, 2)
  local ps = m:parameters()
  local opt = xsa.optim.adamw(ps, {lr = 0})
  opt:zero_grad()
  local loss = m:loss(inp, tg)
  loss:backward()
  local g = ps["h.0.ln_1.weight"].grad
  T.ok(g:abs():sum():item() > 0, "gradient reaches the first block")
  -- finite difference on one weight, in double via Lua numbers
  local w = ps["h.0.attn.c_attn.weight"]
  local gw = w.grad[3][5]
  local h = 1e-2
  local w0 = w[3][5]
  local function at(v) return xsa.no_grad(function() w[3][5] = v; return m:loss(inp, tg):item() end) end
  local lp, lm = at(w0 + h), at(w0 - h)
  at(w0)
  T.near((lp - lm) / (2 * h), gw, 2e-3)
  -- backward after another forward is refused
  local l2 = m:loss(inp, tg)
  m:forward(inp)
  T.raises(function() l2:backward() end, "ran another forward")
  -- no graph under no_grad
  local l3 = xsa.no_grad(function() return m:loss(inp, tg) end)
  T.ok(l3:grad_fn() == nil)
end)

T.case("AdamW steps reduce the loss; lr settable; bad options", function()
  local m = xsa.gpt(cfg{attention = "xsa"})
  local inp, tg = tokens(4, 8, 40, 11), tokens(4, 8, 40, 12)
  local opt = xsa.optim.adamw(m:parameters(), {lr = 1e-2, betas = {0.9, 0.99}, weight_decay = 0})
  local first, last
  for i = 1, 8 do
    opt:zero_grad()
    local loss = m:loss(inp, tg)
    if i == 1 then first = loss:item() end
    last = loss:item()
    loss:backward()
    opt:step()
  end
  T.ok(last < first - 0.1, string.format("loss %g -> %g", first, last))
  T.eq(opt.lr, 1e-2)
  opt.lr = 5e-3
  T.eq(opt.lr, 5e-3)
  T.eq(opt.betas[2], 0.99)
  T.raises(function() opt.lr = -1 end, "lr")
  T.raises(function() opt.eps = 1 end, "cannot be set")
  T.raises(function() xsa.optim.adamw(m:parameters(), {lr = 1e-3, momentum = 0.9}) end, "unknown option 'momentum'")
  T.raises(function() xsa.optim.adamw(m:parameters(), {betas = {1.5, 0.9}}) end, "beta1")
  T.raises(function() xsa.optim.adamw({1, 2}) end, "entry 1 is not a tensor")
  -- a plain list of tensors works too
  local w = xsa.randn(3, 3):requires_grad(true)
  local o2 = xsa.optim.adamw({w}, {lr = 0.1})
  local before = w:clone()
  local s = (w * w):sum()
  s:backward()
  o2:step()
  T.ok(not same_tensor(before, w))
end)

-- a loader per the shared protocol, over fixed batches
local function fake_loader(nb, B, Tn, V)
  local L = {batch_size = B, seq_len = Tn, num_windows = nb * B, batches = {}, pos = 1}
  for i = 1, nb do L.batches[i] = {tokens(B, Tn, V, 100 + i), tokens(B, Tn, V, 200 + i)} end
  function L:num_batches() return #self.batches end
  function L:batch(i) return self.batches[i][1], self.batches[i][2] end
  function L:next() local b = self.batches[self.pos]; self.pos = self.pos % #self.batches + 1; return b[1], b[2] end
  function L:reset() self.pos = 1 end
  return L
end

T.case("probe: shape and values", function()
  local m = xsa.gpt(cfg())
  local loader = fake_loader(3, 2, 8, 40)
  local r = m:probe(loader, 2)
  T.eq(#r, 2)
  for l = 1, 2 do
    for _, k in ipairs{"value_cos", "self_attn", "pre_cos", "post_cos", "pre_cos_pos1", "post_cos_pos1"} do
      local v = r[l][k]
      T.ok(type(v) == "number" and v == v and v > -1.0001 and v < 1.0001, k)
    end
    T.eq(#r[l].heads, 2)
    T.near(r[l].self_attn, (r[l].heads[1].self_attn + r[l].heads[2].self_attn) / 2, 1e-12)
    -- SA: the projection is the identity
    T.near(r[l].pre_cos, r[l].post_cos, 1e-12)
    -- untrained near-uniform causal attention: mean a_ii ~ mean over t of 1/(t+1)
    local h = 0
    for t = 1, 8 do h = h + 1 / t end
    T.near(r[l].self_attn, h / 8, 0.05)
  end
  local x = m:clone{attention = "xsa", lambda = 1}
  local rx = x:probe(loader)  -- all 3 batches
  T.ok(math.abs(rx[1].post_cos_pos1) < 1e-4, "full XSA removes the self component")
  T.near(rx[1].value_cos, r[1].value_cos, 0.2) -- same weights, other batches
  T.raises(function() m:probe({}, 1) end, "")
end)

T.case("checkpoint round trip is bit-exact, with optimizer state", function()
  local m = xsa.gpt(cfg{attention = "xsa", lambda = 0.3, seed = 77})
  local inp, tg = tokens(2, 8, 40, 5), tokens(2, 8, 40, 6)
  local opt = xsa.optim.adamw(m:parameters(), {lr = 2e-3})
  for _ = 1, 2 do
    opt:zero_grad(); m:loss(inp, tg):backward(); opt:step()
  end
  local path = tmpname("rt")
  m:save(path, {optimizer = opt})
  local m2, opt2 = xsa.gpt.load(path)
  T.ok(opt2 ~= nil, "optimizer restored")
  local c1, c2 = m:config(), m2:config()
  for k, v in pairs(c1) do T.eq(c2[k], v, k) end
  local p1, p2 = m:parameters(), m2:parameters()
  for i, p in ipairs(p1) do
    T.eq(p2[i].name, p.name)
    T.ok(same_tensor(p.tensor, p2[i].tensor), p.name)
  end
  T.eq(opt2.lr, 2e-3)
  -- the restored optimizer continues exactly like the original
  opt:zero_grad(); m:loss(inp, tg):backward(); opt:step()
  opt2:zero_grad(); m2:loss(inp, tg):backward(); opt2:step()
  for i, p in ipairs(p1) do T.ok(same_tensor(p.tensor, p2[i].tensor), "after a step: " .. p.name) end
  -- the file is plain safetensors with GPT-2 names and the config as metadata
  local ts, meta = xsa.safetensors.load(path)
  T.eq(meta.attention, "xsa"); T.eq(meta.n_layer, "2"); T.eq(meta.lambda, "0.3")
  T.ok(ts["h.1.mlp.c_fc.weight"] ~= nil)
  -- without the optimizer
  m:save(path)
  local m3, o3 = xsa.gpt.load(path)
  T.ok(o3 == nil)
  T.ok(same_tensor(m3:parameters()["wte.weight"], p1["wte.weight"]))
  -- saving an optimizer of another model is refused
  T.raises(function() xsa.gpt(cfg()):save(path, {optimizer = opt}) end, "does not hold exactly this model's parameters")
  os.remove(path)
end)

T.case("corrupt, truncated and mismatched checkpoints fail clearly", function()
  local m = xsa.gpt(cfg())
  local path = tmpname("bad")
  m:save(path)
  local f = assert(io.open(path, "rb")); local data = f:read("a"); f:close()
  -- truncated
  f = assert(io.open(path, "wb")); f:write(data:sub(1, #data - 100)); f:close()
  T.raises(function() xsa.gpt.load(path) end, path)
  -- garbage header
  f = assert(io.open(path, "wb")); f:write("\255\255\255\255\255\255\255\255garbage"); f:close()
  T.raises(function() xsa.gpt.load(path) end, path)
  -- a missing tensor
  local ts, meta = (function() m:save(path); return xsa.safetensors.load(path) end)()
  ts["h.1.ln_2.bias"] = nil
  xsa.safetensors.save(path, ts, meta)
  T.raises(function() xsa.gpt.load(path) end, "missing tensor h.1.ln_2.bias")
  -- a shape that disagrees with the config
  ts = xsa.safetensors.load(path)
  ts["h.1.ln_2.bias"] = xsa.zeros(16)
  ts["h.0.attn.c_attn.weight"] = xsa.zeros(16, 32)
  xsa.safetensors.save(path, ts, meta)
  T.raises(function() xsa.gpt.load(path) end, "h.0.attn.c_attn.weight has shape [16,32], expected [16,48]")
  -- bad config metadata
  ts["h.0.attn.c_attn.weight"] = xsa.zeros(16, 48)
  meta.attention = "linear"
  xsa.safetensors.save(path, ts, meta)
  T.raises(function() xsa.gpt.load(path) end, "attention")
  meta.attention = "sa"; meta.n_head = "3"
  xsa.safetensors.save(path, ts, meta)
  T.raises(function() xsa.gpt.load(path) end, "not divisible")
  T.raises(function() xsa.gpt.load(tmpdir .. "/no/such/file.safetensors") end, "no/such/file")
  os.remove(path)
end)

local golden_dir = T.golden_dir

T.case("scripts/dump_grads.lua reproduces the golden SA values", function()
  local exe = os.getenv("XSA_EXE") or arg[-1]
  local g = golden_dir()
  T.ok(g, "golden files not found ($XSA_GOLDEN, else $XSA_ROOT/tests/fixtures/golden)")
  local root = os.getenv("XSA_ROOT") or "."
  local out = tmpname("dump")
  local cmd = string.format("%q %q %q %q %q >/dev/null", exe, root .. "/scripts/dump_grads.lua",
    g .. "/tiny/model.safetensors", g .. "/tiny/batch.safetensors", out)
  T.ok(os.execute(cmd), "dump_grads ran: " .. cmd)
  local got = xsa.safetensors.load(out)
  local want = xsa.safetensors.load(g .. "/tiny/expected_SA.safetensors")
  local n = 0
  for k, t in pairs(got) do
    local w = want[k]
    T.ok(w ~= nil, "golden has " .. k)
    local scale = math.max(w:abs():max():item(), 1e-30)
    T.ok((t - w):abs():max():item() <= 1e-4 * scale, k)
    n = n + 1
  end
  T.eq(n, 2 + 28) -- loss, logits, 28 gradients
  os.remove(out)
  -- usage error
  T.ok(not os.execute(string.format("%q %q 2>/dev/null", exe, root .. "/scripts/dump_grads.lua")))
end)

T.case("freed model and close", function()
  local m = xsa.gpt(cfg())
  m:free()
  T.raises(function() m:num_params() end, "freed model")
  T.ok(tostring(m):find("freed"))
  do
    local m2 <close> = xsa.gpt(cfg())
    T.eq(m2:config().vocab, 40)
  end
end)

T.case("precision bf16: a model with bf16 lm_head products, or a clear error", function()
  T.eq(xsa.gpt(cfg{precision = "f32"}):config().precision, nil) -- f32: configs as before
  local ok, m = pcall(xsa.gpt, cfg{precision = "bf16"})
  if not ok then
    T.ok(tostring(m):find('precision "bf16" is not available', 1, true), tostring(m))
    return
  end
  T.eq(m:config().precision, "bf16")
  T.ok(tostring(m):find("bf16", 1, true), tostring(m))
  local x = m:clone{attention = "xsa"}
  T.eq(x:config().precision, "bf16")
  local f = xsa.gpt(cfg{})
  local inp, tg = tokens(2, 8, 40, 1), tokens(2, 8, 40, 2)
  local lb, lf = m:loss(inp, tg):item(), f:loss(inp, tg):item()
  -- bound: rounding x and w to bf16 (2^-9 relative each) moves a logit by at most
  -- 2 * 2^-9 * |x| * max_v |w_v|, |x| = sqrt(d_model) after ln_f at init; the loss by twice that
  local w = f:parameters()["wte.weight"]
  local wmax = (w * w):sum(-1):sqrt():max():item()
  local bound = 4 / 512 * math.sqrt(16) * wmax
  T.ok(math.abs(lb - lf) <= bound, string.format("bf16 loss %g vs float32 %g (bound %g)", lb, lf, bound))
end)

-- Results do not depend on the thread count: the engine keeps OpenBLAS on one
-- thread and splits the lm_head over whole vocabulary blocks itself (system.c,
-- nn.c). Big enough that the old code split these products over OpenBLAS's
-- threads (and Haswell's kernel then gave other bits): vocab 20000 at 64 rows
-- is two vocabulary blocks, the linears reach OpenBLAS's threading threshold.
T.case("training is bit-identical at 1, 2 and 3 threads (SA and XSA), with each GEMM backend", function()
  local threads0 = xsa.blas().threads
  local gemm0 = xsa.blas().gemm
  local V, B, Tn = 20000, 2, 32
  local batches = {}
  for i = 1, 3 do batches[i] = {tokens(B, Tn, V, 300 + i), tokens(B, Tn, V, 400 + i)} end
  local function train(att, n)
    xsa.set_threads(n)
    local m = xsa.gpt{vocab = V, n_layer = 1, d_model = 64, n_head = 2, seq_len = Tn, attention = att, seed = 3}
    local opt = xsa.optim.adamw(m:parameters(), {lr = 1e-2})
    local losses = {}
    for _, b in ipairs(batches) do
      local loss = m:loss(b[1], b[2])
      opt:zero_grad(); loss:backward(); opt:step()
      losses[#losses + 1] = loss:item()
    end
    losses[#losses + 1] = xsa.no_grad(function() return m:loss(batches[1][1], batches[1][2]):item() end)
    return losses, m
  end
  local backends = {"openblas"}
  if pcall(xsa.set_gemm, "dnnl") then backends[2] = "dnnl" end
  for _, gemm in ipairs(backends) do
    xsa.set_gemm(gemm)
    for _, att in ipairs{"sa", "xsa"} do
      local l1, m1 = train(att, 1)
      for _, n in ipairs{2, 3} do
        local ln, mn = train(att, n)
        for i = 1, #l1 do
          T.ok(ln[i] == l1[i], string.format("%s %s loss %d: %.17g at %d threads, %.17g at 1", gemm, att, i, ln[i], n,
            l1[i]))
        end
        local pn = mn:parameters()
        for _, p in ipairs(m1:parameters()) do
          T.ok(same_tensor(p.tensor, pn[p.name]), string.format("%s %s %s at %d threads", gemm, att, p.name, n))
        end
      end
    end
  end
  xsa.set_gemm(gemm0)
  -- the cross-entropy of given logits (rows over the threads, the loss summed by fixed blocks)
  local g = xsa.generator(9)
  local logits, tg = xsa.randn(g, 256, 4096), tokens(256, 1, 4096, 10):reshape(256)
  local function ce(n)
    xsa.set_threads(n)
    local l = logits:clone():requires_grad(true)
    local loss = xsa.nn.cross_entropy(l, tg)
    loss:backward()
    return loss:item(), l.grad
  end
  local c1, d1 = ce(1)
  local c2, d2 = ce(2)
  T.ok(c1 == c2, string.format("cross_entropy %.17g at 2 threads, %.17g at 1", c2, c1))
  T.ok(same_tensor(d1, d2), "cross_entropy gradient")
  xsa.set_threads(threads0)
end)

T.done()
