-- xsa.generate: model:generate(prompt [, opts]), the text-facing side of
-- generation (the decoding loop, the key/value cache and sampling are C:
-- core/generate.c, kv_cache.c and sample.c, bound in lua/l_generate.c).
--
--   local text, ids, info = model:generate("Once upon a time", {max_new_tokens = 40, seed = 1})
--   local texts = model:generate({"The cat", "A dog"}, {temperature = 0})   -- a batch
--   model:generate({15496, 995})              -- ids (table or int32 tensor) work too
--
-- prompt: a string (GPT-2 BPE, xsa.tokenizer.gpt2()), a list of ids or a 1-D int32
-- tensor (one prompt), or a list of strings, a list of id lists or a 2-D int32
-- tensor (a batch). An empty prompt starts from <|endoftext|> (50256), as GPT-2 does.
-- opts: max_new_tokens (100), temperature (1.0; 0 = greedy), top_k (none), top_p
-- (none), seed (drawn from the global generator when absent, so xsa.manual_seed
-- makes runs repeatable), stop_at_eot (true: a row ends at <|endoftext|>, which is
-- not returned), use_cache (true; false = a full forward per token, the slow
-- reference), quiet (false; true: no note on stderr when a prompt is cropped).
-- Returns the continuation (text without the prompt, nil when the model's
-- vocabulary is smaller than GPT-2's and the prompt was ids; a vocabulary
-- padded past GPT-2's, as 50304, decodes what the tokenizer has and leaves
-- out the ids it lacks, which stay in the ids), its new ids as an int32
-- tensor, and info = {prompt_tokens, new_tokens, stopped ("eot" or "length"),
-- cropped (tokens dropped from the left), seconds, tokens_per_s, seed}. A batch
-- gives lists of each (info's fields are lists, except seconds, tokens_per_s, seed).
--
-- Batches are left-padded with per-row positions: each row continues exactly
-- as it would alone (up to the rounding of batched matrix products); with
-- sampling, row i (1-based) draws from the stream of seed + i - 1.
-- Context: prompts longer than the model's seq_len keep their last seq_len
-- tokens (with a note); once a row holds seq_len tokens, every further token
-- is predicted from the last seq_len alone (the cache is recomputed over that
-- window), i.e. what a full forward over the last seq_len tokens gives.
-- Non-goals: beam search, repetition penalties, streaming callbacks.
local options = require "xsa.options"

local M = {}

local EOT = 50256

local core = require "xsa.core" -- the C functions and libraries

local option_types = {
  max_new_tokens = "number", temperature = "number", top_k = "number", top_p = "number",
  seed = "number", stop_at_eot = "boolean", use_cache = "boolean", quiet = "boolean",
}

local option_names = {}
for k in pairs(option_types) do option_names[#option_names + 1] = k end
table.sort(option_names)

local function check_opts(opts)
  opts = options.check("model:generate", opts, option_names, 4)
  for k, v in next, opts do
    local t = option_types[k]
    if type(v) ~= t then
      error(string.format("model:generate: %s must be a %s (got %s)", k, t, type(v)), 3)
    end
  end
  return opts
end

local is_tensor = core.is_tensor

local function ids_of_tensor(t, what)
  if t:dtype() ~= "int32" then error("model:generate: " .. what .. " must be an int32 tensor of ids", 4) end
  return t:totable()
end

-- rows (lists of ids), whether it is a batch, whether the prompts were text
local function prompt_rows(prompt, tokenizer)
  if type(prompt) == "string" then return {tokenizer():encode_table(prompt)}, false, true end
  if is_tensor(prompt) then
    if prompt:dim() == 1 then return {ids_of_tensor(prompt, "a 1-D prompt")}, false, false end
    if prompt:dim() == 2 then return ids_of_tensor(prompt, "a 2-D prompt"), true, false end
    error("model:generate: a tensor prompt must be 1-D (one prompt) or 2-D (a batch)", 3)
  end
  if type(prompt) ~= "table" then
    error("model:generate: prompt must be a string, a list of ids, a tensor or a list of prompts (got " ..
      type(prompt) .. ")", 3)
  end
  if #prompt == 0 then error("model:generate: an empty list is not a prompt (use \"\" to start from nothing)", 3) end
  local first = prompt[1]
  if type(first) == "number" then return {prompt}, false, false end
  local rows, text = {}, type(first) == "string"
  for i, p in ipairs(prompt) do
    if type(p) == "string" then
      if not text then error("model:generate: a batch mixes text and ids (prompt " .. i .. ")", 3) end
      rows[i] = tokenizer():encode_table(p)
    elseif text then
      error("model:generate: a batch mixes text and ids (prompt " .. i .. ")", 3)
    elseif is_tensor(p) then
      rows[i] = ids_of_tensor(p, "prompt " .. i)
    elseif type(p) == "table" then
      rows[i] = p
    else
      error("model:generate: prompt " .. i .. " is a " .. type(p), 3)
    end
  end
  return rows, true, text
end

-- the ids GPT-2's tokenizer has (a padded vocabulary's others cannot be text)
local function known(ids)
  local out = {}
  for _, id in ipairs(ids) do
    if id <= EOT then out[#out + 1] = id end
  end
  return out
end

function M.generate(model, prompt, opts)
  opts = check_opts(opts)
  local cfg = model:config()
  local tok
  local function tokenizer()
    if not tok then tok = require("xsa.tokenizer").gpt2() end
    return tok
  end
  local rows, batch, text = prompt_rows(prompt, tokenizer)
  local gpt2_vocab = cfg.vocab >= EOT + 1 -- GPT-2's, or padded past it
  local info = {prompt_tokens = {}, new_tokens = {}, stopped = {}, cropped = {}}
  for i, r in ipairs(rows) do
    if #r == 0 then
      if cfg.vocab <= EOT then error("model:generate: prompt " .. i .. " is empty", 2) end
      rows[i] = {EOT}
      r = rows[i]
    end
    info.prompt_tokens[i] = #r
    info.cropped[i] = math.max(0, #r - cfg.seq_len)
    if #r > cfg.seq_len and not opts.quiet then
      io.stderr:write(string.format("model:generate: note: prompt%s has %d tokens; keeping its last %d " ..
        "(the model's seq_len)\n", batch and (" " .. i) or "", #r, cfg.seq_len))
    end
  end
  local seed = opts.seed
  if seed == nil then seed = core.randint(0, 0x7fffffff, 1):item()
  elseif math.type(seed) ~= "integer" or seed < 0 then
    error("model:generate: seed must be a non-negative integer", 2)
  end
  local eot = -1
  if opts.stop_at_eot ~= false and cfg.vocab > EOT then eot = EOT end
  local progress = require "xsa.progress"
  local t0 = progress.now()
  local out = core.gpt.generate_ids(model, rows, {
    max_new_tokens = opts.max_new_tokens, temperature = opts.temperature, top_k = opts.top_k,
    top_p = opts.top_p, seed = seed, eot = eot, use_cache = opts.use_cache,
  })
  local dt = progress.now() - t0
  local max_new = opts.max_new_tokens or 100
  local texts, ids, total = {}, {}, 0
  for i, r in ipairs(out) do
    info.new_tokens[i] = #r
    info.stopped[i] = #r < max_new and "eot" or "length"
    total = total + #r
    ids[i] = #r > 0 and core.tensor(r, "int32") or core.zeros(0, {dtype = "int32"})
    if text or gpt2_vocab then texts[i] = tokenizer():decode(known(r)) end
  end
  info.seconds, info.seed = dt, seed
  info.tokens_per_s = dt > 0 and total / dt or nil
  if batch then return texts, ids, info end
  for _, k in ipairs{"prompt_tokens", "new_tokens", "stopped", "cropped"} do info[k] = info[k][1] end
  return texts[1], ids[1], info
end

return M
