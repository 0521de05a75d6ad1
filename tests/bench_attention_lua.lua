-- bench_attention_lua.lua (make bench): the training step of a model whose
-- attention is written in Lua against the fused one, at the study's shape
-- (16 x 64 tokens, the default 2 layers x 128, V 50257; issue 36 step 5's
-- goal: an output-only variant within 1.3x of the fused model's step).
-- The variant is XSA written in Lua (it reads y and v, doc/lua-api.md), the
-- fused model attention = "xsa", the same weights, batches and AdamW.
--   xsa tests/bench_attention_lua.lua [--rounds K] [--steps N] [--batch B] [--seq T]
-- Each round times N steps of one model, then N of the other (which goes
-- first alternates), so outside load hits both alike; the clock is
-- /proc/uptime's (10 ms), so N steps make one sample. Reported: medians of
-- the per-step times over the rounds, and their ratio. Not a test: prints.
local now = require("xsa.progress").now

local opt = {rounds = 6, steps = 4, batch = 16, seq = 64}
local i = 1
while arg[i] do
  local k = arg[i]:match("^%-%-(%w+)$")
  if not (k and opt[k] and tonumber(arg[i + 1])) then error("bench_attention_lua: bad argument " .. arg[i], 0) end
  opt[k] = math.tointeger(tonumber(arg[i + 1])) or error("bench_attention_lua: " .. k .. " must be an integer", 0)
  i = i + 2
end

local function xsa_f(a)
  local vn = a.v / a.v:pow(2):sum(-1, true):sqrt():clamp(1e-12, math.huge)
  return a.y - (a.y * vn):sum(-1, true) * vn
end

local fused = xsa.gpt{seed = 0, seq_len = opt.seq, attention = "xsa"}
local lua = fused:clone{attention = xsa_f}
local g = xsa.generator(0)
local V = fused:config().vocab
local x, y = xsa.randint(g, 0, V, opt.batch, opt.seq), xsa.randint(g, 0, V, opt.batch, opt.seq)
local models = {
  {name = "fused", m = fused, o = xsa.optim.adamw(fused:parameters(), {lr = 1e-3}), t = {}},
  {name = "Lua", m = lua, o = xsa.optim.adamw(lua:parameters(), {lr = 1e-3}), t = {}},
}

local function steps(r, n)
  for _ = 1, n do
    r.o:zero_grad()
    local l = r.m:loss(x, y)
    l:backward()
    r.o:step()
    l:free()
  end
end

for _, r in ipairs(models) do steps(r, 2) end -- warm: buffers, pools, threads
for round = 1, opt.rounds do
  for k = 0, 1 do
    local r = models[(round + k) % 2 + 1]
    local t0 = now()
    steps(r, opt.steps)
    r.t[#r.t + 1] = (now() - t0) / opt.steps
  end
end

local function median(t)
  local s = {table.unpack(t)}
  table.sort(s)
  local n = #s
  return n % 2 == 1 and s[(n + 1) / 2] or (s[n / 2] + s[n / 2 + 1]) / 2
end
local f, l = median(models[1].t), median(models[2].t)
local la = io.open("/proc/loadavg")
local load = la and la:read("l"):match("^(%S+ %S+ %S+)") or "unknown"
if la then la:close() end
print(("shape %d x %d, model %s, %d rounds of %d steps each (medians of the rounds; load average %s)"):format(
  opt.batch, opt.seq, tostring(fused):match("%((.*)%)"), opt.rounds, opt.steps, load))
print(("train step: fused XSA %.1f ms, XSA written in Lua %.1f ms; Lua/fused %.2fx (goal <= 1.3x)"):format(
  1e3 * f, 1e3 * l, l / f))
