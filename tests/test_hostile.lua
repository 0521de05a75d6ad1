-- test_hostile.lua: the Lua binding layer survives hostile scripts (the rules
-- are at the top of lua/l_bind.h).
--
-- Two parts, each run in a child xsa (this file with --child PART) under
-- timeout(1), from a scratch folder, so a crash, a sanitizer report or a hang
-- is a test failure naming the case (the child prints "CASE name" before
-- each call; the parent reports the last one printed when the child dies):
--   regress  one targeted case per crash or wrong answer found and fixed
--   battery  every function of xsa, xsa.nn, xsa.gpt, xsa.optim, xsa.json,
--            xsa.safetensors, xsa.tokenizer, xsa.data, xsa._data, xsa._text, xsa.mpi
--            (but abort, which ends the process by design) and every
--            method of the tensor, model, optimizer, generator, tokenizer and
--            loader types, found through the tables themselves (a new function
--            is covered without touching this file), called with no
--            arguments, nil, wrong types, extra arguments, hostile numbers,
--            freed objects and tables whose metamethods free the receiver
-- Each call must end in a Lua error with a message or a result; never in a
-- signal, a sanitizer report or a hang. Plus, in the parent: Ctrl-C reaches a
-- busy loop inside a coroutine.
--
-- Big allocations fail fast in the child (ulimit -v; under ASan
-- max_allocation_size_mb) so sizes like 2^31 give "out of memory" errors.
local T = require "testing"

local MODE, PART = arg[1], arg[2]
local ROOT = os.getenv("XSA_ROOT") or "."

local function shq(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- ---------------------------------------------------------------------------
-- shared by the child parts
-- ---------------------------------------------------------------------------

local out = io.stdout

-- o:free(), whatever o is (a freed optimizer raises even on o.free)
local function sfree(o) pcall(function() o:free() end) end

local function say(...)
  out:write(...)
  out:write("\n")
  out:flush()
end

local function restore_gc()
  collectgarbage("incremental", 200, 100, 13)
  collectgarbage()
end

-- A finalizer that frees objects in the middle of a C function, at each of
-- its first allocations in turn. For j = 0 .. points-1: make() gives fresh
-- objects; many finalizable objects (one shared metatable, so making them
-- allocates little) become garbage and the collector is stepped until the
-- first batch of
-- their finalizers has run, so the rest are pending and each allocation
-- inside call(objs) runs the next batch (10 per GC step, GCFINMAX; "restart"
-- zeroes the GC debt so the first allocation already steps); the
-- (10j+1)-th to run frees the objects (free(objs)). Every call must end in a
-- result or an error with a message. Returns how many rounds freed
-- something inside the call.
local function gc_race(points, make, free, call)
  local fired = 0
  local st, cur, target = {}, nil, 0
  local mt = {__gc = function()
    if not st.armed then st.outside = st.outside + 1; return end
    st.seen = st.seen + 1
    if st.seen == target then fired = fired + 1; free(cur) end
  end}
  for j = 0, points - 1 do
    collectgarbage()
    cur = make()
    st.armed, st.seen, st.outside = false, 0, 0
    target = 10 * j + 1
    -- (lua_gc ignores 0 for pause and stepsize, so 1: stepsize 2 bytes)
    collectgarbage("incremental", 1, 1, 1) -- stepmul 1: a step runs ten or twenty
    for _ = 1, 10 * j + 60 do setmetatable({}, mt) end
    local guard = 0
    while st.outside == 0 and guard < 100000 do
      collectgarbage("step", 0)
      guard = guard + 1
    end
    collectgarbage("incremental", 1, 40, 1) -- about one step, ten finalizers, per allocation
    collectgarbage("restart") -- debt 0: the very next allocation is a step
    st.armed = true
    local ok, e = pcall(call, cur)
    st.armed = false
    restore_gc()
    if not ok and not (type(e) == "string" and #e > 0) then
      error("an error without a message: " .. tostring(e), 2)
    end
  end
  if fired == 0 then error("the finalizer never ran inside the call", 2) end
  return fired
end

-- An __index / __len that frees obj (once) and then answers v.
local function freeing(obj, v)
  local done = false
  return function()
    if not done then done = true; obj:free() end
    return v
  end
end

-- ---------------------------------------------------------------------------
-- child: targeted regression cases
-- ---------------------------------------------------------------------------

local function regress_cases()
  local cases = {}
  local function case(name, fn) cases[#cases + 1] = {name, fn} end
  local function ok(c, msg) if not c then error(msg or "assertion failed", 2) end end
  local function raises(fn, pat)
    local s, e = pcall(fn)
    if s then error("expected an error matching '" .. pat .. "'", 2) end
    if not tostring(e):find(pat, 1, true) then error("error '" .. tostring(e) .. "' lacks '" .. pat .. "'", 2) end
    return e
  end
  -- a Lua error with a message, or a result: never anything else
  local function survives(fn)
    local s, e = pcall(fn)
    if not s then ok(type(e) == "string" and #e > 0, "error without a message: " .. tostring(e)) end
    return s, e
  end
  local function model(extra)
    local cfg = {vocab = 16, n_layer = 1, d_model = 8, n_head = 2, seq_len = 4}
    for k, v in pairs(extra or {}) do cfg[k] = v end
    return xsa.gpt(cfg)
  end
  local function tokens(B, Tn) return xsa.zeros({B or 1, Tn or 4}, "int32") end

  -- ---- use after free: Lua run by a metamethod, a callback or a finalizer ----
  local function free_all(objs) for _, o in ipairs(objs) do sfree(o) end end
  case("view: a shape table whose __len frees the tensor", function()
    local t = xsa.ones(4, 4)
    local shape = setmetatable({16}, {__len = freeing(t, 1)})
    local s, v = survives(function() return t:view(shape) end)
    -- shapes are read raw: __len never runs, the view is right
    ok(s and v:numel() == 16 and v:dim() == 1, tostring(v))
  end)
  case("reshape / expand / permute / zeros / rand / tensor: shape tables with metamethods", function()
    local function evil(t, n) return {__len = freeing(t, n), __index = freeing(t, 1)} end
    local t = xsa.ones(2, 3)
    local s, v = survives(function() return t:reshape(setmetatable({3, 2}, evil(t, 8))) end)
    ok(s and v:size(1) == 3, tostring(v))
    t = xsa.ones(1, 3)
    s, v = survives(function() return t:expand(setmetatable({2, 3}, evil(t, 1))) end)
    ok(s and v:size(1) == 2, tostring(v))
    t = xsa.ones(2, 3)
    s, v = survives(function() return t:permute(setmetatable({2, 1}, evil(t, 2))) end)
    ok(s and v:size(1) == 3, tostring(v))
    survives(function() return xsa.zeros(setmetatable({2, 2}, evil(t, 3))) end)
    survives(function() return xsa.rand(setmetatable({2}, evil(t, 3))) end)
    survives(function() return xsa.tensor(setmetatable({1, 2}, evil(t, 9))) end)
  end)
  case("zeros_like / full_like: an options table whose __index frees the tensor", function()
    local t = xsa.ones(2, 2)
    raises(function() return xsa.zeros_like(t, setmetatable({}, {__index = freeing(t, nil)})) end, "freed tensor")
    t = xsa.ones(2, 2)
    raises(function() return xsa.full_like(t, 3, setmetatable({}, {__index = freeing(t, nil)})) end, "freed tensor")
  end)
  case("totable: a finalizer frees the tensor while the tables are built", function()
    gc_race(40, function() return {xsa.ones(32, 32)} end, free_all, function(o)
      local r = o[1]:totable()
      ok(#r == 32 and r[32][32] == 1, "wrong values")
    end)
  end)
  case("shape / stride / size: a finalizer frees the tensor while the table is made", function()
    -- found by the battery: push_dims read t->shape after lua_createtable
    for _, m in ipairs{"shape", "stride", "size"} do
      gc_race(4, function() return {xsa.ones(2, 3, 4)} end, free_all, function(o)
        local r = o[1][m](o[1])
        ok(#r == 3 and r[3] == (m == "stride" and 1 or 4), "wrong values")
      end)
    end
  end)
  case("split / chunk: a finalizer frees the tensor between the pieces", function()
    gc_race(40, function() return {xsa.ones(2048)} end, free_all, function(o)
      ok(select("#", o[1]:split(1)) == 2048)
    end)
    gc_race(40, function() return {xsa.ones(2048)} end, free_all, function(o)
      ok(select("#", o[1]:chunk(1000)) == 1000)
    end)
  end)
  case("max(dim): a finalizer frees the tensor between the values and the indices", function()
    gc_race(100, function() return {xsa.ones(64, 2)} end, free_all, function(o) return o[1]:max(2) end)
  end)
  case("masked_fill / where: a finalizer frees the arguments", function()
    gc_race(200, function() return {xsa.ones(8), xsa.ones(8)} end, free_all,
      function(o) return o[1]:masked_fill(o[2], 2) end)
    gc_race(200, function() return {xsa.ones(8), xsa.ones(8)} end, free_all,
      function(o) return xsa.where(o[1], o[2], 1) end)
  end)
  case("cat / stack: a finalizer frees the listed tensors", function()
    gc_race(200, function() local v = {} for i = 1, 8 do v[i] = xsa.ones(2) end return v end, free_all,
      function(o) return xsa.stack(o) end)
    gc_race(200, function() local v = {} for i = 1, 8 do v[i] = xsa.ones(2) end return v end, free_all,
      function(o) return xsa.cat(o) end)
  end)
  case("nn.attention: an options table whose __index frees q", function()
    local q = xsa.randn(1, 4, 6)
    raises(function() return xsa.nn.attention(q, 1, 0.5, setmetatable({}, {__index = freeing(q, true)})) end,
      "freed tensor")
    gc_race(100, function() return {xsa.randn(1, 4, 6)} end, free_all,
      function(o) return xsa.nn.attention(o[1], 2, 0.5, {probe = true, weights = true}) end)
  end)
  case("model:clone / save / set_attention: options that free the model", function()
    local m = model()
    raises(function() return m:clone(setmetatable({}, {__index = freeing(m, nil)})) end, "freed model")
    m = model()
    local path = os.tmpname()
    raises(function() return m:save(path, setmetatable({}, {__index = freeing(m, nil)})) end, "freed model")
    os.remove(path)
  end)
  case("model:probe: the loader's methods free the model", function()
    local m = model()
    local loader = {
      num_batches = function() m:free(); return 2 end,
      batch = function() return tokens(), tokens() end,
    }
    local s, r = survives(function() return m:probe(loader) end)
    -- the model is held for the whole call: the probe completes
    ok(s and #r == 1, tostring(r))
    m = model()
    loader.num_batches = function() return 3 end
    loader.batch = function(_, i) if i == 2 then m:free() end return tokens(), tokens() end
    s, r = survives(function() return m:probe(loader) end)
    ok(s and #r == 1, tostring(r))
  end)
  case("model:parameters / config / loss / forward: a finalizer frees the model", function()
    for _, fn in ipairs{
      function(m) return m:parameters() end, function(m) return m:config() end,
      function(m) return m:loss(tokens(), tokens()) end, function(m) return m:forward(tokens()) end,
      function(m) return m:clone() end, function(m) return tostring(m) end,
    } do
      gc_race(30, function() return {model()} end, free_all, function(o) return fn(o[1]) end)
    end
  end)
  case("model:loss: freeing the model before backward", function()
    local m = model()
    local loss = m:loss(tokens(), tokens())
    m:free()
    survives(function() loss:backward() end) -- the loss holds the model
  end)
  case("optim.adamw: entries whose __index frees earlier tensors", function()
    local a, b = xsa.ones(2), xsa.ones(2)
    local params = {a, setmetatable({}, {__index = function() sfree(a); return b end})}
    local s, o = survives(function() return xsa.optim.adamw(params) end)
    ok(s, tostring(o))
    a = nil
    collectgarbage()
    o:step() -- the optimizer holds its own references
    gc_race(100, function() return {xsa.ones(2), xsa.ones(3)} end, free_all,
      function(ts) return xsa.optim.adamw({{tensor = ts[1]}, ts[2]}, {lr = 0.1}) end)
  end)
  case("safetensors.save: entries whose __index frees tensors and drops names", function()
    local path = os.tmpname()
    local a, b = xsa.ones(2), xsa.ones(3)
    local list = {{"a", a}}
    list[2] = setmetatable({}, {__index = function(_, k)
      if k == "name" then sfree(a); list[1][1] = nil; return "b" end
      return b
    end})
    raises(function() xsa.safetensors.save(path, list) end, "freed tensor")
    a = xsa.ones(2)
    list[1] = {"a", a}
    local names = 0
    list[2] = setmetatable({}, {__index = function(_, k)
      if k == "name" then names = names + 1; list[1][1] = "renamed" .. names; return "b" .. names end
      return b
    end})
    xsa.safetensors.save(path, list)
    local got = xsa.safetensors.load(path)
    ok(got.a and got.b1, "names as read") -- each name as it was when its entry was read
    gc_race(50, function() return {xsa.ones(2), xsa.ones(3)} end, free_all,
      function(ts) return xsa.safetensors.save(path, {x = ts[1], y = ts[2]}, {k = 1.5, n = 3}) end)
    os.remove(path)
  end)
  case("json.encode: a finalizer empties the table being encoded", function()
    gc_race(30, function()
      local t = {}
      for i = 1, 300 do t["k" .. i] = {i} end
      return t
    end, function(t) for k in pairs(t) do t[k] = nil end end, function(t) return xsa.json.encode(t) end)
  end)

  -- ---- tokenizer and data: the tokenizer freed while its arguments are read
  local tok_ok = pcall(function() return xsa.tokenizer.gpt2() end)
  if tok_ok then
    local function newtok() return {xsa.tokenizer.load(xsa.data.tokenizer_files())} end
    case("tokenizer:encode / count / decode: options or a finalizer free the tokenizer", function()
      local t = newtok()[1]
      raises(function() return t:encode("hi", setmetatable({}, {__index = freeing(t, nil)})) end, "freed tokenizer")
      t = newtok()[1]
      raises(function() return t:count("hi", setmetatable({}, {__index = freeing(t, nil)})) end, "freed tokenizer")
      local one = newtok()
      gc_race(100, function() return one end, function() end, function(o) return o[1]:encode(12345) end)
      gc_race(20, newtok, free_all, function(o) return o[1]:decode({1, 2, 3}), o[1]:encode(12345) end)
    end)
    case("_data.story_tokens / tokenize_stories: a number converts while the tokenizer is held", function()
      gc_race(20, newtok, free_all, function(o) return xsa._data.tokenize_stories(o[1], 12345) end)
      gc_race(20, newtok, free_all, function(o) return xsa._data.story_tokens(o[1], 12345) end)
    end)
  end
  case("_data.loader: a finalizer frees the token tensor", function()
    gc_race(200, function() return {xsa.zeros({100}, "int32")} end, free_all,
      function(o) return xsa._data.loader(o[1], 0, 2, 4, 1) end)
  end)

  -- ---- unchecked int64 ----
  case("split / chunk with math.maxinteger: one piece, not zero", function()
    local t = xsa.ones(10)
    ok(select("#", t:split(math.maxinteger)) == 1, "split")
    ok(select("#", t:chunk(math.maxinteger)) == 10, "chunk")
    ok(select("#", t:split(1 << 62)) == 1, "split 2^62")
    ok(select("#", t:chunk(3)) == 3 and select("#", t:split(3)) == 4, "ordinary sizes")
  end)
  case("narrow: a huge length is refused, not wrapped", function()
    local t = xsa.ones(10)
    raises(function() return t:narrow(1, 2, math.maxinteger) end, "runs past size")
    raises(function() return t:narrow(1, 10, 1 << 62) end, "runs past size")
  end)
  case("dimension messages name the number given", function()
    raises(function() return xsa.ones(2):sum(math.maxinteger) end, "dimension 9223372036854775807 out of range")
  end)
  case("_data.loader / split: counts near 2^62 are refused", function()
    local tk = xsa.zeros({100}, "int32")
    raises(function() return xsa._data.loader(tk, 1 << 62, 1 << 62, 1, 1) end, "first_window")
    raises(function() return xsa._data.loader(tk, 0, 1 << 62, 1, 1) end, "num_windows")
    raises(function() return xsa._data.loader(tk, 0, 10, 4, math.maxinteger) end, "batch")
    raises(function() return xsa._data.loader(tk, 0, 10, math.maxinteger, 1) end, "seq_len")
    raises(function() return xsa._data.loader(tk, 0, 30, 4, 2) end, "exceed")
    raises(function() return xsa._data.loader(tk, 0, 2.5, 4, 2) end, "num_windows must be an integer")
    raises(function() return xsa._data.split(100, math.maxinteger, 0.1) end, "seq_len")
    local l = xsa._data.loader(tk, 0, 10, 4, 2)
    raises(function() return l:batch(math.mininteger) end, "out of range")
    raises(function() return l:window(math.mininteger) end, "out of range")
    local x = l:batch(1)
    ok(x:size(1) == 2 and x:size(2) == 4)
  end)

  -- ---- validation before use: size-0 last dimensions ----
  case("nn.linear / layernorm / cross_entropy: a size-0 last dimension gives PyTorch's result or an error, not SIGFPE", function()
    -- linear over no input channels is the bias (zeros without one); layernorm of nothing is empty
    local y = xsa.nn.linear(xsa.zeros(2, 0), xsa.zeros(0, 3))
    T.eq(y:shape()[1], 2); T.eq(y:shape()[2], 3); T.eq(y:abs():sum():item(), 0)
    T.eq(xsa.nn.layernorm(xsa.zeros(2, 0), xsa.zeros(0), xsa.zeros(0)):numel(), 0)
    raises(function() return xsa.nn.cross_entropy(xsa.zeros(2, 0), xsa.zeros({2}, "int32")) end, "have no classes")
  end)

  -- ---- checks on the wrong type ----
  case("lambda = 1e300 is refused (finite as a double, inf as a float)", function()
    raises(function() return xsa.gpt{lambda = 1e300, attention = "xsa"} end, "finite as a float32")
    local m = model()
    raises(function() return m:clone{lambda = 1e300} end, "finite as a float32")
    raises(function() return m:set_attention("xsa", 1e300) end, "finite as a float32")
    raises(function() return xsa.nn.attention(xsa.randn(1, 2, 6), 1, 1e300) end, "finite as a float32")
    ok(m:set_attention("xsa", 3.4e38):config().lambda == 3.4e38)
  end)
  case("xsa.gpt.load: a checkpoint whose lambda is 1e300 is refused", function()
    local path = os.tmpname()
    model{attention = "xsa", lambda = 0.5}:save(path)
    local ts, meta = xsa.safetensors.load(path)
    local key
    for k, v in pairs(meta) do if v == "0.5" then key = k end end
    ok(key, "no lambda in the metadata")
    meta[key] = "1e300"
    xsa.safetensors.save(path, ts, meta)
    raises(function() return xsa.gpt.load(path) end, "not finite as a float32")
    os.remove(path)
  end)
  case("adamw: lr, eps, weight_decay and betas must be finite as floats", function()
    local p = {xsa.ones(2)}
    raises(function() return xsa.optim.adamw(p, {lr = 1e300}) end, "finite as a float32")
    raises(function() return xsa.optim.adamw(p, {eps = 1e39}) end, "finite as a float32")
    raises(function() return xsa.optim.adamw(p, {weight_decay = -1e300}) end, "finite as a float32")
    local o = xsa.optim.adamw(p)
    raises(function() o.lr = 1e300 end, "finite as a float32")
  end)
  case("counts must be integer-valued: 2.5 is refused, not truncated", function()
    raises(function() return xsa.nn.attention(xsa.randn(1, 2, 6), 2.5) end, "head count must be an integer")
    local m = model()
    local loader = {num_batches = function() return 2 end, batch = function() return tokens(), tokens() end}
    raises(function() return m:probe(loader, 2.5) end, "number of batches must be an integer")
    raises(function() return m:probe(loader, 0/0) end, "number of batches must be an integer")
    raises(function() return xsa._data.loader(xsa.zeros({100}, "int32"), 0, 2, 4.5, 1) end, "seq_len must be an integer")
  end)

  -- ---- trusted user assignments: .grad ----
  case("p.grad = nil on a model parameter, then backward: an error, not SIGSEGV", function()
    for _, i in ipairs{1, 2, 3, 7} do
      local m = model()
      local p = m:parameters()[i].tensor
      p.grad = nil
      raises(function() m:loss(tokens(), tokens()):backward() end, "has no .grad")
    end
  end)
  case("a non-contiguous, expanded, wrong-shape or int32 .grad is refused", function()
    local m = model()
    local p = m:parameters()[1].tensor -- wte [16,8]
    raises(function() p.grad = xsa.zeros(1, 8):expand(16, 8) end, "contiguous float32")
    raises(function() p.grad = xsa.zeros(8, 16):T() end, "contiguous float32")
    raises(function() p.grad = xsa.zeros(16, 9) end, "contiguous float32")
    raises(function() p.grad = xsa.zeros({16, 8}, "int32") end, "contiguous float32")
    -- a dense tensor of the right shape is used: the gradient lands there
    local g = xsa.zeros(16, 8)
    p.grad = g
    m:loss(tokens(), tokens()):backward()
    ok(g:abs():sum():item() > 0, "the gradient went elsewhere")
  end)
  case("loss:backward(g): g must be one float32 value", function()
    local m = model()
    survives(function() m:loss(tokens(), tokens()):backward(xsa.tensor(1, "int32")) end)
    survives(function() m:loss(tokens(), tokens()):backward(xsa.ones(3)) end)
    survives(function() m:loss(tokens(), tokens()):backward(xsa.tensor(2.0)) end)
  end)

  -- ---- cache files: the core refuses a cache that is its own source ----
  case("tinystories{path=P, cache=P} leaves the text as it was", function()
    local p = os.tmpname()
    local text = ("Once upon a time there was a cat.\n<|endoftext|>\n"):rep(200)
    local f = assert(io.open(p, "wb")); f:write(text); f:close()
    if tok_ok then
      survives(function() return xsa.data.tinystories{path = p, cache = p, seq_len = 4, batch = 1} end)
    end
    f = assert(io.open(p, "rb")); local now = f:read("a"); f:close()
    os.remove(p)
    ok(now == text, "the text file was overwritten")
  end)

  return cases
end

local function run_regress(only)
  local n = 0
  for _, c in ipairs(regress_cases()) do
    if only and not c[1]:find(only, 1, true) then goto continue end
    say("CASE ", c[1])
    local s, e = xpcall(c[2], debug.traceback)
    if s then say("PASS ", c[1]) else say("FAIL ", c[1], ": ", (tostring(e):gsub("\n", "\n    "))) end
    n = n + 1
    ::continue::
  end
  say("END ", n)
end

-- ---------------------------------------------------------------------------
-- child: the battery
-- ---------------------------------------------------------------------------

-- The values every argument position is tried with; pool(ctx) makes them
-- fresh for each function (a call may free or change any of them). Hostile
-- tables free ctx.victim (the receiver, or a tensor argument) from their
-- metamethods.
local function pool(ctx)
  local v = {}
  local function add(name, val) v[#v + 1] = {name, val} end
  local function victim_free() for _, o in ipairs(ctx.victims) do sfree(o) end end
  add("nil", nil)
  add("true", true)
  add("false", false)
  add('""', "")
  add('"x"', "x")
  add('"float32"', "float32")
  add('"int32"', "int32")
  add('"xsa"', "xsa")
  add('"12"', "12")
  add('"1e300"', "1e300")
  add('"a"x5000', ("a"):rep(5000))
  add('"\\0x"', "\0x")
  for _, n in ipairs{{"-1", -1}, {"0", 0}, {"1", 1}, {"2", 2}, {"3", 3}, {"2^31", 1 << 31}, {"2^53", 1 << 53},
                     {"2^62", 1 << 62}, {"maxinteger", math.maxinteger}, {"mininteger", math.mininteger},
                     {"0.5", 0.5}, {"2.5", 2.5}, {"-0.0", -0.0}, {"2.0", 2.0}, {"NaN", 0 / 0}, {"inf", math.huge},
                     {"-inf", -math.huge}, {"1e300", 1e300}, {"-1e300", -1e300}, {"1e39", 1e39},
                     {"2^63 float", 2.0 ^ 63}} do
    add(n[1], n[2])
  end
  add("{}", {})
  add("{1}", {1})
  add("{2,3}", {2, 3})
  add("{-1}", {-1})
  add("{0}", {0})
  add("{2^62,2^62}", {1 << 62, 1 << 62})
  add("{0.5}", {0.5})
  add('{"x"}', {"x"})
  add("{{1,2},{3}}", {{1, 2}, {3}})
  add("{1,2,3,...9 dims}", {1, 1, 1, 1, 1, 1, 1, 1, 1})
  local deep = {}
  local d = deep
  for _ = 1, 2000 do d[1] = {}; d = d[1] end
  add("deep table", deep)
  local cyc = {}
  cyc[1] = cyc
  cyc.self = cyc
  add("cyclic table", cyc)
  add("{dtype=int32}", {dtype = "int32"})
  add("{requires_grad=true}", {requires_grad = true})
  add("{tensor=t}", {tensor = ctx.t23})
  add("{t,t}", {ctx.t23, ctx.t23})
  add("{name,t}", {{"a", ctx.t23}})
  add("erroring metatable", setmetatable({}, {
    __index = function() error("index boom") end, __len = function() error("len boom") end,
    __tostring = function() error("tostring boom") end, __call = function() error("call boom") end,
    __pairs = function() error("pairs boom") end, __eq = function() error("eq boom") end}))
  -- (__index answers only a few keys: one answering every key would make
  -- any ipairs loop in Lua code endless, which is the loop's business)
  local function few(k) return type(k) ~= "number" or (k >= 1 and k <= 3) end
  add("__index/__len free the victims", setmetatable({}, {
    __index = function(_, k) victim_free(); if few(k) then return 2 end end,
    __len = function() victim_free(); return 2 end,
    __tostring = function() victim_free(); return "x" end}))
  add("__index returns huge", setmetatable({}, {__index = function(_, k) if few(k) then return 1 << 62 end end,
                                              __len = function() return 1 << 62 end}))
  add("__index returns a freed tensor", setmetatable({}, {__index = function(_, k) if few(k) then return ctx.freed_tensor end end}))
  add("function", function() end)
  add("function erroring", function() error("fn boom") end)
  add("function freeing the victims", function() victim_free(); return 1 end)
  add("function returning tensors", function() return ctx.i14, ctx.i14 end)
  add("coroutine", coroutine.create(function() end))
  add("io.stdout", io.stdout)
  add("json.null", xsa.json.null)
  add("tensor 0-d", xsa.tensor(1.5))
  add("tensor [0]", xsa.zeros(0))
  add("tensor [2,0]", xsa.zeros(2, 0))
  add("tensor [2,3]", ctx.t23)
  add("tensor [2,3] int32", xsa.zeros({2, 3}, "int32"))
  add("tensor [1,4] int32 ids", ctx.i14)
  add("tensor [3,2] transposed", xsa.randn(2, 3):T())
  add("tensor expanded", xsa.ones(1, 3):expand(4, 3))
  add("tensor requires_grad", xsa.randn(2, 3):requires_grad(true))
  add("tensor [1,2,6]", xsa.randn(1, 2, 6))
  add("freed tensor", ctx.freed_tensor)
  add("model", ctx.model)
  add("freed model", ctx.freed_model)
  add("optimizer", ctx.opt)
  add("freed optimizer", ctx.freed_opt)
  add("generator", xsa.generator(1))
  if ctx.tok then add("tokenizer", ctx.tok) end
  if ctx.freed_tok then add("freed tokenizer", ctx.freed_tok) end
  add("loader", ctx.loader)
  add("freed loader", ctx.freed_loader)
  add("lua loader", ctx.lua_loader)
  return v
end

-- A cheap subset, for functions that are slow to call (files, the corpus).
local LIGHT = {["nil"] = 1, ["true"] = 1, ['""'] = 1, ['"x"'] = 1, ["-1"] = 1, ["0"] = 1, ["2^62"] = 1,
  ["2.5"] = 1, ["NaN"] = 1, ["1e300"] = 1, ["{}"] = 1, ["erroring metatable"] = 1,
  ["__index/__len free the victims"] = 1, ["function freeing the victims"] = 1, ["freed tensor"] = 1,
  ["tensor [2,3]"] = 1, ["freed tokenizer"] = 1, ["cyclic table"] = 1}

local function make_ctx(S)
  local ctx = {}
  ctx.t23 = xsa.randn(2, 3)
  ctx.i14 = xsa.zeros({1, 4}, "int32")
  ctx.freed_tensor = xsa.ones(2); ctx.freed_tensor:free()
  ctx.model = xsa.gpt{vocab = 16, n_layer = 1, d_model = 8, n_head = 2, seq_len = 4}
  ctx.freed_model = xsa.gpt{vocab = 16, n_layer = 1, d_model = 8, n_head = 2, seq_len = 4}
  ctx.freed_model:free()
  ctx.opt = xsa.optim.adamw({xsa.randn(2)})
  ctx.freed_opt = xsa.optim.adamw({xsa.randn(2)}); ctx.freed_opt:free()
  ctx.tok = S.tok
  ctx.freed_tok = S.freed_tok
  ctx.loader = xsa._data.loader(S.tokens, 0, 8, 4, 2)
  ctx.freed_loader = xsa._data.loader(S.tokens, 0, 8, 4, 2); ctx.freed_loader:free()
  ctx.lua_loader = xsa.data.loader(S.tokens, {seq_len = 4, batch = 2})
  ctx.victims = {}
  return ctx
end

-- Known good argument lists (a function of ctx and the shared state S), so
-- every position is tried with every value next to valid neighbours. A
-- function not listed here gets generic ones; `light` marks slow functions
-- (the cheap pool subset); `after` undoes global effects.
local function specs(S)
  local function mcfg() return {vocab = 16, n_layer = 1, d_model = 8, n_head = 2, seq_len = 4, attention = "xsa", lambda = 0.5} end
  return {
    ["xsa.set_threads"] = {bases = {{1}}, after = function() xsa.set_threads(S.threads) end},
    ["xsa.set_grad_enabled"] = {bases = {{true}}},
    ["xsa.read_file"] = {bases = {{S.text}}},
    ["xsa.write_file_atomic"] = {bases = {{"out.txt", "data"}}},
    ["xsa.no_grad"] = {bases = {{function() return 1 end}}},
    ["xsa.tensor"] = {bases = {{{{1, 2}, {3, 4}}}, {{1, 2}, "int32"}, {2.5, {requires_grad = true}}}},
    ["xsa.zeros"] = {bases = {{2, 3}, {{2, 3}, "int32"}}},
    ["xsa.ones"] = {bases = {{2, 3}}},
    ["xsa.full"] = {bases = {{2, 3, 1.5}, {2, 7, "int32"}}},
    ["xsa.arange"] = {bases = {{0, 10, 2}, {5}}},
    ["xsa.rand"] = {bases = {{2, 3}, {xsa.generator(1), 2}}},
    ["xsa.randn"] = {bases = {{2, 3}}},
    ["xsa.randint"] = {bases = {{0, 10, 2, 3}}},
    ["xsa.generator"] = {bases = {{1}}},
    ["xsa.manual_seed"] = {bases = {{1}}},
    ["xsa.where"] = {bases = {function(c) return {xsa.ones(2, 3), c.t23, 0} end}},
    ["xsa.matmul"] = {bases = {function(c) return {c.t23, xsa.randn(3, 2)} end}},
    ["xsa.allclose"] = {bases = {function(c) return {c.t23, c.t23, 1e-5, 1e-8} end}},
    ["xsa.cat"] = {bases = {function(c) return {{c.t23, c.t23}, 1} end}},
    ["xsa.stack"] = {bases = {function(c) return {{c.t23, c.t23}, 2} end}},
    ["xsa.zeros_like"] = {bases = {function(c) return {c.t23} end}},
    ["xsa.full_like"] = {bases = {function(c) return {c.t23, 2, {dtype = "float32"}} end}},
    ["xsa.rand_like"] = {bases = {function(c) return {c.t23, xsa.generator(2)} end}},
    ["xsa.gpt()"] = {bases = {{mcfg()}}},
    ["xsa.gpt.load"] = {bases = {{S.ckpt}}, light = true},
    ["xsa.nn.embedding"] = {bases = {function(c) return {c.i14, xsa.randn(16, 6), xsa.randn(4, 6)} end}},
    ["xsa.nn.linear"] = {bases = {function(c) return {c.t23, xsa.randn(3, 4), xsa.randn(4)} end}},
    ["xsa.nn.layernorm"] = {bases = {function(c) return {c.t23, xsa.ones(3), xsa.zeros(3)} end}},
    ["xsa.nn.gelu"] = {bases = {function(c) return {c.t23} end}},
    ["xsa.nn.attention"] = {bases = {
      function() return {xsa.randn(1, 3, 6), 2, 0.5, {probe = true, weights = true}} end,
      function() local q = xsa.randn(1, 3, 2) return {q, q, q, 1, 0.0} end}},
    ["xsa.nn.cross_entropy"] = {bases = {function() return {xsa.randn(4, 5), xsa.zeros({4}, "int32")} end}},
    ["xsa.optim.adamw"] = {bases = {function(c) return {{c.t23}, {lr = 1e-3, betas = {0.9, 0.99}, eps = 1e-8, weight_decay = 0.1}} end}},
    ["xsa.json.encode"] = {bases = {{{a = 1, b = {1, 2}}, {indent = true}}}},
    ["xsa.json.decode"] = {bases = {{'{"a":[1,2.5,null]}'}}},
    ["xsa.json.array"] = {bases = {{{1, 2}}}},
    ["xsa.json.write_file"] = {bases = {{"out.json", {a = 1}, {indent = false}}}},
    ["xsa.json.read_file"] = {bases = {{S.json}}},
    ["xsa.safetensors.save"] = {bases = {function(c) return {"out.st", {a = c.t23}, {k = "v", n = 1.5}} end,
                                         function(c) return {"out2.st", {{"a", c.t23}, {name = "b", tensor = c.i14}}} end}},
    ["xsa.safetensors.load"] = {bases = {{S.st}}},
    ["xsa.tokenizer.load"] = {bases = {{S.enc, S.vocab}}, light = true},
    ["xsa.tokenizer.gpt2"] = {bases = {{}}, light = true},
    ["xsa._tokenizer.load"] = {bases = {{S.enc, S.vocab}}, light = true},
    ["xsa.data.tinystories"] = {bases = {{{path = S.text, cache = false, seq_len = 4, batch = 1, max_tokens = 300}}}, light = true},
    ["xsa.data.loader"] = {bases = {function() return {S.tokens, {seq_len = 4, batch = 2, shuffle = true, seed = 1}} end}},
    ["xsa.data.read_text"] = {bases = {{S.text}}},
    ["xsa.data.find"] = {bases = {{"encoder.json"}}},
    ["xsa._data.read_text"] = {bases = {{S.text}}},
    ["xsa._data.is_file"] = {bases = {{S.text}}},
    ["xsa._data.story_tokens"] = {bases = {function() return {S.tok, S.text, "tok.cache"} end}, light = true},
    ["xsa._data.tokenize_stories"] = {bases = {function() return {S.tok, "Once upon a time.<|endoftext|>Hi"} end}},
    ["xsa._data.split"] = {bases = {{1000, 8, 0.1}}},
    ["xsa._data.loader"] = {bases = {function() return {S.tokens, 0, 8, 4, 2, true, 3} end}},
    -- methods: arguments after self
    ["tensor:view"] = {bases = {{3, 2}, {{-1}}}},
    ["tensor:reshape"] = {bases = {{3, -1}}},
    ["tensor:expand"] = {bases = {{4, 2, 3}}},
    ["tensor:permute"] = {bases = {{2, 1}, {{2, 1}}}},
    ["tensor:narrow"] = {bases = {{2, 1, 2}}},
    ["tensor:select"] = {bases = {{1, 2}}},
    ["tensor:transpose"] = {bases = {{1, 2}}},
    ["tensor:get"] = {bases = {{1, 2}}},
    ["tensor:set"] = {bases = {{1, 2, 5.5}}},
    ["tensor:split"] = {bases = {{1, 2}}},
    ["tensor:chunk"] = {bases = {{2, 2}}},
    ["tensor:clamp"] = {bases = {{-1, 1}}},
    ["tensor:masked_fill"] = {bases = {function(c) return {xsa.ones(2, 3), 0.5} end}},
    ["tensor:backward"] = {bases = {{}, {true}}},
    ["tensor:__newindex"] = {bases = {{1, 5}, {"grad", xsa.zeros(2, 3)}}},
    ["tensor:__index"] = {bases = {{1}, {"grad"}}},
    ["model:loss"] = {bases = {function(c) return {c.i14, c.i14} end}},
    ["model:forward"] = {bases = {function(c) return {c.i14} end}},
    ["model:clone"] = {bases = {{{attention = "xsa", lambda = 0.25}}}},
    ["model:copy_from"] = {bases = {function() return {xsa.gpt{vocab = 16, n_layer = 1, d_model = 8, n_head = 2, seq_len = 4}} end}},
    ["model:set_attention"] = {bases = {{"xsa", 0.5}}},
    ["model:probe"] = {bases = {function(c) return {c.loader, 2} end, function(c) return {c.lua_loader, 1} end}},
    ["model:save"] = {bases = {function(c) return {"model.st", {optimizer = c.opt}} end}},
    ["optimizer:__newindex"] = {bases = {{"lr", 0.01}}},
    ["optimizer:__index"] = {bases = {{"lr"}, {"betas"}, {"step"}}},
    ["generator:randint"] = {bases = {{0, 5, 2}}},
    ["generator:manual_seed"] = {bases = {{7}}},
    ["generator:rand"] = {bases = {{2, 2}}},
    ["tokenizer:encode"] = {bases = {{"Hello world", {special = true, table = false}}}},
    ["tokenizer:encode_table"] = {bases = {{"Hello", {special = true}}}},
    ["tokenizer:count"] = {bases = {{"Hello"}}},
    ["tokenizer:decode"] = {bases = {{{15496, 995}}, function() return {xsa.tensor({15496}, "int32")} end}},
    ["tokenizer:token"] = {bases = {{50256}}},
    ["loader:batch"] = {bases = {{1}}},
    ["loader:window"] = {bases = {{1}}},
    ["lua loader:batch"] = {bases = {{1}}},
    ["lua loader:window"] = {bases = {{1}}},
  }
end

-- Every function to try: {name, fn, self_maker or nil}.
local function targets(S)
  local list = {}
  local seen = {}
  local function add_lib(prefix, tbl)
    local names = {}
    for k, f in pairs(tbl) do
      if type(k) == "string" and (type(f) == "function") then names[#names + 1] = k end
    end
    table.sort(names)
    for _, k in ipairs(names) do
      local f = tbl[k]
      if not seen[f] or prefix == "xsa.data" or prefix == "xsa.tokenizer" then
        seen[f] = true
        list[#list + 1] = {prefix .. "." .. k, f}
      end
    end
  end
  -- load the lazy submodules first, so pairs(xsa) sees only what it holds
  local data, tokenizer = xsa.data, xsa.tokenizer
  add_lib("xsa", xsa)
  list[#list + 1] = {"xsa.gpt()", function(...) return xsa.gpt(...) end}
  for _, lib in ipairs{"nn", "gpt", "optim", "json", "safetensors", "_data", "_tokenizer", "_text", "mpi"} do
    add_lib("xsa." .. lib, xsa[lib])
  end
  -- ends the process by design (the whole job under mpirun): no result to check
  for i = #list, 1, -1 do if list[i][1] == "xsa.mpi.abort" then table.remove(list, i) end end
  add_lib("xsa.tokenizer", tokenizer)
  add_lib("xsa.data", data)
  -- the types: methods from getmetatable(obj).__index (or .methods when
  -- __index is a function), and the metamethods
  local function add_type(tname, make)
    local obj = make()
    local mt = getmetatable(obj)
    local methods = mt.__index
    if type(methods) ~= "table" then methods = mt.methods end
    local names = {}
    for k, f in pairs(methods or {}) do if type(f) == "function" then names[#names + 1] = k end end
    for k, f in pairs(mt) do
      if type(f) == "function" and k:sub(1, 2) == "__" then names[#names + 1] = k end
    end
    table.sort(names)
    for _, k in ipairs(names) do
      local f = (k:sub(1, 2) == "__") and mt[k] or methods[k]
      list[#list + 1] = {tname .. ":" .. k, f, make}
    end
    sfree(obj)
  end
  add_type("tensor", function() return xsa.randn(2, 3) end)
  add_type("model", function() return xsa.gpt{vocab = 16, n_layer = 1, d_model = 8, n_head = 2, seq_len = 4} end)
  add_type("optimizer", function() return xsa.optim.adamw({xsa.randn(2, 3)}) end)
  add_type("generator", function() return xsa.generator(5) end)
  if S.tok then
    add_type("tokenizer", function()
      if not pcall(S.tok.vocab_size, S.tok) then S.tok = xsa.tokenizer.load(S.enc, S.vocab) end
      return S.tok
    end)
  end
  add_type("loader", function() return xsa._data.loader(S.tokens, 0, 8, 4, 2, false, 1) end)
  add_type("lua loader", function() return xsa.data.loader(S.tokens, {seq_len = 4, batch = 2}) end)
  return list
end

-- the files and objects every target's calls draw on
local function battery_fixtures()
  local S = {}
  S.threads = xsa.blas().threads
  S.text = "story.txt"
  local f = assert(io.open(S.text, "wb"))
  f:write(("Once upon a time there was a little cat. It was happy.\n<|endoftext|>\n"):rep(20))
  f:close()
  S.json = "in.json"
  xsa.json.write_file(S.json, {a = {1, 2, 3}, b = "x"})
  S.st = "in.safetensors"
  xsa.safetensors.save(S.st, {w = xsa.randn(2, 2)}, {note = "x"})
  S.ckpt = "model.safetensors"
  xsa.gpt{vocab = 16, n_layer = 1, d_model = 8, n_head = 2, seq_len = 4}:save(S.ckpt)
  S.tokens = xsa.arange(0, 200, "int32")
  local okf, enc, vocab = pcall(xsa.data.tokenizer_files)
  if okf then
    S.enc, S.vocab = enc, vocab
    S.tok = xsa.tokenizer.load(enc, vocab)
    S.freed_tok = xsa.tokenizer.load(enc, vocab)
    S.freed_tok:free()
  end
  return S
end

-- One target's state: its function, spec, receiver maker, the values and
-- argument lists to try, and the calls' helpers (bt.call counts into counts).
local function battery_target(tgt, S, SPEC, counts)
  local bt = {name = tgt[1], fn = tgt[2], make = tgt[3], failures = {}, counts = counts, t0 = os.clock()}
  local name, fn, make = bt.name, bt.fn, bt.make
  local spec = SPEC[name] or {}
  bt.spec = spec
  function bt.call(label, args, n)
    counts.calls = counts.calls + 1
    say("CASE ", name, " ", label)
    local ok, e = pcall(fn, table.unpack(args, 1, n))
    if not ok and not (type(e) == "string" and #e > 0) then
      bt.failures[#bt.failures + 1] = label .. ": an error without a message (" .. tostring(e) .. ")"
    end
    if spec.after then pcall(spec.after) end
    xsa.set_grad_enabled(true)
  end
  local ctx = make_ctx(S)
  bt.ctx = ctx
  function bt.receiver()
    if make then
      bt.recv = make()
      ctx.victims = {bt.recv, ctx.t23}
      return bt.recv
    end
    ctx.victims = {ctx.t23}
    return nil
  end
  local values = pool(ctx)
  -- free, __gc, __close consume their receiver: the cheap subset (a
  -- tokenizer costs a reload each time)
  local method = name:match(":(.*)$")
  if method == "free" or method == "__gc" or method == "__close" then spec.light = true end
  if spec.light then
    local keep = {}
    for _, v in ipairs(values) do if LIGHT[v[1]] then keep[#keep + 1] = v end end
    values = keep
  end
  bt.values = values
  -- argument lists: the spec's, else generic ones
  bt.bases = {}
  for _, b in ipairs(spec.bases or {{}, {1}, {ctx.t23}, {ctx.t23, ctx.t23}}) do
    bt.bases[#bt.bases + 1] = b
  end
  function bt.base_args(b)
    if type(b) == "function" then return b(ctx) end
    return b
  end
  function bt.with_self(args, n)
    if not make then return args, n end
    local a = {bt.receiver()}
    for i = 1, n do a[i + 1] = args[i] end
    return a, n + 1
  end
  return bt
end

-- an options table at argument pos of base b: every field with every value
local function battery_options(bt, bi, b, pos, n, opt)
  if not (type(opt) == "table" and getmetatable(opt) == nil and next(opt) ~= nil and type(next(opt)) == "string") then
    return
  end
  local keys = {}
  for k in pairs(opt) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    for _, v in ipairs(bt.values) do
      local fresh = bt.base_args(b)
      local o2 = {}
      for kk, vv in pairs(fresh[pos]) do o2[kk] = vv end
      o2[k] = v[2]
      local args2 = {}
      for i = 1, n do args2[i] = fresh[i] end
      args2[pos] = o2
      local a, an = bt.with_self(args2, n)
      bt.call(string.format("base %d arg %d .%s = %s", bi, pos, k, v[1]), a, an)
    end
  end
end

-- base b: itself, with extra arguments, every value at every position
local function battery_values(bt, bi, b, args, n)
  local a, an = bt.with_self(args, n)
  bt.call("base " .. bi, a, an)
  -- extra arguments
  local ex = {}
  for i = 1, n do ex[i] = args[i] end
  ex[n + 1], ex[n + 2] = "extra", {}
  a, an = bt.with_self(ex, n + 2)
  bt.call("base " .. bi .. " + extra", a, an)
  -- every position, every value
  for pos = 1, n + 1 do
    for _, v in ipairs(bt.values) do
      local args2 = {}
      local fresh = bt.base_args(b)
      for i = 1, n do args2[i] = fresh[i] end
      args2[pos] = v[2]
      a, an = bt.with_self(args2, math.max(n, pos))
      bt.call(string.format("base %d arg %d = %s", bi, pos, v[1]), a, an)
    end
    battery_options(bt, bi, b, pos, n, args[pos])
  end
end

-- reentrancy: an error handler that frees everything during the call
local function battery_xpcall(bt, bi, b, n)
  local a, an = bt.with_self(bt.base_args(b), n)
  bt.counts.calls = bt.counts.calls + 1
  say("CASE ", bt.name, " base ", bi, " under an xpcall handler that frees")
  xpcall(bt.fn, function(m)
    for _, o in ipairs(bt.ctx.victims) do sfree(o) end
    collectgarbage()
    return m
  end, table.unpack(a, 1, an))
  xsa.set_grad_enabled(true)
  if bt.spec.after then pcall(bt.spec.after) end
end

-- reentrancy: a finalizer that frees the receiver at the collector's step j
local function battery_finalizer(bt, bi, b, n, j)
  local a, an = bt.with_self(bt.base_args(b), n)
  local victims = bt.ctx.victims
  local st = {armed = false, seen = 0, outside = 0}
  local target = 10 * j + 1
  local mt = {__gc = function()
    if not st.armed then st.outside = st.outside + 1; return end
    st.seen = st.seen + 1
    if st.seen == target then for _, o in ipairs(victims) do sfree(o) end end
  end}
  collectgarbage()
  collectgarbage("incremental", 1, 1, 1)
  for _ = 1, 10 * j + 40 do setmetatable({}, mt) end
  local guard = 0
  while st.outside == 0 and guard < 100000 do collectgarbage("step", 0); guard = guard + 1 end
  collectgarbage("incremental", 1, 40, 1)
  collectgarbage("restart")
  bt.counts.calls = bt.counts.calls + 1
  say("CASE ", bt.name, " base ", bi, " with a finalizer freeing at step ", j)
  st.armed = true
  local ok, e = pcall(bt.fn, table.unpack(a, 1, an))
  st.armed = false
  collectgarbage("incremental", 200, 100, 13)
  if not ok and not (type(e) == "string" and #e > 0) then
    bt.failures[#bt.failures + 1] = "finalizer step " .. j .. ": an error without a message"
  end
  xsa.set_grad_enabled(true)
  if bt.spec.after then pcall(bt.spec.after) end
end

-- every hostile call of one target; says its PASS or FAIL line
local function battery_run_target(bt, sanitized)
  -- no arguments at all, and nil
  bt.call("()", {}, 0)
  bt.call("(nil)", {nil}, 1)
  for bi, b in ipairs(bt.bases) do
    local args = bt.base_args(b)
    local n = #args
    battery_values(bt, bi, b, args, n)
    -- a freed receiver
    if bt.make then
      local r = bt.receiver()
      sfree(r)
      local fa = {r}
      for i = 1, n do fa[i + 1] = args[i] end
      bt.call("base " .. bi .. " on a freed receiver", fa, n + 1)
    end
    battery_xpcall(bt, bi, b, n)
    if not bt.spec.light then
      for j = 0, (sanitized and 1 or 3) do battery_finalizer(bt, bi, b, n, j) end
    end
  end
  -- wrong receivers: every value as self
  if bt.make then
    local args = bt.base_args(bt.bases[1])
    for _, v in ipairs(bt.values) do
      local a = {v[2]}
      for i = 1, #args do a[i + 1] = args[i] end
      bt.call("self = " .. v[1], a, #args + 1)
    end
  end
  if os.getenv("XSA_HOSTILE_TIMES") then io.stderr:write(string.format("%8.3f %s\n", os.clock() - bt.t0, bt.name)) end
  if #bt.failures == 0 then say("PASS battery ", bt.name)
  else say("FAIL battery ", bt.name, ": ", table.concat(bt.failures, "; ")) end
end

local function run_battery()
  local S = battery_fixtures()
  local SPEC = specs(S)
  local list = targets(S)
  local counts, nfuncs = {calls = 0}, 0
  local sanitized = (os.getenv("XSA_SANITIZED") or "") ~= ""
  for _, tgt in ipairs(list) do
    local bt = battery_target(tgt, S, SPEC, counts)
    battery_run_target(bt, sanitized)
    nfuncs = nfuncs + 1
    if bt.recv then sfree(bt.recv) end
    collectgarbage()
  end
  say("STAT ", nfuncs, " functions, ", counts.calls, " calls")
  say("END ", nfuncs)
end

if MODE == "--child" then
  if PART == "regress" then run_regress(arg[3]) -- arg[3]: only cases whose name holds it
  elseif PART == "battery" then run_battery()
  else error("unknown part " .. tostring(PART)) end
  os.exit(0)
end

-- ---------------------------------------------------------------------------
-- parent
-- ---------------------------------------------------------------------------

local EXE = os.getenv("XSA_EXE") or "build/xsa"
if EXE:sub(1, 1) ~= "/" then EXE = ROOT .. "/" .. EXE end
local SELF = ROOT .. "/tests/test_hostile.lua"
local SANITIZED = (os.getenv("XSA_SANITIZED") or "") ~= ""
local TMP = T.tmpdir()

local function read(p)
  local f = io.open(p, "rb")
  if not f then return "" end
  local s = f:read("a")
  f:close()
  return s
end

-- A child's bounds. A hang that spins is caught by its CPU time (ulimit -t,
-- soft: SIGXCPU), which a loaded machine does not stretch: on the Zen 3,
-- idle-ish, the battery used 33.5 s of CPU and regress 3.6 s, while at a
-- load average of 12-16 on its 2 cores the battery took 313 s of wall time
-- (240 s, the old wall bound, failed there); the CPU bounds are 9-16x
-- those, 5x more under the sanitizers. A hang that blocks uses no CPU: the
-- wall bound (timeout, 1 h) catches it, where only a child getting under
-- 1/20 of a core (sanitized) or 1/100 (not) could reach it honestly.
local CPU_BOUND, WALL_BOUND = {regress = 60, battery = 300}, 3600

-- Runs `--child part` from TMP; turns its PASS/FAIL lines into cases, and a
-- child that dies (signal, sanitizer, timeout) into a failure naming the
-- case it was in.
local function run_child(part)
  local err = TMP .. "/" .. part .. ".err"
  local cpu = CPU_BOUND[part] * (SANITIZED and 5 or 1)
  local limit
  if SANITIZED then
    local o = os.getenv("ASAN_OPTIONS")
    o = (o and o ~= "" and o .. ":" or "") .. "allocator_may_return_null=1:max_allocation_size_mb=1024"
    limit = "ASAN_OPTIONS=" .. shq(o) .. " "
  else
    limit = "ulimit -v 3000000; "
  end
  local cmd = string.format("cd %s && ulimit -S -t %d; %stimeout %d %s %s --child %s 2>%s; echo \"EXIT $?\"",
    shq(TMP), cpu, limit, WALL_BOUND, shq(EXE), shq(SELF), part, shq(err))
  local p = io.popen("sh -c " .. shq(cmd))
  local last, ended, status, count = nil, false, nil, 0
  for line in p:lines() do
    local kind, rest = line:match("^(%u+) (.*)$")
    if kind == "CASE" then last = rest
    elseif kind == "PASS" then T.case(part .. ": " .. rest, function() end); count = count + 1
    elseif kind == "FAIL" then
      local name, msg = rest:match("^(.-): (.*)$")
      T.case(part .. ": " .. (name or rest), function() error(msg or rest, 0) end)
      count = count + 1
    elseif kind == "STAT" then io.stdout:write(part, ": ", rest, "\n")
    elseif kind == "END" then ended = true
    elseif kind == "EXIT" then status = tonumber(rest)
    end
  end
  p:close()
  if not ended or status ~= 0 then
    local e = read(err)
    local how = status == 124 and string.format("ran past %d s of wall time (blocked?)", WALL_BOUND)
      or status == 128 + 24 and string.format("used more than %d s of CPU (spinning?)", cpu) or "died"
    T.case(part .. ": the child ran to the end", function()
      error(string.format("child %s %s (status %s) in case: %s\n%s", part, how, tostring(status), tostring(last),
        e:sub(-4000)), 0)
    end)
  end
  return count
end

run_child("regress")
run_child("battery")


-- Runs `code` as a script in its own process, sends it SIGINT once it has
-- printed "started" (and 0.3 s more), and returns its exit status and output.
-- The waits are wall time, so they are generous (a start within 120 s, 300 s
-- in all: a loaded machine took seconds to start xsa); a script that ignores
-- the interrupt still ends in timeout's 124, a failure.
local function interrupted(name, code)
  local f, out = TMP .. "/" .. name .. ".lua", TMP .. "/" .. name .. ".out"
  T.writefile(f, "io.stdout:write('started\\n') io.stdout:flush()\n" .. code .. "\n")
  local sh = string.format("%s %s >%s 2>&1 & pid=$!; i=0; " ..
    "while ! grep -q started %s 2>/dev/null && [ $i -lt 2400 ]; do sleep 0.05; i=$((i+1)); done; " ..
    "sleep 0.3; kill -INT $pid; wait $pid; echo $?", shq(EXE), shq(f), shq(out), shq(out))
  local p = io.popen("timeout 300 sh -c " .. shq(sh))
  local status = tonumber(p:read("a"):match("(%d+)%s*$"))
  p:close()
  return status, read(out)
end

T.case("Ctrl-C stops a busy loop inside a coroutine", function()
  local scripts = {
    -- resume swallows errors: the interrupt must still end the script
    "local co = coroutine.create(function() while true do end end)\nprint(coroutine.resume(co))\nprint('after')",
    "coroutine.wrap(function() local x = 0 while true do x = x + 1 end end)()",
    "local o = coroutine.wrap(function()\n local i = coroutine.create(function() while true do end end)\n" ..
      " while true do coroutine.resume(i) end\nend)\no()",
  }
  for i, code in ipairs(scripts) do
    local status, o = interrupted("co" .. i, code)
    T.ok(status and status ~= 0 and status ~= 124, "script " .. i .. " status " .. tostring(status) .. ": " .. o)
    T.ok(o:find("interrupted!", 1, true), "script " .. i .. ": " .. o)
    T.ok(not o:find("after", 1, true), "script " .. i .. " went on: " .. o)
  end
end)

T.case("an interrupt caught by pcall is raised once (lua.c semantics)", function()
  local status, o = interrupted("once", "local ok, e = pcall(function() while true do end end)\nprint('caught', e)\n" ..
    "local s = 0 for i = 1, 3e6 do s = s + i end print('finished', s)")
  T.eq(status, 0, o)
  T.ok(o:find("caught.-interrupted!") and o:find("finished", 1, true), o)
end)

os.execute("rm -rf " .. shq(TMP))
T.done()
