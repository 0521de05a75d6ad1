-- xsa.tokenizer: the GPT-2 byte-level BPE tokenizer (core/bpe.c, bound in lua/l_bpe.c).
--
--   local tok = xsa.tokenizer.gpt2()          -- finds encoder.json + vocab.bpe like xsa.data
--   local ids = tok:encode("Hello world")      -- int32 tensor [2]: 15496 995
--   tok:encode("a<|endoftext|>", {special = true}) -- 64 50256 (special token only when asked)
--   tok:encode_table("Hello")                  -- plain table {15496}
--   tok:decode(ids)                            -- "Hello world" (tensor or table of ids)
--   tok:vocab_size(), tok:token(50256), tok:count(text), tok:eot()
--
-- Ids are identical to tiktoken's "gpt2" encoding; invalid UTF-8 is first repaired
-- (each maximal invalid subsequence -> U+FFFD, as Python's errors="replace").
-- Non-goals: other vocabularies' special tokens, training a BPE.
local core = require "xsa.core" -- the C functions and libraries
local data = require "xsa.data"

local M = {EOT = 50256}

-- A tokenizer from explicit files.
function M.load(encoder_json, vocab_bpe)
  assert(type(encoder_json) == "string", "xsa.tokenizer.load: encoder_json path expected")
  assert(type(vocab_bpe) == "string", "xsa.tokenizer.load: vocab_bpe path expected")
  return core._tokenizer.load(encoder_json, vocab_bpe)
end

-- The GPT-2 tokenizer, loaded once per process (the files are found in
-- $XSA_DATA, then data/; see xsa.data.search_dirs()): xsa.data's.
M.gpt2 = data.gpt2_tokenizer

return M
