-- xsa.data: story joining, the token cache (reuse, rebuild on change, corruption),
-- loader shapes, the shift by one, split sizes, determinism by seed, and the
-- missing-data error.
local T = require "testing"
local xsa = require "xsa"
local data = xsa.data

local readfile, writefile = T.readfile, T.writefile

local function now()
  return os.clock()
end

local tok = xsa.tokenizer.gpt2()
local tmpdir = os.tmpname()
os.remove(tmpdir)
assert(os.execute("mkdir -p '" .. tmpdir .. "'"))

local function rows(t) return t:totable() end

T.case("stories are split on <|endoftext|> lines, trimmed and joined with 50256", function()
  local function ids(s) return xsa._data.tokenize_stories(tok, s):totable() end
  local function cat(...)
    local out = {}
    for _, part in ipairs({...}) do
      for _, v in ipairs(part) do out[#out + 1] = v end
    end
    return out
  end
  local A, B = tok:encode_table("One day, a cat."), tok:encode_table("Lily ran.\nShe smiled.")
  local want = cat(A, {50256}, B, {50256})
  local function same(got, w, what)
    T.eq(#got, #w, what)
    for i = 1, #w do T.eq(got[i], w[i], what .. " id " .. i) end
  end
  same(ids("One day, a cat.\n<|endoftext|>\nLily ran.\nShe smiled.\n<|endoftext|>\n"), want, "official layout")
  same(ids("One day, a cat.\r\n<|endoftext|>\r\nLily ran.\nShe smiled.\n<|endoftext|>"), want, "CRLF, no final newline")
  same(ids("\n\nOne day, a cat.  \n<|endoftext|>\n\n\n<|endoftext|>\nLily ran.\nShe smiled."), want,
       "blank lines, empty story, no final separator")
  -- <|endoftext|> inside a line is ordinary text
  local inline = ids("a <|endoftext|> b\n<|endoftext|>\n")
  T.eq(#inline, #tok:encode_table("a <|endoftext|> b") + 1)
  T.eq(#ids(""), 0)
end)

T.case("the missing-data error says where it looked and what to run", function()
  local p, err = data.find("no_such_file_for_xsa.txt")
  T.eq(p, nil)
  T.ok(err:find("no_such_file_for_xsa.txt", 1, true), err)
  T.ok(err:find("looked in", 1, true), err)
  T.ok(err:find("set XSA_DATA", 1, true), err)
  -- a whole process with nothing to find
  local exe = os.getenv("XSA_EXE")
  local root = os.getenv("XSA_ROOT") or "."
  if exe and not exe:find("^/") then exe = root .. "/" .. exe end
  if not exe then return end
  -- a quote in the path: every path goes through xsa.sys.shell_quote
  local empty = tmpdir .. "/it's empty"
  local q = xsa.sys.shell_quote
  xsa.sys.mkdir(empty .. "/x")
  writefile(empty .. "/x/s.lua", "local xsa = require 'xsa'\nxsa.data.tinystories{}\n")
  local p2 = io.popen("cd " .. q(empty .. "/x") .. " && XSA_ROOT=" .. q(empty) .. " XSA_DATA=" .. q(empty .. "/none") ..
                      " " .. q(exe) .. " s.lua 2>&1")
  local out = p2:read("a")
  local ok = p2:close()
  T.ok(not ok, "fails")
  T.ok(out:find("cannot find tinystories.txt or tinystories.txt.xz or TinyStories-valid.txt", 1, true), out)
  T.ok(out:find(empty .. "/none", 1, true), out)
  T.ok(out:find(empty .. "/data", 1, true), "the root is $XSA_ROOT: " .. out)
  T.ok(out:find("set XSA_DATA", 1, true), out)
end)

-- sha256 of a file by coreutils' sha256sum: a digest the engine did not compute
local function sha256(path)
  local p = io.popen("sha256sum '" .. path .. "'")
  local out = p:read("a")
  p:close()
  return out:match("^(%x+)")
end

T.case("the committed data: the files data/README.md pins, read in place", function()
  local root = os.getenv("XSA_ROOT") or "."
  T.eq(sha256(root .. "/data/encoder.json"), "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783")
  T.eq(sha256(root .. "/data/vocab.bpe"), "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5")
  local text = assert(data.read_text(root .. "/data/tinystories.txt.xz"))
  T.eq(#text, 7287251)
  local out = tmpdir .. "/corpus.txt"
  writefile(out, text)
  T.eq(sha256(out), "d063adf3e1ec46a79186acab702c7fa52cbf9a410ab9cfc104f3105acf62e1a6")
  local stories = 0
  for _ in text:gmatch("\n<|endoftext|>\n") do stories = stories + 1 end
  T.eq(stories, 8704)
  -- with XSA_DATA unset the engine finds the checkout's own copies
  if not os.getenv("XSA_DATA") then
    T.eq(data.tinystories_file(), root .. "/data/tinystories.txt.xz")
    local enc = data.tokenizer_files()
    T.eq(enc, root .. "/data/encoder.json")
  end
end)

T.case("xz: plain text passes through; corrupt or truncated streams are clean errors", function()
  local root = os.getenv("XSA_ROOT") or "."
  local plain = tmpdir .. "/plain.txt"
  writefile(plain, "no compression here\n")
  T.eq(data.read_text(plain), "no compression here\n")
  local xz = readfile(root .. "/data/tinystories.txt.xz")
  local bad = tmpdir .. "/bad.txt.xz"
  -- one flipped byte in the middle of the compressed data
  local mid = #xz // 2
  writefile(bad, xz:sub(1, mid - 1) .. string.char((xz:byte(mid) + 1) % 256) .. xz:sub(mid + 1))
  local r, err = data.read_text(bad)
  T.eq(r, nil)
  T.ok(err:find(bad, 1, true) and err:find("corrupt", 1, true), err)
  writefile(bad, xz:sub(1, 100000))
  r, err = data.read_text(bad)
  T.eq(r, nil)
  T.ok(err:find("truncated", 1, true), err)
  writefile(bad, xz:sub(1, 6))                  -- the magic alone
  r, err = data.read_text(bad)
  T.eq(r, nil)
  T.ok(err:find(bad, 1, true), err)
  r, err = data.read_text(tmpdir .. "/missing.xz")
  T.eq(r, nil)
  T.ok(err:find("missing.xz", 1, true), err)
  -- a corrupt corpus never becomes a token cache
  T.raises(function() data.tinystories{path = bad, cache = tmpdir .. "/bad.cache"} end, bad)
  T.eq(io.open(tmpdir .. "/bad.cache", "rb"), nil)
end)

local src = data.find(data.TEXT_NAMES)

T.case("token cache: built, reused, rebuilt on change, corruption detected", function()
  T.ok(src, "TinyStories found")
  -- a small source of our own so it can be changed
  local text = assert(data.read_text(src)):sub(1, 200000)
  local last, at = nil, 1
  while true do
    local i = text:find("<|endoftext|>\n", at, true)
    if not i then break end
    last, at = i, i + 1
  end
  text = text:sub(1, last + 13)
  local s = tmpdir .. "/stories.txt"
  local c = tmpdir .. "/stories.cache"
  writefile(s, text)
  local t1, st1 = xsa._data.story_tokens(tok, s, c)
  T.eq(st1.from_cache, false)
  T.eq(st1.reason, "no cache file yet")
  T.eq(st1.written, true)
  local n = t1:numel()
  T.eq(#readfile(c), 64 + 2 * n, "cache size: 64-byte header + uint16 ids")
  local t2, st2 = xsa._data.story_tokens(tok, s, c)
  T.eq(st2.from_cache, true)
  T.ok(t1:equal(t2), "same ids from the cache")
  -- the ids are the story tokenisation
  T.ok(xsa._data.tokenize_stories(tok, text):equal(t1), "cache holds tokenize_stories' ids")

  local function rebuilt(expect)
    local t3, st = xsa._data.story_tokens(tok, s, c)
    T.eq(st.from_cache, false, expect)
    T.ok(st.reason:find(expect, 1, true), "reason '" .. st.reason .. "' for " .. expect)
    T.eq(st.written, true)
    local _, again = xsa._data.story_tokens(tok, s, c)
    T.eq(again.from_cache, true, "reused after rebuilding (" .. expect .. ")")
    return t3
  end
  local cache = readfile(c)
  -- source changed: same size, one byte different
  writefile(s, "X" .. text:sub(2))
  local t4 = rebuilt("source changed")
  T.ok(not t4:equal(t1), "new ids for the new source")
  writefile(s, text)
  rebuilt("source changed")
  -- tokenizer identity in the header differs
  cache = readfile(c)
  writefile(c, cache:sub(1, 32) .. string.rep("\0", 8) .. cache:sub(41))
  rebuilt("tokenizer changed")
  -- one id flipped
  writefile(c, cache:sub(1, 100) .. string.char((cache:byte(101) + 1) % 256) .. cache:sub(102))
  rebuilt("checksum")
  -- truncated payload, truncated header, garbage, wrong version
  writefile(c, cache:sub(1, #cache - 7))
  rebuilt("truncated")
  writefile(c, cache:sub(1, 20))
  rebuilt("truncated")
  -- a file that is not a cache of ours is somebody's data: ids are rebuilt,
  -- the file is left alone and the reason reported
  writefile(c, ("garbage"):rep(30))
  local tg, stg = xsa._data.story_tokens(tok, s, c)
  T.ok(tg:equal(t1) and stg.reason:find("bad magic", 1, true), stg.reason)
  T.eq(stg.written, false)
  T.ok(stg.write_error:find("not a token cache", 1, true), stg.write_error)
  T.eq(readfile(c), ("garbage"):rep(30), "left unchanged")
  writefile(c, cache:sub(1, 20))
  writefile(c, cache:sub(1, 8) .. "\99\0\0\0" .. cache:sub(13))
  rebuilt("format version")
  -- no cache path: nothing written
  local _, st5 = xsa._data.story_tokens(tok, s)
  T.eq(st5.from_cache, false)
  T.eq(st5.written, false)
  -- an unwritable cache path: ids still come, the error is reported
  local t6, st6 = xsa._data.story_tokens(tok, s, tmpdir .. "/no/such/dir/x.cache")
  T.ok(t6:equal(t1))
  T.eq(st6.written, false)
  T.ok(st6.write_error and #st6.write_error > 0, "write error reported")
  T.raises(function() xsa._data.story_tokens(tok, tmpdir .. "/missing.txt", c) end, "missing.txt")
end)

T.case("tinystories: split sizes, shapes, shift by one", function()
  local train, val, info = data.tinystories{seq_len = 8, max_tokens = 20000, batch = 4,
                                            val_fraction = 0.1, seed = 1,
                                            cache = tmpdir .. "/ts.cache"}
  T.eq(info.n_tokens, 20000)
  T.eq(info.num_windows, 20000 // 9)
  T.eq(info.n_train, 1999)          -- floor(2222 * 0.9)
  T.eq(info.n_val, 223)
  T.eq(train.num_windows, 1999)
  T.eq(val.num_windows, 223)
  T.eq(train.batch_size, 4)
  T.eq(train.seq_len, 8)
  T.eq(train:num_batches(), 1999 // 4)   -- the incomplete last batch is dropped
  T.eq(val:num_batches(), 56)            -- ceil(223 / 4): all val windows
  local all = xsa._data.story_tokens(tok, info.source, tmpdir .. "/ts.cache"):totable()
  T.eq(#all, info.total_tokens)
  local function check_batch(loader, x, y, first_k, rows_expected)
    T.eq(x:dtype(), "int32")
    T.eq(y:dtype(), "int32")
    local sx, sy = x:shape(), y:shape()
    T.eq(sx[1], rows_expected)
    T.eq(sx[2], 8)
    T.eq(sy[1], rows_expected)
    T.eq(sy[2], 8)
    local xr, yr = rows(x), rows(y)
    for r = 1, rows_expected do
      local w = loader:window(first_k + r - 1)
      local base = (w - 1) * 9
      for t = 1, 8 do
        T.eq(xr[r][t], all[base + t], "input token")
        T.eq(yr[r][t], all[base + t + 1], "target = next token")
      end
    end
  end
  local x, y = train:batch(1)
  check_batch(train, x, y, 1, 4)
  x, y = train:batch(train:num_batches())
  check_batch(train, x, y, (train:num_batches() - 1) * 4 + 1, 4)
  x, y = val:batch(1)
  check_batch(val, x, y, 1, 4)
  T.eq(val:window(1), 2000, "val starts after the train windows")
  x, y = val:batch(56)
  check_batch(val, x, y, 221, 3)         -- the remainder
  T.eq(val:window(223), 2222, "the last window")
  T.raises(function() train:batch(0) end, "out of range")
  T.raises(function() val:batch(57) end, "out of range")
end)

T.case("train order: a seeded permutation per epoch, the same on every machine", function()
  local opts = {seq_len = 64, max_tokens = 500000, batch = 16, val_fraction = 0.1, seed = 0}
  local t0 = now()
  local train, val, info = data.tinystories(opts)
  local dt = now() - t0
  T.eq(info.n_train, 6922)
  T.eq(info.n_val, 770)
  T.eq(train:num_batches(), 432)
  T.eq(val:num_batches(), 49)
  -- golden order for seed 0 (xoshiro256** through xsa_rng; any machine)
  local golden = {2354, 873, 6650, 5374, 6535, 781, 1367, 1528}
  for k, w in ipairs(golden) do T.eq(train:window(k), w, "seed 0 window " .. k) end
  local x = train:batch(1)
  local first = rows(x)[1]
  local want = {9422, 284, 262, 8848, 290, 804, 379, 262}
  for i, v in ipairs(want) do T.eq(first[i], v, "seed 0 first batch token " .. i) end
  -- epoch 1 is a permutation of all train windows
  local seen, count = {}, 0
  for k = 1, train.num_windows do
    local w = train:window(k)
    T.ok(w >= 1 and w <= 6922 and not seen[w], "window in range, once")
    seen[w] = true
    count = count + 1
  end
  T.eq(count, 6922)
  -- same seed -> same batches; next() walks the epoch then reshuffles
  local train2 = data.tinystories(opts)
  for i = 1, 3 do
    local a = train:next()
    local b = train2:next()
    T.ok(a:equal(b), "same seed, batch " .. i)
    T.ok(a:equal((train:batch(i))), "next() follows batch(i)")
  end
  T.eq(train:epoch(), 1)
  local e1 = {}
  for k = 1, 8 do e1[k] = train:window(k) end
  for _ = 4, 432 do train:next() end
  T.eq(train:epoch(), 1)
  train:next()                      -- first batch of epoch 2
  T.eq(train:epoch(), 2)
  local differs = false
  for k = 1, 8 do differs = differs or train:window(k) ~= e1[k] end
  T.ok(differs, "epoch 2 is reshuffled")
  -- seek puts a fresh loader where this one is: the same batches follow
  for _ = 1, 6 do train:next() end
  T.eq(train:position(), 7)
  local fresh = data.tinystories(opts)
  fresh:seek(train:epoch(), train:position())
  T.eq(fresh:epoch(), 2)
  for i = 1, 3 do T.ok(fresh:next():equal((train:next())), "after seek, batch " .. i) end
  T.raises(function() fresh:seek(1, 433) end, "cannot seek to epoch 1, position 433")
  train:reset()
  T.eq(train:epoch(), 1)
  for k = 1, 8 do T.eq(train:window(k), e1[k], "reset restores epoch 1") end
  T.ok(train:next():equal((train2:batch(1))), "after reset: batch 1 again")
  -- another seed, another order
  local other = data.tinystories{seq_len = 64, max_tokens = 500000, batch = 16, seed = 7}
  local same_order = true
  for k = 1, 8 do same_order = same_order and other:window(k) == e1[k] end
  T.ok(not same_order, "seed 7 differs from seed 0")
  -- val is in order and does not reshuffle
  for k = 1, 5 do T.eq(val:window(k), 6922 + k) end
  for _ = 1, 50 do val:next() end
  T.eq(val:epoch(), 2)
  T.eq(val:window(1), 6923)
  io.stdout:write(string.format("  500k-token loaders built in %.3f s (cache %s)\n", dt,
                                info.from_cache and "warm" or "cold: " .. tostring(info.rebuilt_because)))
end)

T.case("loading 500k tokens from a warm cache takes well under a second", function()
  data.tinystories{}               -- make sure the cache exists
  local t0 = now()
  local _, _, info = data.tinystories{}
  local dt = now() - t0
  T.eq(info.from_cache, true)
  io.stdout:write(string.format("  warm cache: 500k tokens ready in %.1f ms\n", dt * 1e3))
  T.ok(dt < (os.getenv("XSA_SANITIZED") and 5 or 0.5), "warm load took " .. dt .. " s")
end)

T.case("a cache path that is the source, or another file, never overwrites it", function()
  local text = "One story.\n<|endoftext|>\nTwo.\n<|endoftext|>\n"
  local s = tmpdir .. "/own.txt"
  writefile(s, text)
  T.raises(function() data.tinystories{path = s, cache = s, max_tokens = 10, batch = 1, seq_len = 1} end,
    "is the source file")
  T.eq(readfile(s), text, "source intact")
  -- the same file through another spelling and through a symbolic link
  T.raises(function() xsa._data.story_tokens(tok, s, tmpdir .. "/./own.txt") end, "is the source file")
  os.execute("ln -sf '" .. s .. "' '" .. tmpdir .. "/link.cache'")
  T.raises(function() xsa._data.story_tokens(tok, s, tmpdir .. "/link.cache") end, "is the source file")
  T.eq(readfile(s), text, "source intact")
  -- the user's other text file named as the cache
  local notes = tmpdir .. "/notes.txt"
  writefile(notes, "my notes\n")
  local _, st = xsa._data.story_tokens(tok, s, notes)
  T.eq(st.written, false)
  T.eq(readfile(notes), "my notes\n")
end)

T.case("bad options raise clear errors", function()
  T.raises(function() data.tinystories{seq_len = 0} end, "seq_len must be >= 1")
  T.raises(function() data.tinystories{val_fraction = 1} end, "val_fraction")
  T.raises(function() data.tinystories{batch = 2.5} end, "batch must be an integer")
  T.raises(function() data.tinystories{sequence = 3} end, "unknown option 'sequence'")
  T.raises(function() data.tinystories{max_tokens = 100} end, "fewer than one batch")
  T.raises(function() data.tinystories{path = "/nonexistent/stories.txt"} end, "/nonexistent/stories.txt")
  T.raises(function() data.loader(xsa.zeros({100}), {seq_len = 4}) end, "int32")
end)

T.case("a loader over any token tensor", function()
  local toks = xsa.arange(0, 50):int()
  local l = data.loader(toks, {seq_len = 4, batch = 3})
  T.eq(l.num_windows, 10)
  T.eq(l:num_batches(), 4)
  local x, y = l:batch(1)
  local xr, yr = rows(x), rows(y)
  T.eq(xr[1][1], 0)
  T.eq(yr[1][1], 1)
  T.eq(xr[2][1], 5)
  T.eq(yr[3][4], 14)
  x = l:batch(4)
  T.eq(x:shape()[1], 1)
  T.eq(rows(x)[1][1], 45)
end)

T.case("loader sizes near 2^63 are clean errors, not wrapped sizes", function()
  local toks = xsa.arange(0, 100):int()
  local big, max = 1 << 62, math.maxinteger
  for _, a in ipairs{{big, big, 1, 1}, {0, big, 1, 1}, {0, 1, max, 1}, {0, 2, big, 1},
                     {max, 1, 1, 1}} do
    -- refused by the binding's range checks or by the core's size check
    local ok, err = pcall(xsa._data.loader, toks, a[1], a[2], a[3], a[4], false, 0)
    T.ok(not ok and (tostring(err):find("exceed the 100 tokens available", 1, true) or
      tostring(err):find("must be in [", 1, true)), tostring(err))
  end
  T.raises(function() data.loader(toks, {seq_len = 4, first_window = big, num_windows = big}) end,
    "first_window must be in [")
  T.raises(function() xsa._data.split(100, max, 0.1) end, "seq_len must be in [1, ")
  -- a batch larger than the windows (up to the binding's bound, 2^24): one batch of all of them
  T.raises(function() data.loader(toks, {seq_len = 9, batch = max}) end, "batch must be in [1, ")
  local l = data.loader(toks, {seq_len = 9, batch = 1 << 24})
  T.eq(l:num_batches(), 1)
  T.eq(l:batch(1):shape()[1], 10)
end)

os.execute("rm -rf '" .. tmpdir .. "'")
T.done()
