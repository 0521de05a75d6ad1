-- test_attention_experiment.lua: an attention written in Lua in the
-- experiment layer (xsa.attention, ex:group: lua/xsa/runs.lua). Runs
-- doc/study.md's my_variant.lua as a user would (SA against a Lua variant,
-- --quick): trained and recorded once, then read from its record, then from
-- the cache; its function edited, trained again under a new key while SA's
-- key stays; its checkpoint reloaded with the function gives the recorded
-- loss. Then the identity of code (what changes it and what does not), the
-- keys of built-in groups (unchanged), a group's saved state with a Lua
-- model, and hostile names, functions and arms.
local xsa = require "xsa"
local T = require "testing"

local ROOT = os.getenv("XSA_ROOT") or "."
local EXE = xsa.experiment.exe()
local function shq(s) return xsa.sys.shell_quote(s) end

local example = assert(xsa.read_file(ROOT .. "/doc/study.md")):match("```lua\n(%-%- my_variant%.lua.-)```")
assert(example, "doc/study.md's my_variant.lua example")
local BODY = "return a.y - (a.y * vn):sum(-1, true) * vn * 0.5\n"
assert(example:find(BODY, 1, true), "the example's variant body")
-- the example's function, compiled here from the script's text up to it
-- (Lua's bytecode keeps the lines a function starts and ends at)
local function example_fn(text)
  local src = assert(text:match("^(.-\nlocal function half_xsa%(a%).-\nend\n)"))
  return assert(load(src .. "return half_xsa"))()
end

local function run(dir)
  return T.capture(string.format("cd %s && env -u XSA_RESULTS %s my_variant.lua --quick", shq(dir), shq(EXE)))
end
local function records(dir)
  local out = {}
  for _, f in ipairs(xsa.list_files(dir .. "/cache/records/variant") or {}) do
    if f:match("%.json$") then out[#out + 1] = xsa.json.read_file(dir .. "/cache/records/variant/" .. f) end
  end
  return out
end

T.case("the example: a Lua variant beside SA, recorded, read back, a miss when edited, its checkpoint reloads", function()
  local dir = T.tmpdir()
  T.writefile(dir .. "/my_variant.lua", example)
  local out, status = run(dir)
  T.eq(status, 0, out)
  T.ok(out:find("cache miss: variant-4steps-seed0", 1, true) and out:find("record written:", 1, true), out)
  local recs = records(dir)
  T.eq(#recs, 1, "one record")
  local first = recs[1]
  T.eq(first.runs[1].arm, "sa")
  T.eq(first.runs[2].arm, "half_xsa")
  T.eq(first.runs[2].model.attention_code, xsa.attention.code(example_fn(example)), "the record names the code")
  -- again: read from the record, nothing trained
  out, status = run(dir)
  T.eq(status, 0, out)
  T.ok(out:find("record: variant-4steps-seed0", 1, true) and not out:find("cache miss", 1, true) and
    not out:find("step 4/4", 1, true), out)
  -- without the record: this machine's cache entry, nothing trained
  os.execute("rm -rf " .. shq(dir .. "/cache/records"))
  out, status = run(dir)
  T.eq(status, 0, out)
  T.ok(out:find("cache hit: variant-4steps-seed0", 1, true) and not out:find("step 4/4", 1, true), out)
  -- the function's body edited: a miss, trained again, a new record beside
  local edited = example:gsub("%* 0%.5\n", "* 0.25\n", 1)
  T.ok(edited ~= example)
  T.writefile(dir .. "/my_variant.lua", edited)
  out, status = run(dir)
  T.eq(status, 0, out)
  T.ok(out:find("cache miss: variant-4steps-seed0", 1, true) and out:find("step 4/4", 1, true), out)
  recs = records(dir)
  T.eq(#recs, 2, "records of the first run (written again from the cache) and the edited one")
  local a, b = recs[1], recs[2]
  T.eq(a.runs[1].key, b.runs[1].key, "SA's key does not depend on the other arm")
  T.ok(a.runs[2].key ~= b.runs[2].key and a.key ~= b.key, "the edited variant's key differs")
  -- each record's half_xsa checkpoint reloads with its function and gives the recorded final val loss
  local tl, vl = xsa.study.loaders(a.config.data)
  for _, rec in ipairs(recs) do
    local text = rec.runs[2].model.attention_code == xsa.attention.code(example_fn(example)) and example or edited
    local f = example_fn(text)
    local ck -- the checkpoint beside the cache entry of this record's run (the same hash)
    for _, name in ipairs(xsa.list_files(dir .. "/cache")) do
      local hash = name:match("^variant%-4steps%-seed0%-(%x+)%.json$")
      local entry = hash and xsa.json.read_file(dir .. "/cache/" .. name)
      if entry and entry.result.runs[2].final_val == rec.runs[2].result.final_val then
        ck = string.format("%s/cache/variant-half_xsa-4steps-seed0-%s.safetensors", dir, hash)
      end
    end
    T.ok(ck and xsa.sys.exists(ck), "the checkpoint of " .. rec.runs[2].model.attention_code)
    local code = rec.runs[2].model.attention_code
    -- not registered yet, or registered with the other record's code: refused, saying so
    local now = xsa.attention.registered("half_xsa")
    local err = T.raises(function() xsa.gpt.load(ck) end, 'the Lua variant "half_xsa" (code ' .. code .. ')')
    T.ok(err:find(now and 'but the variant registered as "half_xsa" now has code ' .. now.code or
      "which is not registered in this process (registered: none)", 1, true), err)
    local m = xsa.gpt.load(ck, {attention = f})
    T.eq(m:config().attention, f)
    T.eq(xsa.train.evaluate(m, vl), rec.runs[2].result.final_val, "the loaded model's val loss")
    m:free()
    -- registered as the script registers it: loaded by the name its checkpoint records
    T.eq(xsa.attention.register("half_xsa", f), code)
    m = xsa.gpt.load(ck)
    T.eq(xsa.train.evaluate(m, vl), rec.runs[2].result.final_val, "loaded by its name")
    m:free()
  end
  tl:free(); vl:free()
end)

-- a function compiled from src (a chunk returning it), at line `line`
local function compile(src, line)
  return assert(load(string.rep("\n", (line or 1) - 1) .. src))()
end

T.case("the identity of a function: its body and captured values count, comments and names do not", function()
  local code = xsa.attention.code
  local base = code(compile("return function(a) return a.y * 0.5 end"))
  T.ok(base:match("^%x+$") and #base == 16, base)
  T.eq(code(compile("return function(a) return a.y * 0.5 end")), base, "compiled again")
  T.eq(code(compile("return function(b) --[[ a comment ]] return b.y * 0.5 end")), base, "a comment, a parameter's name")
  T.ok(code(compile("return function(a) return a.y * 0.25 end")) ~= base, "a constant")
  T.ok(code(compile("return function(a) return a.v * 0.5 end")) ~= base, "a field")
  T.ok(code(compile("return function(a) return a.y * 0.5 end", 3)) ~= base, "another line: a miss, never a hit")
  -- captured numbers and strings by value, helpers by their own code, libraries by name
  local cap = "local W, helper = ...; return function(a) return helper(a.y) * W end"
  local function with(w, helper) return assert(load(cap))(w, helper) end
  local h1 = compile("return function(y) return y * 2 end")
  local h2 = compile("return function(y) return y * 3 end")
  T.eq(code(with(8, h1)), code(with(8, h1)))
  T.ok(code(with(8, h1)) ~= code(with(4, h1)), "W changed")
  T.ok(code(with(8, h1)) ~= code(with(8, h2)), "the helper's body changed")
  T.ok(code(with(8, h1)) ~= code(with("8", h1)), "a string is not a number")
  T.ok(code(with(8, math.sqrt)) ~= code(with(8, math.exp)), "library functions by their names")
  T.eq(code(with(8, xsa)), code(with(8, xsa)), "a module")
  -- a Lua function that is also a global, or a field of a module of the
  -- user's own, is the script's code: keyed by its body, not its name
  rawset(_G, "lattn_helper", h1)
  package.loaded.lattn_mylib = {helper = h1}
  local by_global = code(with(8, h1))
  rawset(_G, "lattn_helper", h2)
  package.loaded.lattn_mylib.helper = h2
  T.ok(code(with(8, h2)) ~= by_global, "the global helper edited")
  rawset(_G, "lattn_helper", nil)
  package.loaded.lattn_mylib = nil
  -- recursion through an upvalue ends
  local rec = assert(load("local f; f = function(a, n) if n then return a.y end return f(a, 1) end; return f"))()
  T.ok(code(rec))
  -- what cannot be identified: named, not guessed
  local c, why = code(with(8, {1, 2}))
  T.eq(c, nil)
  T.ok(why:find("helper (a table)", 1, true), why)
  c, why = code(with(8, xsa.zeros(2)))
  T.eq(c, nil)
  T.ok(why:find("helper (a userdata)", 1, true), why)
end)

T.case("keys: built-in groups as before, a Lua arm by its name and code, SA's run the same beside either", function()
  local c = {data = {seed = 0}, model = {seed = 0, n_layer = 1}, train = {steps = 4}, arms = {"sa", "xsa"}}
  T.eq(xsa.store.cache_config(c).attention, nil, "nothing added to a built-in group's cache key")
  T.eq(xsa.group.variants(c), nil)
  local key = xsa.group.key(c, {})
  T.ok(not key:find("attention_code", 1, true), key)
  -- the key text of a built-in group, written out: it must not move by a bit
  T.eq(key, '{"runs":[{"data":{},"precision":"f32","run":{"data":{"seed":0},"model":{"attention":"sa","n_layer":1,' ..
    '"seed":0},"train":{"steps":4}}},{"data":{},"precision":"f32","run":{"data":{"seed":0},"model":{"attention":"xsa",' ..
    '"lambda":1,"n_layer":1,"seed":0},"train":{"steps":4}}}]}')
  local f = compile("return function(a) return a.y * 0.5 end")
  local id = xsa.attention.register("halfy", f)
  local g = {data = c.data, model = c.model, train = c.train, arms = {"sa", "halfy"}, lambda = 0.5}
  local runs = xsa.group.runs(g, {})
  T.eq(xsa.group.run_key(runs[1]), xsa.group.run_key(xsa.group.runs(c, {})[1]), "SA's run key")
  T.eq(runs[2].key.run.model.attention_code, id)
  T.eq(runs[2].key.run.model.lambda, nil, "a Lua variant takes no lambda")
  T.eq(xsa.store.cache_config(g).attention.halfy.code, id)
  local before = xsa.cache.key(xsa.store.cache_config(g))
  xsa.attention.register("halfy", compile("return function(a) return a.y * 0.75 end"))
  T.ok(xsa.cache.key(xsa.store.cache_config(g)) ~= before, "registered again with another body: another cache key")
  T.ok(xsa.group.key(g, {}) ~= key)
  -- a version stands for what cannot be identified, and is in the key
  local tbl = {0.5}
  local t = assert(load("local t = ...; return function(a) return a.y * t[1] end"))(tbl)
  T.raises(function() xsa.attention.register("tabled", t) end, "its upvalue f.t (a table) cannot be part of its identity")
  xsa.attention.register("tabled", t, {version = "t = {0.5}"})
  local v1 = xsa.group.key({data = {}, model = {}, train = {}, arms = {"tabled"}}, {})
  T.ok(v1:find('"attention_version":"t = {0.5}"', 1, true), v1)
  xsa.attention.register("tabled", t, {version = "t = {0.25}"})
  T.ok(xsa.group.key({data = {}, model = {}, train = {}, arms = {"tabled"}}, {}) ~= v1, "another version")
  -- the message a plain config with a function in it gets names the way out
  T.raises(function() xsa.cache.key({model = {attention = f}}) end, "xsa.attention.register(name, f)")
end)

T.case("a group's saved state reloads its Lua model with the function, and refuses it without", function()
  local f = compile("return function(a) return a.y * 0.5 end")
  local tl, vl = xsa.data.tinystories{seq_len = 16, max_tokens = 12000, batch = 4, seed = 0}
  local base = xsa.gpt{seed = 0, n_layer = 1, d_model = 32, n_head = 2, seq_len = 16}
  local runs = {{model = base, label = "sa"}, {model = base:clone{attention = f}, label = "lua"}}
  local dir, key = T.tmpdir(), {config = "a group with a Lua arm"}
  local r = xsa.train.runs(runs, tl, vl, {steps = 4, eval_every = 2, eval_batches = 2, progress = false, quiet = true,
    save_every = 2, save = function(_, status, ctx)
      if status == "checkpoint" then return xsa.state_files.write_group(dir .. "/g", key, ctx) end
    end})
  T.eq(r.status, "done")
  local say = function() end
  local saved = xsa.state_files.load_group(dir .. "/g", key, 2, 4, say, {nil, f})
  T.ok(saved, "loaded with the function")
  T.eq(saved.resume.completed_steps, 2)
  T.eq(saved.models[1]:config().attention, "sa")
  T.eq(saved.models[2]:config().attention, f)
  local x, y = tl:batch(1)
  T.ok(xsa.numbers.finite(xsa.no_grad(function() return saved.models[2]:loss(x, y):item() end)))
  for i = 1, 2 do saved.models[i]:free(); saved.optimizers[i]:free() end
  -- without it the state is unusable: said, removed, the group starts over
  local none, why = xsa.state_files.load_group(dir .. "/g", key, 2, 4, say)
  T.eq(none, nil)
  T.ok(why:find("cannot be loaded", 1, true), why)
  T.eq(xsa.sys.exists(dir .. "/g.resume.json"), false)
end)

T.case("hostile: names, functions, versions and arms get clear errors before anything is trained", function()
  local f = compile("return function(a) return a.y end")
  local reg = xsa.attention.register
  for _, name in ipairs{"a b", "x/../y", "$(touch x)", "`rm`", "a|b", "*a*", "[a](b)", "<b>", "a\nb", "-a", "1a", "",
    string.rep("a", 33), "caf\xc3\xa9"} do
    T.raises(function() reg(name, f) end, "a variant's name is a letter, then letters, digits or _", name)
  end
  T.raises(function() reg(nil, f) end, "(got nil)")
  for _, name in ipairs{"sa", "xsa", "vsub", "function"} do
    T.raises(function() reg(name, f) end, "is the name of a built-in variant", name)
  end
  T.raises(function() reg("ok", math.sqrt) end, "got a C function")
  T.raises(function() reg("ok", xsa.zeros(1)) end, "f must be a function written in Lua (got userdata)")
  T.raises(function() reg("ok", "return a.y") end, "(got string)")
  T.raises(function() reg("ok", f, {versoin = "1"}) end, "versoin")
  for _, v in ipairs{"", "a\nb", string.rep("v", 65), 3} do
    T.raises(function() reg("ok", f, {version = v}) end, "version must be printable text")
  end
  T.raises(function() xsa.attention.get("nope") end, 'no variant named "nope"')
  T.raises(function() xsa.attention.get("$(x)") end, "no variant named")
  T.raises(function() xsa.gpt{attention = "gated"} end, "attention must be") -- a registered name is not a built-in
  -- an experiment's group: unknown, repeated and lambda-bearing Lua arms
  reg("plain", f)
  local dir = T.tmpdir()
  local ex = xsa.experiment{name = "hostile", argv = {"--quick", "--out", dir .. "/out", "--results", dir .. "/res",
    "--plots", dir .. "/plots"}, quick = {steps = 2, max_tokens = 6000, batch = 2, eval_every = 1, eval_batches = 1}}
  T.raises(function() ex:group{arms = {"sa", "nope"}} end, 'no variant named "nope"')
  T.raises(function() ex:group{arms = {"sa", "plain", "plain"}} end, "arm 3, plain, is in the group twice")
  T.raises(function() ex:group{arms = {{attention = "xsa", lambda = 0.5}, {attention = "xsa", lambda = 0.5}}} end,
    "arm 2, xsa-l0.5, is in the group twice")
  T.raises(function() ex:group{arms = {"sa", {attention = "plain", lambda = 0.5}}} end, "takes no lambda")
  T.raises(function() ex:group{arms = {}} end, "arms must be a list of 1 to")
  T.raises(function() ex:group{arms = {"sa", {attention = "xsa", lambda = "0.5"}}} end, "lambda must be a finite number")
  T.raises(function() ex:group{arms = {"sa", {attention = "xsa", lambda = 0 / 0}}} end, "lambda must be a finite number")
  T.raises(function() ex:group{config = {model = {}}, arms = {"sa"}} end, "config is not a group's")
  T.raises(function() ex:group{arms = {"sa", f}} end, "no variant named function")
  T.raises(function() ex:group{armz = {"sa"}} end, "armz")
  local files = T.capture("find " .. shq(dir) .. " -type f")
  T.eq(files, "", "nothing trained, nothing written")
end)

T.done()
