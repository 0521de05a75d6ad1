-- bench_study.lua: the study's throughput beside the bench step's (issue 38,
-- item 3), so that a regression between the step and the study shows.
--
--   xsa tests/bench_study.lua [--steps N] [--threads K] [--side-by-side]
--
-- Part 3's pair (the default model, SA and XSA from the same weights, 16 x
-- 64, AdamW at lr 1e-3, weight decay 0.01) on TinyStories, trained N steps
-- through xsa.train.pair as a part trains it (its loader, its evaluation
-- points at step 0 and N on one batch, its records' tokens/s: model-tokens
-- of the training steps over their time). Then the bench step in the same
-- process: the same two models stepping on one fixed batch, loss, backward
-- and AdamW, nothing else, N steps timed as a whole as the study's are. Both are printed in
-- model-tokens/s (tokens x models / s), with their ratio. --side-by-side
-- runs two such processes at 1 thread each at once, the study's layout on a
-- 2-core machine, and prints each and their sum against the bench step at 2
-- threads (measured first, alone). Not a test: prints numbers.
local args, i = {steps = 40, threads = nil, side = false}, 1
while arg[i] do
  local a = arg[i]
  if a == "--steps" then args.steps = math.tointeger(tonumber(arg[i + 1])); i = i + 2
  elseif a == "--threads" then args.threads = math.tointeger(tonumber(arg[i + 1])); i = i + 2
  elseif a == "--out" then args.out = arg[i + 1]; i = i + 2
  elseif a == "--side-by-side" then args.side = true; i = i + 1
  else error("bench_study: unknown argument " .. tostring(a) .. " (--steps N, --threads K, --side-by-side)", 0) end
end
if not args.steps or args.steps < 4 then error("bench_study: --steps wants an integer >= 4", 0) end
if args.threads then xsa.set_threads(args.threads) end
local B, T, N = 16, 64, args.steps
local now = require("xsa.progress").now

local function pair()
  local sa = xsa.gpt{seq_len = T, attention = "sa", seed = 0}
  return sa, sa:clone{attention = "xsa", lambda = 1}
end

-- the study's way: xsa.train.pair over the real loader
local function study_rate()
  local train, val = xsa.data.tinystories{seq_len = T, max_tokens = 500000, batch = B, seed = 0}
  local sa, xs = pair()
  local res = xsa.train.pair(sa, xs, train, val, {steps = N, lr = 1e-3, weight_decay = 0.01, eval_every = N,
    eval_batches = 1, final_point = "subset", progress = false})
  return res.tokens_per_s
end

-- the bench step: the same two models on one batch, loss + backward + AdamW,
-- timed as the study's rate is (all N steps from a cold start, total time),
-- so that the ratio measures the study's loop and loader, not a median
-- against a mean
local function step_rate()
  local train = xsa.data.tinystories{seq_len = T, max_tokens = 500000, batch = B, seed = 0}
  local x, y = train:next()
  local models, opts = {pair()}, {}
  for k, m in ipairs(models) do opts[k] = xsa.optim.adamw(m:parameters(), {lr = 1e-3, weight_decay = 0.01}) end
  local t0 = now()
  for _ = 1, N do
    for k, m in ipairs(models) do
      opts[k]:zero_grad()
      m:loss(x, y):backward()
      opts[k]:step()
    end
  end
  return 2 * B * T * N / (now() - t0)
end

local th = xsa.blas().threads
if args.out then -- a child of --side-by-side: its study rate alone
  local f = assert(io.open(args.out, "w"))
  f:write(string.format("%.6g\n", study_rate()))
  f:close()
  return
end
if not args.side then
  local s, b = study_rate(), step_rate()
  print(string.format("study run (part 3's pair, %d x %d, %d steps, %d thread%s): %.0f model-tokens/s; "
    .. "bench step %.0f model-tokens/s; study / step %.2f", B, T, N, th, th == 1 and "" or "s", s, b, s / b))
  return
end
-- two study runs at 1 thread each, at once, against the bench step at 2 threads alone
local b2 = step_rate()
local dir = require("xsa.sys").mkdtemp("bench_study")
local cmds = {}
for k = 1, 2 do
  cmds[k] = {require("xsa.executor").exe(), arg[0], "--steps", tostring(N), "--threads", "1", "--out", dir .. "/" .. k}
end
local codes, rates = xsa._proc.pool(cmds, 2), {}
for k = 1, 2 do
  local f = io.open(dir .. "/" .. k)
  rates[k] = f and tonumber(f:read("l"))
  if f then f:close() end
  os.remove(dir .. "/" .. k)
  if codes[k] ~= 0 or not rates[k] then error("bench_study: side-by-side run " .. k .. " failed (code " .. tostring(codes[k]) .. ")", 0) end
end
os.remove(dir)
print(string.format("two study runs side by side at 1 thread: %.0f + %.0f = %.0f model-tokens/s; bench step at "
  .. "%d threads alone %.0f; sum / step %.2f", rates[1], rates[2], rates[1] + rates[2], th, b2,
  (rates[1] + rates[2]) / b2))
