-- xsa.tokenizer from Lua: the API, tiktoken's ids (committed fixtures from
-- tests/fixtures/gen_tiktoken.mjs), round trips, invalid UTF-8, errors, and
-- scripts/tokenize.lua as a user runs it.
local T = require "testing"
local xsa = require "xsa"

local root = os.getenv("XSA_ROOT") or "."
local fixdir = root .. "/tests/fixtures/tiktoken/"

local readfile, writefile = T.readfile, T.writefile

local function same(a, b, what)
  T.eq(#a, #b, (what or "") .. " length")
  for i = 1, #a do
    if a[i] ~= b[i] then T.eq(a[i], b[i], string.format("%s id %d", what or "", i)) end
  end
end

local function unhex(h)
  return (h:gsub("..", function(x) return string.char(tonumber(x, 16)) end))
end

local tok = xsa.tokenizer.gpt2()

T.case("gpt2() loads the GPT-2 vocabulary once", function()
  T.eq(tok:vocab_size(), 50257)
  T.eq(tok:eot(), 50256)
  T.eq(xsa.tokenizer.gpt2(), tok, "same object on the second call")
  T.ok(tostring(tok):find("50257 tokens"), tostring(tok))
  T.eq(#tok:identity(), 16)
end)

T.case("encode gives an int32 tensor; encode_table a table", function()
  local ids = tok:encode("Hello world")
  T.eq(ids:dtype(), "int32")
  T.eq(ids:dim(), 1)
  local t = ids:totable()
  same(t, {15496, 995}, "Hello world")
  same(tok:encode_table("Hello world"), {15496, 995}, "encode_table")
  same(tok:encode("Hello world", {table = true}), {15496, 995}, "table option")
  T.eq(tok:count("Hello world"), 2)
  T.eq(tok:encode(""):numel(), 0)
  same(tok:encode_table(""), {}, "empty")
end)

T.case("<|endoftext|> is special only when allowed", function()
  local plain = tok:encode_table("a<|endoftext|>b")
  T.ok(#plain > 3, "ordinary text: several tokens")
  for _, id in ipairs(plain) do T.ok(id ~= 50256, "no special id without special=true") end
  same(tok:encode_table("a<|endoftext|>b", {special = true}), {64, 50256, 65}, "special")
  same(tok:encode("<|endoftext|>", {special = true}):totable(), {50256}, "tensor special")
end)

T.case("token(id) gives the bytes of one token", function()
  T.eq(tok:token(50256), "<|endoftext|>")
  T.eq(tok:token(220), " ")
  T.eq(tok:token(198), "\n")
  T.eq(tok:token(15496), "Hello")
  T.eq(tok:token(0), "!")
  T.raises(function() tok:token(50257) end, "out of range")
  T.raises(function() tok:token(-1) end, "out of range")
end)

T.case("decode takes tensors and tables, checks ids", function()
  local s = "It's 3:00 \u{1F600} caf\u{E9}\r\n\tdone.  "
  local ids = tok:encode(s)
  T.eq(tok:decode(ids), s)
  T.eq(tok:decode(ids:totable()), s)
  T.eq(tok:decode({}), "")
  T.raises(function() tok:decode({15496, 50257}) end, "decode: id 50257 at position 2 is out of range")
  T.raises(function() tok:decode({1.5}) end, "not an integer id")
  T.raises(function() tok:decode("hello") end, "int32 tensor or a table")
  T.raises(function() tok:decode(xsa.zeros({3})) end, "int32 tensor or a table")
  T.raises(function() tok:encode(nil) end, "bad argument")
  T.raises(function() tok:encode("x", 5) end, "bad argument")
end)

T.case("invalid UTF-8 is repaired to U+FFFD as Python's errors='replace'", function()
  local fffd = "\u{FFFD}"
  same(tok:encode_table("\xff"), tok:encode_table(fffd), "lone 0xff")
  same(tok:encode_table("a\xe2\x82b"), tok:encode_table("a" .. fffd .. "b"), "truncated: one U+FFFD")
  same(tok:encode_table("\xed\xa0\x80"), tok:encode_table(fffd:rep(3)), "surrogate: one per byte")
  T.eq(tok:decode(tok:encode("x\xc0\xafy")), "x" .. fffd .. fffd .. "y")
  -- random bytes never crash and decode to valid UTF-8 that re-encodes identically
  local seed = 12345
  local function rnd(n)
    seed = (seed * 1103515245 + 12345) % 2147483648
    return seed % n
  end
  for _ = 1, 200 do
    local b = {}
    for i = 1, rnd(40) + 1 do b[i] = string.char(rnd(256)) end
    local s = table.concat(b)
    local ids = tok:encode_table(s)
    local back = tok:decode(ids)
    T.ok(utf8.len(back) ~= nil, "decoded text is valid UTF-8")
    same(tok:encode_table(back), ids, "re-encoding")
    if utf8.len(s) then T.eq(back, s, "valid input round trips") end
  end
end)

T.case("tiktoken's ids for the tricky corpus (fixture)", function()
  if not (xsa.json and xsa.json.read_file) then return end
  local fx = xsa.json.read_file(fixdir .. "cases.json")
  T.ok(#fx.cases > 500, "corpus size")
  local bad = 0
  for _, c in ipairs(fx.cases) do
    local ids = tok:encode_table(unhex(c.hex), {special = c.special})
    local ok = #ids == #c.ids
    for i = 1, #ids do ok = ok and ids[i] == c.ids[i] end
    if not ok then
      bad = bad + 1
      io.stdout:write("  differs from tiktoken: ", c.name, "\n")
    end
  end
  T.eq(bad, 0, "cases differing from tiktoken")
end)

-- the TinyStories slices and their tiktoken ids
local slices = {}
for name in readfile(fixdir .. "tinystories_slices.json"):gmatch('"file": "([^"]+)"') do
  local off, len = name:match("tinystories_(%d+)_(%d+)%.ids")
  slices[#slices + 1] = {file = name, offset = tonumber(off), length = tonumber(len)}
end
local ts_path = xsa.data.find(xsa.data.TEXT_NAMES)

T.case("tiktoken's ids for TinyStories slices", function()
  T.ok(#slices >= 3, "slices listed")
  T.ok(ts_path, "TinyStories text found")
  local text = assert(xsa.data.read_text(ts_path))
  for _, s in ipairs(slices) do
    local want = {}
    for w in readfile(fixdir .. s.file):gmatch("%d+") do want[#want + 1] = tonumber(w) end
    local piece = text:sub(s.offset + 1, s.offset + s.length)
    local ids = tok:encode(piece)
    same(ids:totable(), want, s.file)
    T.eq(tok:decode(ids), piece, "decode " .. s.file)
  end
end)

-- scripts/tokenize.lua, run as a user would
local exe = os.getenv("XSA_EXE")
if exe and not exe:find("^/") then exe = root .. "/" .. exe end
exe = exe or arg[-1]
local script = root .. "/scripts/tokenize.lua"
local tmp = os.tmpname()

local function run(args)
  local p = assert(io.popen(exe .. " " .. script .. " " .. args .. " 2>&1", "r"))
  local out = p:read("a")
  local ok, how, code = p:close()
  return out, how == "exit" and code or 128
end

T.case("scripts/tokenize.lua prints tiktoken's ids one per line", function()
  local s = slices[1]
  local text = assert(xsa.data.read_text(ts_path)):sub(s.offset + 1, s.offset + s.length)
  writefile(tmp, text)
  local out, code = run(tmp)
  T.eq(code, 0, "exit status")
  T.eq(out, readfile(fixdir .. s.file), "same bytes as the fixture")
  writefile(tmp .. ".ids", out)
  local back, code2 = run("--decode " .. tmp .. ".ids")
  T.eq(code2, 0)
  T.eq(back, text, "--decode gives the text back")
  os.remove(tmp .. ".ids")
end)

T.case("scripts/tokenize.lua --special and errors", function()
  writefile(tmp, "The end.\n<|endoftext|>\nOnce")
  local plain = run(tmp)
  local special = run(tmp .. " --special")
  T.ok(not plain:find("\n50256\n"), "no special id without --special")
  T.ok(special:find("\n50256\n"), "special id with --special")
  T.eq(special, table.concat(tok:encode_table("The end.\n<|endoftext|>\nOnce", {special = true}), "\n") .. "\n")
  local out, code = run("/nonexistent/file.txt")
  T.ok(code ~= 0, "missing file fails")
  T.ok(out:find("/nonexistent/file.txt", 1, true), out)
  out, code = run("--bogus " .. tmp)
  T.ok(code ~= 0 and out:find("unknown option"), out)
  writefile(tmp, "15496 x")
  out, code = run("--decode " .. tmp)
  T.ok(code ~= 0 and out:find("not an integer id"), out)
end)

T.case("load errors and freed tokenizers", function()
  T.raises(function() xsa.tokenizer.load("/nonexistent/encoder.json", "/nonexistent/vocab.bpe") end,
           "/nonexistent/encoder.json")
  local enc, vocab = xsa.data.tokenizer_files()
  local t2 = xsa.tokenizer.load(enc, vocab)
  same(t2:encode_table("Hi there"), tok:encode_table("Hi there"), "second instance")
  t2:free()
  T.raises(function() t2:encode("x") end, "freed tokenizer")
  t2:free() -- idempotent
  do
    local t3 <close> = xsa.tokenizer.load(enc, vocab)
    T.eq(t3:vocab_size(), 50257)
  end
end)

os.remove(tmp)
T.done()
