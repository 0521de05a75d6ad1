-- tokenize.lua: GPT-2 token ids of a file, one per line, or the text of ids.
--
--   xsa scripts/tokenize.lua FILE [--special]   ids of FILE (- for stdin), one per line;
--                                              with --special, "<|endoftext|>" in the text
--                                              is the special token 50256
--   xsa scripts/tokenize.lua --decode FILE      reads ids (any white space between them)
--                                              and writes the exact bytes back
--
-- Ids are identical to tiktoken's "gpt2" encoding (invalid UTF-8 is first repaired to
-- U+FFFD, as Python's errors="replace"). Also runs under a stock lua5.4 with xsa.so on
-- LUA_CPATH and lua/ on LUA_PATH.
local xsa = require "xsa"

local function usage(msg)
  local me = "xsa " .. (arg and arg[0] or "scripts/tokenize.lua")
  local text = "usage: " .. me .. " FILE [--special]\n       " .. me .. " --decode FILE\n\n" ..
    "Writes to stdout the GPT-2 token ids of FILE (- for stdin), one per line, as tiktoken's \"gpt2\" gives them;\n" ..
    "with --special, \"<|endoftext|>\" in the text is the special token 50256. With --decode, reads ids (any\n" ..
    "white space between them) from FILE and writes the exact bytes they stand for. Writes no file.\n"
  if msg then io.stderr:write("tokenize.lua: ", msg, "\n", text) else io.stdout:write(text) end
  os.exit(msg and 2 or 0)
end

local file, special, decode
for _, a in ipairs(arg or {}) do
  if a == "--special" then special = true
  elseif a == "--decode" then decode = true
  elseif a == "-h" or a == "--help" then usage()
  elseif a:sub(1, 2) == "--" then usage("unknown option " .. a)
  elseif file then usage("more than one FILE")
  else file = a end
end
if not file then usage("no FILE") end
if decode and special then usage("--special applies to encoding only") end

local text
if file == "-" then
  text = io.stdin:read("a")
else
  -- xz files (such as data/tinystories.txt.xz) are read decompressed
  local err
  text, err = xsa.data.read_text(file)
  if not text then
    io.stderr:write("tokenize.lua: ", err, "\n")
    os.exit(1)
  end
end

local tok = xsa.tokenizer.gpt2()
if decode then
  local ids, n = {}, 0
  for w in text:gmatch("%S+") do
    local v = math.tointeger(tonumber(w))
    if not v then
      io.stderr:write("tokenize.lua: '", w, "' is not an integer id\n")
      os.exit(1)
    end
    n = n + 1
    ids[n] = v
  end
  io.stdout:write(tok:decode(ids))
else
  local ids = tok:encode_table(text, {special = special})
  if #ids > 0 then io.stdout:write(table.concat(ids, "\n"), "\n") end
end
