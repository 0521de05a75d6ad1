-- model:generate, the kv_cache type and xsa.gpt.sample from Lua (the C side,
-- with the derivation of the logit tolerance, is tests/test_generate.c).
local T = require "testing"

local exe = os.getenv("XSA_EXE") or "build/xsa"
if not exe:find("^/") then exe = (os.getenv("XSA_ROOT") or ".") .. "/" .. exe end

-- the tolerance of test_generate.c: 2 D gamma_K max(1, max |logit|)
local function logit_tol(cfg, maxabs)
  local u = 2.0 ^ -24
  local K = math.max(4 * cfg.d_model, cfg.seq_len)
  local gamma = K * u / (1 - K * u)
  return 2 * (8 * cfg.n_layer + 2) * gamma * math.max(1, maxabs)
end

local small = xsa.gpt{d_model = 32, n_head = 2, seq_len = 16, seed = 1}
local small_xsa = small:clone{attention = "xsa", lambda = 1}
local greedy = {temperature = 0, max_new_tokens = 12}

T.case("prompt forms: string, ids, tensors, batches; batch rows equal single prompts", function()
  local tok = xsa.tokenizer.gpt2()
  for _, m in ipairs{small, small_xsa} do
    local text, ids, info = m:generate("Once upon a time", greedy)
    T.eq(type(text), "string")
    T.eq(ids:dtype(), "int32")
    T.eq(ids:numel(), 12)
    T.eq(text, tok:decode(ids))
    T.eq(info.prompt_tokens, 4)
    T.eq(info.stopped, "length")
    local p = tok:encode_table("Once upon a time")
    T.eq(m:generate(p, greedy), text, "a list of ids")
    T.eq(m:generate(xsa.tensor(p, "int32"), greedy), text, "a 1-D tensor")
    local texts, idss, binfo = m:generate({"Once upon a time", "The cat", "A"}, greedy)
    T.eq(#texts, 3)
    T.eq(texts[1], text, "row 1 of a batch = alone")
    T.eq(texts[2], (m:generate("The cat", greedy)), "row 2 = alone (left padding)")
    T.eq(texts[3], (m:generate("A", greedy)), "row 3 = alone")
    T.eq(binfo.prompt_tokens[2], 2)
    T.ok(idss[3]:equal(select(2, m:generate("A", greedy))))
    local rows = m:generate({p, tok:encode_table("The cat")}, greedy)
    T.eq(rows[1], text, "a list of id lists")
    local t2 = m:generate(xsa.tensor({p, p}, "int32"), greedy)
    T.eq(t2[2], text, "a 2-D tensor")
  end
end)

T.case("greedy: the cache and full forwards give the same ids, past seq_len too", function()
  for _, m in ipairs{small, small_xsa, small:clone{attention = "xsa", lambda = 0.5}} do
    local o = {temperature = 0, max_new_tokens = 40, use_cache = true}  -- 40 > seq_len 16
    local _, a = m:generate("One day, a little girl", o)
    o.use_cache = false
    local _, b = m:generate("One day, a little girl", o)
    T.ok(a:equal(b), tostring(a) .. " vs " .. tostring(b))
  end
end)

T.case("kv_cache:append gives the full forward's logits", function()
  local cfg = small_xsa:config()
  local g = xsa.generator(3)
  local ids = g:randint(0, cfg.vocab, 2, 10)
  local full = small_xsa:forward(ids)
  local c = small_xsa:kv_cache(2)
  T.eq(c:batch(), 2)
  T.eq(c:capacity(), 16)
  local first = c:append(ids:narrow(2, 1, 7):contiguous(), {all = true})
  T.eq(c:len(), 7)
  local parts = {first}
  for t = 8, 10 do parts[#parts + 1] = c:append(ids:narrow(2, t, 1):contiguous(), {all = true}) end
  local got = xsa.cat(parts, 2)
  local d = (got - full):abs():max():item()
  local tol = logit_tol(cfg, full:abs():max():item())
  T.ok(d <= tol, ("difference %g > tolerance %g"):format(d, tol))
  -- without all: the last position only, [B,V]
  c:reset()
  local last = c:append(ids)
  T.eq(#last:shape(), 2)
  T.ok((last - full:select(2, 10)):abs():max():item() <= tol)
  -- left padding through lengths
  c:reset()
  local padded = xsa.tensor({{0, 0, 0, 5, 6}, {1, 2, 3, 4, 5}}, "int32")
  local lg = c:append(padded, {lengths = {2, 5}})
  local alone = small_xsa:forward(xsa.tensor({{5, 6}}, "int32"))
  T.ok((lg[1] - alone[1][2]):abs():max():item() <= tol)
  T.raises(function() c:append(xsa.tensor({{1}, {2}}, "int32"), {lengths = {1, 1}}) end, "only accepted on an empty cache")
  T.raises(function() c:append(g:randint(0, cfg.vocab, 2, 12)) end, "exceed the model's seq_len 16")
  T.raises(function() c:append(xsa.tensor({1, 2}, "int32")) end, "ids must be an int32 [2,T] tensor")
  T.raises(function() c:append(xsa.tensor({{1}, {99999}}, "int32")) end, "outside [0, 50257)")
  T.raises(function() c:append(ids, {bogus = 1}) end, "unknown option 'bogus'")
  c:free()
  T.raises(function() c:len() end, "freed kv_cache")
  T.ok(tostring(c):find("freed"))
end)

T.case("sampling is seeded and reproducible", function()
  local o = {max_new_tokens = 15, seed = 7, temperature = 0.9, top_k = 50}
  local _, a = small:generate("The dog", o)
  local _, b = small:generate("The dog", o)
  T.ok(a:equal(b), "same seed, same tokens")
  o.seed = 8
  local _, c = small:generate("The dog", o)
  T.ok(not a:equal(c), "another seed, other tokens")
  -- without a seed: drawn from the global generator
  xsa.manual_seed(5); local _, d = small:generate("The dog", {max_new_tokens = 10})
  xsa.manual_seed(5); local _, e, info = small:generate("The dog", {max_new_tokens = 10})
  T.ok(d:equal(e), "manual_seed makes seedless calls repeatable")
  T.eq(math.type(info.seed), "integer")
  -- batch row i draws from seed + i - 1
  local _, rows = small:generate({"The dog", "The dog"}, {max_new_tokens = 10, seed = 3})
  local _, r2 = small:generate("The dog", {max_new_tokens = 10, seed = 4})
  T.ok(rows[2]:equal(r2))
end)

T.case("stop_at_eot ends a row at <|endoftext|>, which is not returned", function()
  local m = small:clone()
  local ps = m:parameters()
  xsa.no_grad(function()
    ps["ln_f.weight"]:zero_(); ps["ln_f.bias"]:fill_(1)
    ps["wte.weight"][50257]:fill_(1)    -- row of id 50256: its logit is 32, the others ~0
  end)
  local text, ids, info = m:generate("Hello", {max_new_tokens = 5, seed = 1})
  T.eq(text, "")
  T.eq(ids:numel(), 0)
  T.eq(info.stopped, "eot")
  local _, ids2, info2 = m:generate("Hello", {max_new_tokens = 5, stop_at_eot = false, seed = 1})
  T.eq(ids2:numel(), 5)
  T.eq(ids2[1], 50256)
  T.eq(info2.stopped, "length")
  -- an empty prompt starts from <|endoftext|>
  local _, _, info3 = small:generate("", {max_new_tokens = 2, seed = 1})
  T.eq(info3.prompt_tokens, 1)
end)

T.case("a prompt longer than seq_len is cropped from the left, with a note", function()
  local long = string.rep("the cat sat on the mat. ", 10)
  local _, _, info = small:generate(long, {max_new_tokens = 2, seed = 1, quiet = true})
  T.eq(info.cropped, info.prompt_tokens - 16)
  T.ok(info.cropped > 0)
  local p = io.popen(exe .. [[ -e 'xsa.gpt{d_model=16, n_head=2, seq_len=8}:generate(string.rep("a b ", 20), {max_new_tokens=1})' 2>&1]])
  local out = p:read("a")
  p:close()
  T.ok(out:find("model:generate: note: prompt has 41 tokens; keeping its last 8 (the model's seq_len)", 1, true), out)
end)

T.case("options are checked", function()
  T.raises(function() small:generate("a", {max_tokens = 3}) end, "unknown option 'max_tokens'")
  T.raises(function() small:generate("a", {temperature = "hot"}) end, "temperature must be a number")
  T.raises(function() small:generate("a", {top_p = 0}) end, "top_p must be in (0, 1]")
  T.raises(function() small:generate("a", {top_k = -1}) end, "top_k must be a non-negative integer")
  T.raises(function() small:generate("a", {seed = -1}) end, "seed must be a non-negative integer")
  T.raises(function() small:generate(42) end, "prompt must be a string")
  T.raises(function() small:generate({}) end, "an empty list is not a prompt")
  T.raises(function() small:generate({"a", {1}}) end, "mixes text and ids")
  T.raises(function() small:generate({1, 99999}) end, "outside [0, 50257)")
  local tiny = xsa.gpt{vocab = 10, d_model = 8, n_head = 2, seq_len = 4}
  local text, ids = tiny:generate({1, 2}, {max_new_tokens = 3, seed = 0})
  T.eq(text, nil, "no text for a vocabulary that is not GPT-2's")
  T.eq(ids:numel(), 3)
end)

T.case("xsa.gpt.sample and sample_probs on known distributions", function()
  local p = {0.4, 0.3, 0.2, 0.1}
  local logits = xsa.tensor(p):log()
  local function near(t, want)
    for i = 1, #want do T.near(t[i], want[i], 1e-6) end
  end
  near(xsa.gpt.sample_probs(logits), p)
  near(xsa.gpt.sample_probs(logits, {top_k = 2}), {4 / 7, 3 / 7, 0, 0})
  near(xsa.gpt.sample_probs(logits, {top_p = 0.75}), {4 / 9, 3 / 9, 2 / 9, 0})
  near(xsa.gpt.sample_probs(logits, {temperature = 0}), {1, 0, 0, 0})
  near(xsa.gpt.sample_probs(logits:view(1, 4), {top_k = 1})[1], {1, 0, 0, 0})
  T.eq(xsa.gpt.sample(logits, {temperature = 0}), 0, "greedy: id 0 (ids are 0-based)")
  local g1, g2 = xsa.generator(1), xsa.generator(1)
  local a, b = {}, {}
  local counts = {0, 0, 0, 0}
  for i = 1, 4000 do
    a[i] = xsa.gpt.sample(logits, {top_k = 3, generator = g1})
    b[i] = xsa.gpt.sample(logits, {top_k = 3, generator = g2})
    counts[a[i] + 1] = counts[a[i] + 1] + 1
  end
  T.eq(table.concat(a, ","), table.concat(b, ","), "a generator makes draws repeatable")
  T.eq(counts[4], 0, "top_k 3 never draws the 4th")
  -- chi-square, 2 degrees of freedom, 99.9%: 13.82
  local chi = 0
  for i = 1, 3 do
    local e = 4000 * p[i] / 0.9
    chi = chi + (counts[i] - e) ^ 2 / e
  end
  T.ok(chi < 13.82, "chi2 " .. chi)
  local batch = xsa.gpt.sample(xsa.stack{logits, logits}, {temperature = 0})
  T.eq(batch:dtype(), "int32")
  T.eq(batch[2], 0)
  T.raises(function() xsa.gpt.sample(xsa.tensor({1, 2}, "int32")) end, "logits must be a float32")
  T.raises(function() xsa.gpt.sample(logits, {generator = 1}) end, "generator must be an xsa.generator")
end)

T.case("scripts/sample.lua: two checkpoints side by side under their names, reproducibly", function()
  local dir = T.tmpdir()
  local m = xsa.gpt{d_model = 16, n_head = 2, seq_len = 16, seed = 2}
  m:save(dir .. "/sa.safetensors")
  m:clone{attention = "xsa", lambda = 0.5}:save(dir .. "/xsa.safetensors")
  local root = os.getenv("XSA_ROOT") or "."
  local cmd = string.format("%s %s/scripts/sample.lua %s/sa.safetensors --prompt 'The cat' %s/xsa.safetensors " ..
    "--tokens 12 --samples 2 --top-k 20 --width 80 2>&1", exe, root, dir, dir)
  local function run()
    local p = io.popen(cmd)
    local out = p:read("a")
    return out, p:close()
  end
  local out, ok = run()
  T.ok(ok, out)
  T.ok(out:find("SA%s+| XSA %(λ = 0.5%)"), out)
  T.ok(out:find("== sample 2 (seed 1)", 1, true), out)
  T.ok(select(2, out:gsub("The cat", "")) >= 4, out)
  for line in out:match("== sample.*"):gmatch("[^\n]+") do T.ok(utf8.len(line) <= 80, "line wider than 80: " .. line) end
  local again = run()
  T.eq(again:gsub("%d+ tokens/s", ""), (out:gsub("%d+ tokens/s", "")), "the same text on a second run")
  local p = io.popen(exe .. " " .. root .. "/scripts/sample.lua 2>&1")
  local usage = p:read("a")
  T.ok(not p:close() and usage:find("give one or two checkpoints", 1, true), usage)
  -- the report's samples come from part 3's summary
  local res = xsa.samples.pair({result = {checkpoints = {sa = dir .. "/sa.safetensors", xsa = dir .. "/xsa.safetensors"}}}, dir)
  T.eq(#res.prompts, 3)
  T.eq(res.models[2].name, "XSA (λ = 0.5)")
  local html = xsa.samples.pair_html({result = {checkpoints = {sa = dir .. "/sa.safetensors", xsa = dir .. "/xsa.safetensors"}}}, dir)
  T.ok(html:find('<table class="samples">', 1, true) and html:find("<b>Once upon a time</b>", 1, true), html)
  T.ok(xsa.samples.pair_html({result = {}}):find("No text samples", 1, true))
  -- a summary is data: checkpoints elsewhere than its folder are refused, not loaded
  for _, bad in ipairs{"/etc/passwd", dir .. "/../" .. dir:match("[^/]+$") .. "/sa.safetensors", dir .. "/sub/sa.safetensors", 42} do
    local none, why = xsa.samples.pair({result = {checkpoints = {sa = bad, xsa = dir .. "/xsa.safetensors"}}}, dir)
    T.ok(none == nil and why:find("refused", 1, true), tostring(bad) .. ": " .. tostring(why))
  end
  os.execute("rm -rf '" .. dir .. "'")
end)

T.case("samples.wrap and side_by_side", function()
  local s = xsa.samples
  T.eq(table.concat(s.wrap("aa bb cc\ndd", 5), "|"), "aa bb|cc|dd")
  T.eq(table.concat(s.wrap("abcdefgh", 3), "|"), "abc|def|gh")
  local sbs = s.side_by_side({{title = "A", text = "one two three"}, {title = "B", text = "four"}}, 23)
  T.eq(sbs, "A          | B\n-----------+-----------\none two    | four\nthree")
end)

-- Vocabularies padded past the tokenizer's 50257 (50304 is the usual size):
-- the model is made to draw, with probability 1/2 each, id 464 ("The") or the
-- last id, which no tokenizer has. Every form of prompt gives back all ids and
-- the text of the ids the tokenizer has, never an error after decoding.
T.case("a vocabulary larger than the tokenizer's: all ids back, the text of those it has", function()
  local tok = xsa.tokenizer.gpt2()
  local function tokenizer_has(ids)
    local out = {}
    for i = 1, ids:numel() do if ids[i] < 50257 then out[#out + 1] = ids[i] end end
    return out
  end
  for _, V in ipairs{50258, 50304, 50400} do
    local m = xsa.gpt{vocab = V, d_model = 16, n_head = 2, seq_len = 8, n_layer = 1, seed = 2}
    local ps = m:parameters()
    xsa.no_grad(function()
      ps["ln_f.weight"]:zero_(); ps["ln_f.bias"]:fill_(1)
      ps["wte.weight"][465]:fill_(1); ps["wte.weight"][V]:fill_(1) -- rows of ids 464 and V - 1: logits 16, the rest ~0
    end)
    for _, prompt in ipairs{"Once upon", {15496, 995}, xsa.tensor({15496, 995}, "int32"), {"A", "B c"}} do
      for _, cache in ipairs{true, false} do
        local ok, text, ids = pcall(m.generate, m, prompt, {max_new_tokens = 24, seed = V, use_cache = cache})
        T.ok(ok, V .. ": " .. tostring(text))
        local texts, rows = text, ids
        if type(prompt) == "table" and type(prompt[1]) == "string" then T.eq(#rows, 2) else texts, rows = {text}, {ids} end
        for i, r in ipairs(rows) do
          T.eq(r:numel(), 24, "every id back")
          local have, lacks = tokenizer_has(r), 0
          for k = 1, r:numel() do if r[k] == V - 1 then lacks = lacks + 1 end end
          T.ok(lacks > 0 and #have > 0, string.format("V %d: both kinds drawn (%d lacking, %d known)", V, lacks, #have))
          T.eq(texts[i], tok:decode(have), "the text of the ids the tokenizer has")
        end
      end
    end
  end
end)

-- The documentation promises that generating between a loss and its backward
-- leaves that backward working; with the cache and without it (the
-- reference path), and the gradients are those of a backward with nothing between.
T.case("generate between model:loss and its backward leaves the backward working, gradients unchanged", function()
  local x = xsa.tensor({{1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12}}, "int32")
  local y = xsa.tensor({{2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13}}, "int32")
  local function grads(between)
    local m = small:clone()
    local ps = m:parameters()
    xsa.optim.adamw(ps, {lr = 0}):zero_grad()
    local loss = m:loss(x, y)
    if between then between(m) end
    loss:backward()
    local out = {}
    for name, p in pairs(ps) do if type(name) == "string" then out[name] = p.grad:clone() end end
    return out
  end
  local want = grads(nil)
  for _, cache in ipairs{true, false} do
    local got = grads(function(m) m:generate("The dog", {max_new_tokens = 20, seed = 1, use_cache = cache}) end)
    for name, g in pairs(want) do
      T.ok(got[name]:equal(g), string.format("use_cache %s: %s's gradient", tostring(cache), name))
    end
  end
end)

T.done()
