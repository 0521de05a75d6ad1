-- gen_corpus.lua: writes the seed corpora of tests/fuzz/corpus/<harness>/
-- (small valid and near-valid inputs; the safetensors files and the token
-- cache are made by the engine itself). Run from the checkout root:
--   XSA_DATA=/path/to/data LUA_PATH='lua/?.lua;;' ./xsa tests/fuzz/gen_corpus.lua
-- Regression inputs found by fuzzing are added by hand (named crash-*) and
-- are not touched here.
local xsa = require "xsa"

local root = "tests/fuzz/corpus/"
local function put(harness, name, bytes)
  os.execute("mkdir -p " .. root .. harness)
  local f = assert(io.open(root .. harness .. "/" .. name, "wb"))
  f:write(bytes)
  f:close()
end
local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end
local function u64(v) return string.pack("<I8", v) end

-- fuzz_bpe: texts
local texts = {
  ascii = "Hello world! It's a test, isn't it? We'll see: 1234 + 5.6e7 = ?",
  story = "Once upon a time, there was a little girl named Lily.\n<|endoftext|>\nTom said, \"Hi!\"",
  unicode = "caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 \xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7 \xe2\x85\xa7\xc2\xbd",
  spaces = "a  b\t\tc \n\n\n   d\xc2\xa0\xe3\x80\x80e\r\n \xe2\x80\xa8",
  contractions = "'s't're've'm'll'd 'S 'RE x'y ''s",
  invalid = "ok \xff\xfe \xc3 \xe2\x82 \xed\xa0\x80 \xf4\x90\x80\x80 \xc0\xaf end\xe2",
  special = "<|endoftext|><|endoftext|>a<|endoftext|<|endoftext|>",
  long_word = string.rep("ab", 100) .. " " .. string.rep("x", 300),
}
for name, t in pairs(texts) do put("fuzz_bpe", name, t) end

-- fuzz_bpe_files: a tiny tokenizer (256 bytes + merges + <|endoftext|>),
-- GPT-2's byte alphabet, split by 0xFF from vocab.bpe and a text.
local function bytes_to_unicode()
  local bs, cs, n = {}, {}, 0
  for b = 0, 255 do
    if (b >= 33 and b <= 126) or (b >= 161 and b <= 172) or (b >= 174 and b <= 255) then
      cs[b] = b
    else
      cs[b] = 256 + n
      n = n + 1
    end
  end
  return cs
end
local cs = bytes_to_unicode()
local function sym(s)
  local o = {}
  for i = 1, #s do o[#o + 1] = utf8.char(cs[s:byte(i)]) end
  return table.concat(o)
end
local merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}, {" w", "o"}}
local enc, id = {}, 0
local function add(tokstr)
  enc[#enc + 1] = xsa.json.encode(tokstr) .. ":" .. id
  id = id + 1
end
for b = 0, 255 do add(sym(string.char(b))) end
local vlines = {"#version: 0.2"}
for _, m in ipairs(merges) do
  add(sym(m[1] .. m[2]))
  vlines[#vlines + 1] = sym(m[1]) .. " " .. sym(m[2])
end
add("<|endoftext|>")
local encoder = "{" .. table.concat(enc, ", ") .. "}"
local vocab = table.concat(vlines, "\n") .. "\n"
put("fuzz_bpe_files", "tiny", encoder .. "\xff" .. vocab .. "\xffhello world<|endoftext|> hello")
put("fuzz_bpe_files", "tiny_notext", encoder .. "\xff" .. vocab)
put("fuzz_bpe_files", "bad_merge", encoder .. "\xff" .. vocab .. sym("x") .. " " .. sym("y") .. "\n")
put("fuzz_bpe_files", "missing_merge", encoder .. "\xff#version: 0.2\n" .. sym("h") .. " " .. sym("e") .. "\n")
put("fuzz_bpe_files", "dup_id", encoder:gsub('"<|endoftext|>":262', '"<|endoftext|>":0') .. "\xff" .. vocab)
put("fuzz_bpe_files", "empty", "\xff")

-- fuzz_safetensors: files written by the engine, and damaged copies
local tmp = os.tmpname()
local function st(name, tensors, meta)
  xsa.safetensors.save(tmp, tensors, meta)
  local s = slurp(tmp)
  put("fuzz_safetensors", name, s)
  return s
end
local full = st("mixed", {
  w = xsa.tensor{{1.5, -2}, {0.25, 3}},
  ids = xsa.tensor({7, 8, 9}, "int32"),
  s = xsa.tensor(3.25),
  e = xsa.zeros({0, 4}),
}, {step = "12", note = "caf\xc3\xa9"})
st("empty", {})
st("meta_only", {}, {a = "b"})
put("fuzz_safetensors", "truncated", full:sub(1, #full - 5))
put("fuzz_safetensors", "short", full:sub(1, 6))
local hdr = '{"a":{"dtype":"F16","shape":[1],"data_offsets":[0,2]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
put("fuzz_safetensors", "bad_dtype_overlap", u64(#hdr) .. hdr .. string.rep("\0", 8))
os.remove(tmp)

-- fuzz_token_cache: mode byte 0x03 (take the source and tokenizer from the
-- image, fix the checksum) then a cache the engine wrote for a tiny source
local tok = xsa.tokenizer.gpt2()
local src, cache = os.tmpname(), os.tmpname()
os.remove(cache)
local f = assert(io.open(src, "wb"))
f:write("Once upon a time.\n<|endoftext|>\nThe end \xf0\x9f\x98\x80\n")
f:close()
xsa._data.story_tokens(tok, src, cache)
local img = slurp(cache)
os.remove(src)
os.remove(cache)
put("fuzz_token_cache", "valid", "\x03" .. img)
put("fuzz_token_cache", "valid_small_vocab", "\x07" .. img)
put("fuzz_token_cache", "stale", "\x00" .. img)
put("fuzz_token_cache", "truncated", "\x03" .. img:sub(1, #img - 1))
put("fuzz_token_cache", "header_only", "\x03" .. img:sub(1, 40) .. u64(0) .. img:sub(49, 64))

-- fuzz_json: configs, results, edge numbers and strings
local jsons = {
  config = '{"model":{"n_layer":2,"n_head":4,"d_model":64,"attention":"xsa"},"lr":3e-4,"steps":300,"seed":1}',
  results = '{"runs":[{"name":"sa","loss":[4.5,3.25,2.125]},{"name":"xsa","loss":[]}],"ok":true,"note":null}',
  numbers = '[0,-0,-0.0,1e400,-1e-400,9223372036854775807,9223372036854775808,-9223372036854775808,1.5E+3,0.1,123456789012345678]',
  strings = '["caf\\u00e9","\\ud83d\\ude00","tab\\t\\"q\\"\\\\","\\u0000x","\xe6\x97\xa5",""]',
  nested = string.rep("[", 40) .. "{}" .. string.rep("]", 40),
  pretty = '{\n  "a": [1, 2, 3],\n  "b": {\n    "c": "d"\n  }\n}\n',
  dup = '{"a":1,"a":[2],"b":{"x":1.0,"x":2}}',
  bad = '{"a":[1,2,}',
}
for name, j in pairs(jsons) do put("fuzz_json", name, j) end

-- fuzz_lua_api: programs of calls (an op byte, an argument count byte, one
-- pool-index byte per argument; see the harness): every op with 0, 1 and 2
-- arguments, and a few random programs from fixed seeds
local function prog(t) local b = {} for i, v in ipairs(t) do b[i] = string.char(v % 256) end return table.concat(b) end
local every0, every1, every2 = {}, {}, {}
for op = 0, 255 do
  every0[#every0 + 1] = op; every0[#every0 + 1] = 0
  for _, v in ipairs{op, 1, op * 7} do every1[#every1 + 1] = v end
  for _, v in ipairs{op, 2, op * 5 + 1, op * 11 + 3} do every2[#every2 + 1] = v end
end
put("fuzz_lua_api", "every_op_0_args", prog(every0))
put("fuzz_lua_api", "every_op_1_arg", prog(every1))
put("fuzz_lua_api", "every_op_2_args", prog(every2))
for seed = 1, 6 do
  math.randomseed(seed)
  local t = {}
  for i = 1, 120 do t[i] = math.random(0, 255) end
  put("fuzz_lua_api", "random_" .. seed, prog(t))
end
print("seed corpora written under " .. root)
