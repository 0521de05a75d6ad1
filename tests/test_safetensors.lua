-- test_safetensors.lua: xsa.safetensors.load/save from Lua. Files are
-- crafted byte by byte (string.pack) and saved files are taken apart the same
-- way, so the checks are bit-exact and independent of the tensor API.
local T = require "testing"
local xsa = require "xsa"
local json = xsa.json

local tmp, cleanup, base = T.tmp_paths("st-test")

-- $XSA_GOLDEN, else the fixtures of this checkout (a missing file fails below)
local function golden_dir()
  local env = os.getenv("XSA_GOLDEN")
  if env and env ~= "" then return env end
  return (os.getenv("XSA_ROOT") or ".") .. "/tests/fixtures/golden"
end

-- A safetensors file from a header table and the raw data bytes.
local function craft(path, header, data, pad)
  local h = json.encode(header) .. string.rep(" ", pad or 0)
  xsa.write_file_atomic(path, string.pack("<I8", #h) .. h .. (data or ""))
end

-- header table, data bytes of a file written by xsa
local function take_apart(path)
  local s = assert(xsa.read_file(path))
  local n = string.unpack("<I8", s)
  return json.decode(s:sub(9, 8 + n)), s:sub(9 + n), n, s:sub(9, 8 + n)
end

local function f32s(...) return string.pack("<" .. string.rep("I4", select("#", ...)), ...) end
local function i32s(...) return string.pack("<" .. string.rep("i4", select("#", ...)), ...) end

-- bit patterns: 1.0, -0.0, NaN with payload, +inf, a denormal, 0.1f
local W = f32s(0x3f800000, 0x80000000, 0x7fc01234, 0x7f800000, 0x00000001, 0x3dcccccd)
local IDS = i32s(-0x80000000, -1, 0, 1, 0x7fffffff)

local function sample(path)
  craft(path, {
    __metadata__ = {vocab = "64", attention = "xsa"},
    w = {dtype = "F32", shape = {2, 3}, data_offsets = {0, 24}},
    ids = {dtype = "I32", shape = {5}, data_offsets = {24, 44}},
    s = {dtype = "F32", shape = json.array(), data_offsets = {44, 48}},
    e = {dtype = "F32", shape = {0, 4}, data_offsets = {48, 48}},
  }, W .. IDS .. f32s(0x40490fdb), 4)
end

T.case("load", function()
  local p = tmp("a.safetensors")
  sample(p)
  local ts, meta, names = xsa.safetensors.load(p)
  T.eq(type(ts.w), "userdata"); T.eq(type(ts.ids), "userdata")
  T.eq(type(ts.s), "userdata"); T.eq(type(ts.e), "userdata")
  T.eq(meta.vocab, "64"); T.eq(meta.attention, "xsa")
  -- names in file order: json.encode sorted the keys
  T.eq(table.concat(names, ","), "e,ids,s,w")
  local n = 0
  for _ in pairs(ts) do n = n + 1 end
  T.eq(n, 4)
end)

T.case("save a map: sorted names, exact bytes, metadata", function()
  local src = tmp("b.safetensors")
  sample(src)
  local ts = xsa.safetensors.load(src)
  local out = tmp("c.safetensors")
  xsa.safetensors.save(out, {w = ts.w, ids = ts.ids, s = ts.s, e = ts.e},
                       {lr = 0.1, steps = 300, note = "é \"q\""})
  local h, data, hlen, raw = take_apart(out)
  T.eq((8 + hlen) % 8, 0, "data section aligned to 8")
  T.ok(raw:find("^{\"__metadata__\""), "metadata first: " .. raw)
  -- sorted names: e, ids, s, w laid out in that order
  T.ok(raw:find('"e".*"ids".*"s".*"w"'), "sorted: " .. raw)
  T.eq(h.__metadata__.lr, "0.1")  -- shortest text that reads back exactly
  T.eq(h.__metadata__.steps, "300")
  T.eq(h.__metadata__.note, "é \"q\"")
  T.eq(h.e.data_offsets[1], 0); T.eq(h.e.data_offsets[2], 0)
  T.eq(h.ids.dtype, "I32"); T.eq(h.ids.data_offsets[1], 0); T.eq(h.ids.data_offsets[2], 20)
  T.eq(h.s.dtype, "F32"); T.eq(#h.s.shape, 0); T.eq(h.s.data_offsets[2], 24)
  T.eq(h.w.shape[1], 2); T.eq(h.w.shape[2], 3); T.eq(h.w.data_offsets[2], 48)
  T.eq(#data, 48)
  T.ok(data == IDS .. f32s(0x40490fdb) .. W, "bit-exact data")
  -- and back
  local ts2, meta2 = xsa.safetensors.load(out)
  T.eq(meta2.steps, "300")
  xsa.safetensors.save(tmp("d.safetensors"), ts2)
  local _, data2 = take_apart(tmp("d.safetensors"))
  T.ok(data2 == data, "second round trip bit-exact")
end)

T.case("save a list: given order, both entry forms", function()
  local src = tmp("e.safetensors")
  sample(src)
  local ts = xsa.safetensors.load(src)
  local out = tmp("f.safetensors")
  xsa.safetensors.save(out, {{"z.w", ts.w}, {name = "a.ids", tensor = ts.ids}})
  local h, data, _, raw = take_apart(out)
  T.ok(raw:find('^{"z.w".*"a.ids"'), "list order kept: " .. raw)
  T.eq(h.__metadata__, nil)
  T.ok(data == W .. IDS, "bytes in list order")
  local _, _, names = xsa.safetensors.load(out)
  T.eq(names[1], "z.w"); T.eq(names[2], "a.ids")
end)

-- element-wise bit equality through totable (NaN-safe: compares the packed bits)
local function bits(t)
  local out = {}
  local function walk(v)
    if type(v) == "table" then for _, x in ipairs(v) do walk(x) end
    elseif math.type(v) == "integer" then out[#out + 1] = string.pack("<i4", v)
    else out[#out + 1] = string.pack("<f", v) end
  end
  walk(t:totable())
  return table.concat(out)
end

T.case("tensors from Lua: views, int32, metadata, bit-exact", function()
  xsa.manual_seed(11)
  local a = xsa.randn(3, 4)
  a:set(1, 1, 0 / 0) -- a NaN must survive too
  local at = a:transpose(1, 2)          -- [4,3], strided
  local an = a:narrow(2, 2, 2)          -- [3,2], offset and strided
  local ids = xsa.tensor({{-2147483648, -1, 0}, {1, 7, 2147483647}}, "int32")
  local idt = ids:transpose(1, 2)
  T.eq(at:is_contiguous(), false); T.eq(an:is_contiguous(), false)
  local p = tmp("views.safetensors")
  xsa.safetensors.save(p, {a = a, at = at, an = an, ids = ids, idt = idt},
                       {lambda = 0.5, seed = 7, attention = "xsa"})
  local ts, meta, names = xsa.safetensors.load(p)
  T.eq(table.concat(names, ","), "a,an,at,ids,idt")
  T.eq(meta.lambda, "0.5"); T.eq(meta.seed, "7"); T.eq(meta.attention, "xsa")
  for _, n in ipairs(names) do
    T.ok(ts[n]:is_contiguous(), n .. " contiguous")
  end
  T.eq(table.concat(ts.at:shape(), ","), "4,3")
  T.eq(table.concat(ts.an:shape(), ","), "3,2")
  T.eq(ts.ids:dtype(), "int32"); T.eq(ts.idt:dtype(), "int32")
  T.eq(ts.a:dtype(), "float32")
  T.ok(bits(ts.a) == bits(a), "a bit-exact")
  T.ok(bits(ts.at) == bits(at), "transposed view bit-exact")
  T.ok(bits(ts.an) == bits(an), "narrowed view bit-exact")
  T.ok(ts.ids:equal(ids) and ts.idt:equal(idt), "int32 exact")
  T.eq(ts.idt:get(3, 2), 2147483647)
  -- the file's bytes are the row-major layout of the view
  local h, data = take_apart(p)
  local at0 = h.at.data_offsets[1]
  T.ok(data:sub(at0 + 1, at0 + 48) == bits(at), "row-major bytes of the transposed view")
  -- a freed tensor is refused by name
  local f = xsa.randn(2)
  f:free()
  T.raises(function() xsa.safetensors.save(tmp("x.safetensors"), {f = f}) end, "attempt to use a freed tensor")
end)

T.case("load errors", function()
  local p = tmp("bad.safetensors")
  T.raises(function() xsa.safetensors.load(tmp("nothing.safetensors")) end,
           "nothing.safetensors: No such file or directory")
  xsa.write_file_atomic(p, "abc")
  T.raises(function() xsa.safetensors.load(p) end, p .. ": file is 3 bytes, shorter than")
  xsa.write_file_atomic(p, string.pack("<I8", 1 << 50) .. "{}")
  T.raises(function() xsa.safetensors.load(p) end, "is absurd")
  xsa.write_file_atomic(p, string.pack("<I8", 500) .. "{}")
  T.raises(function() xsa.safetensors.load(p) end, "is larger than the 2 bytes")
  xsa.write_file_atomic(p, string.pack("<I8", 5) .. "{\"a\":")
  T.raises(function() xsa.safetensors.load(p) end, "invalid JSON in the header")
  craft(p, {x = {dtype = "BF16", shape = {2}, data_offsets = {0, 4}}}, "abcd")
  T.raises(function() xsa.safetensors.load(p) end, p .. ": tensor 'x' has dtype BF16, which xsa does not support")
  craft(p, {a = {dtype = "F32", shape = {2}, data_offsets = {0, 8}},
            b = {dtype = "F32", shape = {2}, data_offsets = {4, 12}}}, string.rep("\0", 12))
  T.raises(function() xsa.safetensors.load(p) end, "tensors 'a' and 'b' overlap")
  craft(p, {a = {dtype = "F32", shape = {3}, data_offsets = {0, 8}}}, string.rep("\0", 8))
  T.raises(function() xsa.safetensors.load(p) end, "has shape [3] (12 bytes as F32) but data_offsets [0,8] span 8 bytes")
  craft(p, {a = {dtype = "F32", shape = {4}, data_offsets = {0, 16}}}, string.rep("\0", 10))
  T.raises(function() xsa.safetensors.load(p) end, "outside the data section of 10 bytes")
  craft(p, {a = {dtype = "F32", shape = {-2}, data_offsets = {0, 8}}}, string.rep("\0", 8))
  T.raises(function() xsa.safetensors.load(p) end, "not a non-negative integer")
  craft(p, {__metadata__ = {k = 5}})
  T.raises(function() xsa.safetensors.load(p) end, "__metadata__ value 'k' is a number, not a string")
  T.raises(function() xsa.safetensors.load() end, "bad argument #1")
end)

T.case("save errors leave the old file", function()
  local src = tmp("g.safetensors")
  sample(src)
  local ts = xsa.safetensors.load(src)
  local out = tmp("h.safetensors")
  xsa.safetensors.save(out, {w = ts.w})
  local before = xsa.read_file(out)
  T.raises(function() xsa.safetensors.save(out, {{"x", ts.w}, {"x", ts.ids}}) end,
           "duplicate tensor name 'x'")
  T.raises(function() xsa.safetensors.save(out, {w = 3}) end, "'w' is a number, not a tensor")
  T.raises(function() xsa.safetensors.save(out, {w = ts.w}, {flag = true}) end,
           "metadata 'flag' is a boolean (values must be strings or numbers)")
  T.raises(function() xsa.safetensors.save(out, {w = ts.w}, {[1] = "x"}) end, "metadata keys must be strings")
  T.raises(function() xsa.safetensors.save(out, {[true] = ts.w}) end, "keys must be strings")
  T.raises(function() xsa.safetensors.save(out, {{"x"}}) end, "'x' has no tensor")
  T.raises(function() xsa.safetensors.save(out, {{ts.w}}) end, "entry 1 has no string name")
  T.raises(function() xsa.safetensors.save(out, {ts.w}) end, "entry 1 is a userdata")
  T.raises(function() xsa.safetensors.save(out, {__metadata__ = ts.w}) end, "cannot be a tensor name")
  T.raises(function() xsa.safetensors.save(out) end, "bad argument #2")
  T.raises(function() xsa.safetensors.save(base .. "-no/dir/x.safetensors", {w = ts.w}) end,
           "No such file or directory")
  T.eq(xsa.read_file(out), before, "file unchanged")
  local ls = io.popen("ls " .. base .. "-* 2>/dev/null")
  local listing = ls:read("a"); ls:close()
  T.ok(not listing:find(".tmp.", 1, true), "stray temporary: " .. listing)
end)

T.case("golden files", function()
  local g = golden_dir()
  local cases = {tiny = {64, 16, 2}, odd = {97, 24, 3}, spec_init = {50, 32, 2}}
  for name, c in pairs(cases) do
    local p = g .. "/" .. name .. "/model.safetensors"
    local ts, meta, names = xsa.safetensors.load(p)
    T.eq(meta.vocab, tostring(c[1]), name .. " vocab")
    T.eq(meta.n_layer, tostring(c[3]), name .. " n_layer")
    T.eq(meta.d_model, tostring(c[2]), name .. " d_model")
    T.ok(ts["wte.weight"] and ts["wpe.weight"] and ts["h.0.attn.c_attn.weight"], name .. " names")
    T.eq(#names, 4 + 12 * c[3], name .. " tensor count")
    -- re-saved in file order: the data section is byte-identical
    local list = {}
    for i, n in ipairs(names) do list[i] = {n, ts[n]} end
    local out = tmp(name .. ".safetensors")
    xsa.safetensors.save(out, list, meta)
    local _, data = take_apart(out)
    local _, gdata = take_apart(p)
    T.ok(data == gdata, name .. ": data section identical to the reference file's")
    local b = xsa.safetensors.load(g .. "/" .. name .. "/batch.safetensors")
    T.ok(b.inputs and b.targets, name .. " batch")
  end
end)

cleanup()
T.done()
