-- xsa.data: where the data files are, and TinyStories train/val loaders.
--
--   local train, val, info = xsa.data.tinystories{seq_len=64, max_tokens=500000, batch=16,
--                                                 val_fraction=0.1, seed=0}
--   local x, y = train:next()        -- int32 [16,64] each; y is x shifted by one token
--
-- Files are looked for in $XSA_DATA, then <root>/data, then data/ under the current
-- directory (<root> is xsa.sys.root(): $XSA_ROOT, else the checkout that holds the
-- modules, else "."). The checkout
-- ships everything the study needs there: encoder.json, vocab.bpe and the corpus as
-- tinystories.txt.xz, read in place through liblzma (core/xz.h). A plain
-- tinystories.txt is preferred when one sits in the same folder; data/fetch.sh fetches
-- the official TinyStories-valid.txt for more text. TinyStories is tokenised once (stories
-- joined with <|endoftext|> = 50256, see core/data.h) and the ids are cached in
-- $XSA_CACHE or <root>/data as "<text file name>.tokens.cache".
--
-- Loader protocol (any table with these methods works where a loader is expected):
--   loader:num_batches(), loader:batch(i) -> inputs, targets, loader:next(), loader:reset(),
--   fields loader.batch_size, loader.seq_len, loader.num_windows; optionally
--   loader:seek(epoch, position) (xsa.train resumes with it, else with reset + next()).
-- Non-goals: datasets other than story files, streaming, multi-process loading.
local sys = require "xsa.sys"
local options = require "xsa.options"
local C = require("xsa.core")._data

local M = {EOT = 50256}

M.TEXT_NAMES = {"tinystories.txt", "tinystories.txt.xz", "TinyStories-valid.txt"}

-- Installed use (the rule): finding data never writes. Folders are tested
-- with stat (is_dir), files by opening them for reading, so a module on a
-- read-only filesystem (make install, a rock) finds its files as in the
-- checkout; a token cache that cannot be written costs a warning, not the run.
local is_dir = C.is_dir

-- The limit on a decompressed text (core/xz.h): max_text_bytes() reads it,
-- max_text_bytes(n) sets it (bytes, an integer >= 1). $XSA_MAX_TEXT_BYTES sets
-- it when the module loads; the default is 256 MiB.
function M.max_text_bytes(n)
  if n ~= nil and not (math.tointeger(n) and n >= 1) then
    error("xsa.data.max_text_bytes: expected an integer >= 1 (bytes), got " .. tostring(n), 2)
  end
  return C.max_text_bytes(n and math.tointeger(n))
end

do
  local env = sys.env("XSA_MAX_TEXT_BYTES")
  if env then
    local n = math.tointeger(tonumber(env))
    if not n or n < 1 then error("XSA_MAX_TEXT_BYTES must be an integer >= 1 (bytes), got '" .. env .. "'", 0) end
    C.max_text_bytes(n)
  end
end

-- The folders searched for data files, in order.
function M.search_dirs()
  local dirs, seen = {}, {}
  local function add(d)
    if d and d ~= "" and not seen[d] then
      seen[d] = true
      dirs[#dirs + 1] = d
    end
  end
  add(sys.env("XSA_DATA"))
  add(sys.root() .. "/data")
  add("data")
  -- an install (make install, a rock) keeps its data files next to the
  -- modules (LUADIR/xsa/data): found from this file's own place, whatever
  -- found it (the executable's searcher, package.path, a stock lua5.4)
  local here = debug.getinfo(1, "S").source:match("^@(.*)$")
  local beside = here and (here:match("^(.*)/[^/]*$") or ".")
  if beside and is_dir(beside .. "/data") then add(beside .. "/data") end
  -- the xsa.so of a stock lua5.4 (LUA_CPATH only): PREFIX/lib/lua/5.4/xsa.so
  -- beside PREFIX/share/lua/5.4/xsa/data (make install)
  local so = package.searchpath("xsa", package.cpath)
  local prefix = so and so:match("^(.*)/lib/lua/5%.4/xsa%.so$")
  if prefix and is_dir(prefix .. "/share/lua/5.4/xsa/data") then add(prefix .. "/share/lua/5.4/xsa/data") end
  return dirs
end

local function not_found(what)
  local looked = {}
  if not sys.env("XSA_DATA") then looked[1] = "$XSA_DATA (unset)" end
  for _, d in ipairs(M.search_dirs()) do looked[#looked + 1] = d end
  if sys.installed() then
    return string.format("xsa.data: cannot find %s; looked in: %s (make install puts the data files beside "
      .. "the modules). To read them from elsewhere, set XSA_DATA to a folder that holds them: the data/ folder "
      .. "of the xsa sources has the tokenizer files and the TinyStories corpus tinystories.txt.xz, and its "
      .. "data/fetch.sh downloads the official files.", what, table.concat(looked, ", "))
  end
  return string.format("xsa.data: cannot find %s; looked in: %s. The repository ships these "
    .. "files in data/ (check that your checkout is complete), or set XSA_DATA to a folder "
    .. "that holds them.", what, table.concat(looked, ", "))
end

-- The bytes of a text file, decompressed when it is xz (whatever its name); nil and a
-- message when it cannot be read or decoded (a corrupt .xz fails its integrity check).
function M.read_text(path)
  if type(path) ~= "string" then error("xsa.data.read_text: expected a path string", 2) end
  if path:find("\0", 1, true) then error("xsa.data.read_text: a path cannot hold a NUL byte", 2) end
  return C.read_text(path)
end

-- The first existing file among `names` (a string or a list) in the search folders,
-- or nil and a message saying where it looked and what to run.
function M.find(names)
  if type(names) == "string" then names = {names} end
  for _, d in ipairs(M.search_dirs()) do
    for _, n in ipairs(names) do
      local p = d .. "/" .. n
      if sys.exists(p) then return p end
    end
  end
  return nil, not_found(table.concat(names, " or "))
end

-- Paths of encoder.json and vocab.bpe (raises when missing).
function M.tokenizer_files()
  local enc, e1 = M.find("encoder.json")
  if not enc then error(e1, 2) end
  local vocab, e2 = M.find("vocab.bpe")
  if not vocab then error(e2, 2) end
  return enc, vocab
end

-- The GPT-2 tokenizer of the files tokenizer_files() finds, loaded once per
-- process (again when a user freed it). xsa.tokenizer.gpt2 is this
-- function: the tokenizer's files are found here, so neither module needs
-- the other back.
local gpt2_loaded = {}
function M.gpt2_tokenizer()
  local enc, vocab = M.tokenizer_files()
  local key = enc .. "\0" .. vocab
  local tok = gpt2_loaded[key]
  if not tok or not pcall(tok.vocab_size, tok) then -- not loaded yet, or freed by a user
    tok = require("xsa.core")._tokenizer.load(enc, vocab)
    gpt2_loaded[key] = tok
  end
  return tok
end

-- Path of the TinyStories text (raises when missing).
function M.tinystories_file()
  local p, err = M.find(M.TEXT_NAMES)
  if not p then error(err, 2) end
  return p
end

-- Where token caches go: $XSA_CACHE, else <root>/data in a checkout (never
-- next to a read-only source); an installed xsa: $XDG_CACHE_HOME/xsa, else
-- ~/.cache/xsa (never the install's folders or the user's working directory).
function M.cache_dir()
  local e = sys.env("XSA_CACHE")
  if e then return e end
  if not sys.installed() then return sys.root() .. "/data" end
  local base = sys.env("XDG_CACHE_HOME") or (sys.env("HOME") and (sys.env("HOME") .. "/.cache"))
  if not base then return sys.root() .. "/data" end
  pcall(sys.mkdir, base .. "/xsa") -- a folder of the user's own; without it, no cache
  return base .. "/xsa"
end

local Loader = {}
Loader.__index = Loader

function Loader:num_batches() return self._c:num_batches() end
function Loader:batch(i) return self._c:batch(i) end
function Loader:next() return self._c:next() end
function Loader:reset() self._c:reset() end
-- 1-based epoch of the batches next() is handing out
function Loader:epoch() return self._c:epoch() end
-- batches next() has handed out in this epoch
function Loader:position() return self._c:position() end
-- back to where epoch() and position() were (a resumed run: the same batches follow)
function Loader:seek(epoch, position) self._c:seek(epoch, position) end
-- the 1-based window number (in the token list) at position k of this epoch's order
function Loader:window(k) return self._c:window(k) end
function Loader:free() self._c:free() end
function Loader:__tostring()
  return string.format("xsa.data loader (%s: %d windows of %d+1 tokens, batch %d, %d batches)",
    self.kind, self.num_windows, self.seq_len, self.batch_size, self:num_batches())
end

local function int_opt(opts, name, default, min)
  local v = opts[name]
  if v == nil then v = default end
  if math.type(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v)) then
    error(string.format("xsa.data: option %s must be an integer, got %s", name, tostring(v)), 3)
  end
  v = math.tointeger(v)
  if v < min then error(string.format("xsa.data: option %s must be >= %d, got %d", name, min, v), 3) end
  return v
end

-- A loader over the windows [first_window, first_window + num_windows) (0-based) of an int32
-- token tensor: opts = {seq_len=, batch=, shuffle=false, seed=0, first_window=0, num_windows=all}.
function M.loader(tokens, opts)
  opts = options.check("xsa.data.loader", opts, {"seq_len", "batch", "shuffle", "seed", "first_window", "num_windows"})
  local T = int_opt(opts, "seq_len", 64, 1)
  local B = int_opt(opts, "batch", 16, 1)
  local first = int_opt(opts, "first_window", 0, 0)
  local all = tokens:numel() // (T + 1) - first
  local nw = int_opt(opts, "num_windows", all > 0 and all or 0, 0)
  local seed = int_opt(opts, "seed", 0, math.mininteger)
  local c = C.loader(tokens, first, nw, T, B, opts.shuffle and true or false, seed)
  return setmetatable({_c = c, seq_len = T, batch_size = B, num_windows = nw,
                       kind = opts.shuffle and "train" or "val"}, Loader)
end

local warned = false
local held_out -- below

-- Train and val loaders over the first max_tokens tokens of TinyStories (see the header).
-- Extra options: path (the text file), tokenizer, cache (a path, or false for none),
-- val_tokens (instead of val_fraction: the last val_tokens of those tokens are the
-- validation text, the same tokens whatever seq_len is, and the training windows
-- come from the tokens before them; the study's equal-token grid evaluates every
-- cell on the same held-out stories this way).
-- Returns train, val, info (source, cache, from_cache, rebuilt_because, total_tokens,
-- n_tokens, num_windows, n_train, n_val).
function M.tinystories(opts)
  opts = options.check("xsa.data.tinystories", opts, {"seq_len", "max_tokens", "batch", "val_fraction", "seed",
    "path", "tokenizer", "cache", "val_tokens"})
  local T = int_opt(opts, "seq_len", 64, 1)
  local B = int_opt(opts, "batch", 16, 1)
  local max_tokens = int_opt(opts, "max_tokens", 500000, 1)
  local seed = int_opt(opts, "seed", 0, math.mininteger)
  local vf = opts.val_fraction
  if vf == nil then vf = 0.1 end
  if type(vf) ~= "number" or not (vf >= 0 and vf < 1) then
    error("xsa.data.tinystories: val_fraction must be a number in [0, 1), got " .. tostring(vf), 2)
  end
  local path = opts.path
  if path then
    local ok, why = C.is_file(path)
    if not ok then error("xsa.data.tinystories: cannot read " .. why, 2) end
  else
    local err
    path, err = M.find(M.TEXT_NAMES)
    if not path then error(err, 2) end
  end
  local tok = opts.tokenizer or M.gpt2_tokenizer()
  local cache = opts.cache
  if cache == nil then
    local dir = M.cache_dir()
    cache = is_dir(dir) and (dir .. "/" .. path:match("([^/]+)$") .. ".tokens.cache") or false
  end
  local tokens, st = C.story_tokens(tok, path, cache or nil)
  if st.write_error and not warned then
    warned = true
    io.stderr:write("xsa.data: warning: token cache not written (", st.write_error,
                    "); set XSA_CACHE to a writable folder to avoid tokenising again\n")
  end
  local total = tokens:numel()
  local n = math.min(total, max_tokens)
  if opts.val_tokens ~= nil then return held_out(tokens, n, T, B, seed, opts.val_tokens, path, cache, st) end
  local nw, ntrain = C.split(n, T, vf)
  local nval = nw - ntrain
  if ntrain < B then
    error(string.format("xsa.data.tinystories: %d tokens give %d training windows of %d+1 tokens, "
      .. "fewer than one batch of %d", n, ntrain, T, B), 2)
  end
  local train = setmetatable({_c = C.loader(tokens, 0, ntrain, T, B, true, seed), seq_len = T,
                              batch_size = B, num_windows = ntrain, kind = "train"}, Loader)
  local val = setmetatable({_c = C.loader(tokens, ntrain, nval, T, B, false, seed), seq_len = T,
                            batch_size = B, num_windows = nval, kind = "val"}, Loader)
  local info = {source = path, cache = cache or nil, from_cache = st.from_cache,
                rebuilt_because = st.reason ~= "" and st.reason or nil, cache_written = st.written,
                total_tokens = total, n_tokens = n, num_windows = nw, n_train = ntrain, n_val = nval}
  return train, val, info
end

-- The val_tokens split of tinystories (above): the tail [n - val_tokens, n)
-- is the validation text, cut into windows from its own first token; the
-- training windows tile [0, n - val_tokens). The returned info adds
-- val_first (0-based token offset of the validation text).
held_out = function(tokens, n, T, B, seed, val_tokens, path, cache, st)
  if not (math.tointeger(val_tokens) and val_tokens >= T + 1 and val_tokens < n) then
    error(string.format("xsa.data.tinystories: val_tokens must be an integer from seq_len + 1 (%d) to below the %d "
      .. "tokens used, got %s", T + 1, n, tostring(val_tokens)), 3)
  end
  val_tokens = math.tointeger(val_tokens)
  local first = n - val_tokens
  local head, tail = tokens:narrow(1, 1, first), tokens:narrow(1, first + 1, val_tokens)
  local ntrain, nval = first // (T + 1), val_tokens // (T + 1)
  if ntrain < B then
    error(string.format("xsa.data.tinystories: %d training tokens give %d windows of %d+1 tokens, fewer than one "
      .. "batch of %d", first, ntrain, T, B), 3)
  end
  local train = setmetatable({_c = C.loader(head, 0, ntrain, T, B, true, seed), seq_len = T,
                              batch_size = B, num_windows = ntrain, kind = "train"}, Loader)
  local val = setmetatable({_c = C.loader(tail, 0, nval, T, B, false, seed), seq_len = T,
                            batch_size = B, num_windows = nval, kind = "val"}, Loader)
  local info = {source = path, cache = cache or nil, from_cache = st.from_cache,
                rebuilt_because = st.reason ~= "" and st.reason or nil, cache_written = st.written,
                total_tokens = tokens:numel(), n_tokens = n, num_windows = ntrain + nval, n_train = ntrain,
                n_val = nval, val_first = first}
  return train, val, info
end

return M
