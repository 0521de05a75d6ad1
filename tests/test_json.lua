-- test_json.lua: xsa.json (encode/decode/array/null/read_file/write_file) and
-- xsa.read_file / xsa.write_file_atomic: exact round trips of nested values
-- and doubles, deterministic key order, every error path.
local T = require "testing"
local xsa = require "xsa"
local json = xsa.json

local tmp, cleanup, base = T.tmp_paths("json-test")

-- deep equality that also compares integer/float kinds
local function same(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) == "number" then
    return math.type(a) == math.type(b) and (a == b or (a ~= a and b ~= b))
  end
  if type(a) ~= "table" then return a == b end
  for k, v in pairs(a) do if not same(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

T.case("decode refuses what it cannot return faithfully: NUL in strings, numbers beyond a double", function()
  T.raises(function() json.decode('"a\\u0000b"') end, "\\u0000 escape")
  T.raises(function() json.decode('{"k": "\\u0000"}') end, "\\u0000 escape")
  T.raises(function() json.decode('"a\0b"') end, "NUL byte")
  T.raises(function() json.decode("[1e400]") end, "1e400 is out of range")
  T.raises(function() json.decode("-1e999") end, "out of range")
  -- an escaped backslash followed by u0000 is ordinary text
  T.eq(json.decode('"a\\\\u0000b"'), "a\\u0000b")
  T.eq(json.decode("1e308"), 1e308)
end)

T.case("scalars", function()
  T.eq(json.encode(1), "1")
  T.eq(json.encode(-42), "-42")
  T.eq(json.encode(1.5), "1.5")
  T.eq(json.encode(1.0), "1.0")
  T.eq(json.encode(-0.0), "-0.0")
  T.eq(json.encode(true), "true")
  T.eq(json.encode(false), "false")
  T.eq(json.encode(nil), "null")
  T.eq(json.encode(json.null), "null")
  T.eq(json.encode("a\"b\\c\n\t\1"), '"a\\"b\\\\c\\n\\t\\u0001"')
  T.eq(json.encode("héllo"), '"héllo"')
  T.eq(json.decode("null"), json.null)
  T.eq(json.decode(" true "), true)
  T.eq(json.decode('"x\\u00e9\\n"'), "xé\n")
end)

T.case("exact doubles and integer kinds", function()
  local vals = {0.1, 1 / 3, 1e-300, 2 ^ -1074, 1.7976931348623157e308, -2.5e-8,
                123456789.123456789, 2 ^ 53, 2 ^ 63, math.pi, 1e21, 5e-324}
  for _, v in ipairs(vals) do
    local s = json.encode(v)
    local back = json.decode(s)
    T.eq(math.type(back), "float", "kind of " .. s)
    T.ok(back == v, string.format("%.17g -> %s -> %.17g", v, s, back))
  end
  T.eq(json.encode(0.1), "0.1") -- shortest form, not 0.10000000000000001
  local ints = {0, 1, -1, 1 << 53, math.maxinteger, math.mininteger, 9007199254740993,
                1234567890123456789}
  for _, v in ipairs(ints) do
    local back = json.decode(json.encode(v))
    T.eq(math.type(back), "integer", "kind of " .. tostring(v))
    T.eq(back, v)
  end
  -- beyond 64 bits: a float, not a wrapped integer
  local huge = json.decode("123456789012345678901234567890")
  T.eq(math.type(huge), "float")
  T.near(huge, 1.2345678901234568e29, 1e-15)
  T.eq(math.type(json.decode("1.0")), "float")
  T.eq(math.type(json.decode("1e2")), "float")
  T.eq(math.type(json.decode("-7")), "integer")
  -- number tokens are matched to values in text order: digits inside strings
  -- and keys (with escaped quotes) must not shift that match
  local v = json.decode('{"k\\"9": "8\\\\", "a1": [3, "4\\"5", 9007199254740993, -0.0, 6], "z": 7e0}')
  T.eq(v['k"9'], "8\\")
  T.eq(v.a1[1], 3); T.eq(math.type(v.a1[1]), "integer")
  T.eq(v.a1[2], '4"5')
  T.eq(v.a1[3], 9007199254740993)
  T.eq(math.type(v.a1[4]), "float"); T.eq(1 / v.a1[4], -math.huge)
  T.eq(v.a1[5], 6); T.eq(math.type(v.a1[5]), "integer")
  T.eq(v.z, 7.0); T.eq(math.type(v.z), "float")
end)

T.case("nested round trip", function()
  local v = {
    name = "run", steps = 300, lr = 1e-3, ok = true,
    losses = {10.5, 9.25, 1 / 3, 0.1},
    layers = {{value_cos = 0.123456789012345, self_attn = 1e-300}, {value_cos = -0.5}},
    empty_obj = {}, empty_arr = json.array({}),
    deep = {a = {b = {c = {d = {1, 2, {3, {4}}}}}}},
    strs = {"a", "q", ""},
  }
  local s = json.encode(v)
  local back = json.decode(s)
  T.ok(same(back, v), "round trip of " .. s)
  -- decoded arrays keep their kind, so empty arrays survive a second trip
  T.eq(json.encode(back), s)
  T.eq(json.encode(json.decode("[]")), "[]")
  T.eq(json.encode({}), "{}")
  T.eq(json.encode(json.array()), "[]")
  -- null inside arrays keeps positions
  local a = json.decode("[1,null,3]")
  T.eq(#a, 3); T.eq(a[2], json.null); T.eq(json.encode(a), "[1,null,3]")
end)

T.case("deterministic sorted keys", function()
  local a, b = {}, {}
  local keys = {"zeta", "alpha", "mid", "Beta", "a", "aa", "b"}
  for i, k in ipairs(keys) do a[k] = i end
  for i = #keys, 1, -1 do b[keys[i]] = i end
  T.eq(json.encode(a), json.encode(b))
  T.eq(json.encode(a), '{"Beta":4,"a":5,"aa":6,"alpha":2,"b":7,"mid":3,"zeta":1}')
  T.eq(json.encode({b = {y = 1, x = 2}, a = 1}), '{"a":1,"b":{"x":2,"y":1}}')
end)

T.case("indent", function()
  local s = json.encode({a = {1, 2}, b = "x"}, {indent = true})
  T.ok(s:find("\n"), "indented output has newlines")
  T.ok(same(json.decode(s), {a = {1, 2}, b = "x"}))
  T.ok(not json.encode({a = 1}, {indent = false}):find("\n"))
  T.eq(json.encode({b = {1, 2.5}, a = {x = 'q"\n', e = {}}}, {indent = true}),
       '{\n  "a": {\n    "e": {},\n    "x": "q\\"\\n"\n  },\n  "b": [1, 2.5]\n}')
  local weird = {}
  for c = 1, 127 do weird[#weird + 1] = string.char(c) end
  weird = table.concat(weird) .. "é€"
  T.eq(json.decode(json.encode({s = weird}, {indent = true})).s, weird)
  T.eq(json.decode(json.encode({s = weird})).s, weird)
end)

T.case("encode errors name the path", function()
  T.raises(function() json.encode({a = {b = {0 / 0}}}) end, "NaN (JSON has no NaN) at value.a.b[1]")
  T.raises(function() json.encode({x = math.huge}) end, "infinity (JSON has no infinity) at value.x")
  T.raises(function() json.encode({-math.huge}) end, "infinity")
  T.raises(function() json.encode({1, 2, a = 3}) end, "mixing integer and string keys at value")
  T.raises(function() json.encode({[1] = 1, [3] = 3}) end, "sparse array (2 values, largest key 3)")
  T.raises(function() json.encode({l = {[0] = 1}}) end, "integer key 0 (arrays use keys 1..n) at value.l")
  T.raises(function() json.encode({[1.5] = 1}) end, "table key of type float")
  T.raises(function() json.encode({[true] = 1}) end, "table key of type boolean")
  local cyc = {a = {}}
  cyc.a.back = cyc
  T.raises(function() json.encode(cyc) end, "cycle (a table contains itself) at value.a.back")
  T.raises(function() json.encode({f = print}) end, "value of type function")
  T.raises(function() json.encode({s = "a\0b"}) end, "string containing a NUL byte at value.s")
  T.raises(function() json.encode(json.array({x = 1})) end, "marked as an array with string keys")
  local deep = {}
  local cur = deep
  for _ = 1, 1100 do cur.n = {}; cur = cur.n end
  T.raises(function() json.encode(deep) end, "nesting deeper than 1000 levels")
  -- shared (non-cyclic) subtables are fine
  local shared = {1, 2}
  T.eq(json.encode({a = shared, b = shared}), '{"a":[1,2],"b":[1,2]}')
end)

T.case("decode errors with position", function()
  T.raises(function() json.decode('{"a": [1, 2,, 3]}') end, "invalid JSON at line 1 column 13 (byte 12)")
  T.raises(function() json.decode('{\n  "a": tru\n}') end, "invalid JSON at line 2")
  T.raises(function() json.decode("") end, "unexpected end of text")
  T.raises(function() json.decode('{"a": 1} trailing') end, "invalid JSON")
  T.raises(function() json.decode("[1, 2") end, "invalid JSON")
  T.raises(function() json.decode("NaN") end, "invalid JSON")
  T.raises(function() json.decode(string.rep("[", 1200) .. string.rep("]", 1200)) end, "invalid JSON")
  T.raises(function() json.decode() end, "bad argument #1")
end)

T.case("decode never crashes on mutated text", function()
  local good = json.encode({a = {1, -2.5e-3, "x\\\"y", true, json.null}, b = {c = 12345678901234, d = ""}})
  local alphabet = '{}[],:"0123456789-+.eE \\nul'
  math.randomseed(5)
  local loaded, refused = 0, 0
  for _ = 1, 2000 do
    local s = good
    for _ = 1, math.random(1, 3) do
      local at = math.random(1, #s)
      local c = math.random(1, 3) == 1 and string.char(math.random(0, 255))
        or alphabet:sub(math.random(1, #alphabet), math.random(1, #alphabet))
      s = s:sub(1, at - 1) .. c .. s:sub(at + 1)
    end
    local ok, v = pcall(json.decode, s)
    if ok then
      loaded = loaded + 1
      -- whatever decodes re-encodes (decode refuses inf and NUL, which encode cannot carry)
      local ok2, e2 = pcall(json.encode, v)
      T.ok(ok2, tostring(e2))
    else
      refused = refused + 1
      T.ok(tostring(v):find("invalid JSON", 1, true) or tostring(v):find("out of range", 1, true), tostring(v))
    end
  end
  T.ok(loaded > 50 and refused > 500, string.format("%d loaded, %d refused", loaded, refused))
end)

T.case("json files", function()
  local p = tmp("a.json")
  local v = {model = {n_layer = 2, lambda = 0.5}, curve = {3.25, 2.5, 1 / 7}}
  T.eq(json.write_file(p, v), true)
  local back = json.read_file(p)
  T.ok(same(back, v))
  local text = xsa.read_file(p)
  T.ok(text:sub(-1) == "\n", "ends with a newline")
  -- missing file: nil, message
  local r, msg = json.read_file(tmp("missing.json"))
  T.eq(r, nil)
  T.ok(msg:find("No such file or directory", 1, true), msg)
  -- corrupt JSON: nil, "PATH: invalid JSON at ..."
  local bad = tmp("bad.json")
  xsa.write_file_atomic(bad, '{"a": 1,\n "b": }')
  r, msg = json.read_file(bad)
  T.eq(r, nil)
  T.ok(msg:find(bad .. ": invalid JSON at line 2", 1, true), msg)
  -- encode errors raise and leave the old file alone
  T.raises(function() json.write_file(p, {x = 0 / 0}) end, "NaN")
  T.ok(same(json.read_file(p), v))
  T.raises(function() json.write_file(base .. "-no/such/dir/x.json", {}) end, "No such file or directory")
end)

T.case("read_file / write_file_atomic", function()
  local p = tmp("raw.bin")
  local data = "binary\0data\255\n" .. string.rep("x", 100000)
  T.eq(xsa.write_file_atomic(p, data), true)
  T.eq(xsa.read_file(p), data)
  T.eq(xsa.write_file_atomic(p, ""), true)
  T.eq(xsa.read_file(p), "")
  local r, msg = xsa.read_file(tmp("nothing"))
  T.eq(r, nil)
  T.ok(msg:find("nothing: No such file or directory", 1, true), msg)
  T.raises(function() xsa.write_file_atomic(base .. "-nodir/x", "a") end, "No such file or directory")
  T.raises(function() xsa.write_file_atomic(p) end, "bad argument #2")
  -- no temporary files left next to the targets
  local ls = io.popen("ls " .. base .. "-* 2>/dev/null")
  local listing = ls:read("a"); ls:close()
  T.ok(not listing:find(".tmp.", 1, true), "stray temporary: " .. listing)
end)

cleanup()
T.done()
