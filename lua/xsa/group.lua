-- xsa.group: a group of training runs that share their batches (one
-- xsa.train.runs or xsa.train.pair call) as the record keeps it: one entry
-- per run, each keyed by what determines that run's numbers, and what the
-- group shares (its timings, the trainer's settings, a probe's batch count).
--
--   local runs = xsa.group.runs(config)         -- {{arm = "sa", key = {...}}, {arm = "xsa", ...}}
--   local text = xsa.group.key(config, xsa.record.data_identity())
--   local entries, rest, layout = xsa.group.split(config, result)
--   local result = xsa.group.join(rec)          -- the result as the trainer returned it
--
-- A run's key: its model configuration with its attention and, for any
-- built-in attention but SA (which has no lambda), its lambda, for a
-- variant written in Lua (xsa.attention.register) the identity of its
-- code and its version, if named, instead; the data configuration
-- (with the seed of the batch order); the training configuration; the data
-- files by content; the precision. Neither the part nor the group's name
-- is in it: the same run trained for two parts has one key. What is not
-- in it is the arithmetic the provenance names (BLAS kernel and threads,
-- GEMM library, lm_head blocking, CPU): a run on another kernel is another
-- record of the same run, compared with it (xsa.record.differences), not
-- another run; results from every machine are read by every other.
-- A group's key lists its runs' keys in arm order, and what else the
-- configuration asks of the group (a probe set: part of its result).
-- The configuration of a group: {data =, model =, train =, lambda =,
-- arms = {"sa", "xsa", ...}} (arms default to SA and XSA: a pair; an arm
-- may be {attention =, lambda =}: a lambda sweep is one group of SA and
-- XSA at each lambda; an arm may name a registered Lua variant), plus any field of its own (part: where its records
-- are; probe, ...).
-- Non-goals: reading or writing files (xsa.record), training (xsa.train).
local cache = require "xsa.cache"
local variants = require "xsa.attention"

local M = {}

-- fields of a group configuration that are not the group's own
local SHARED = {part = true, data = true, model = true, train = true, lambda = true, arms = true}
M.MAX_RUNS = 64
local ARM = "^[%a][%w_]*$"

-- The attention an arm names: the arm itself, or its attention field.
local function attention(arm)
  local a = type(arm) == "table" and arm.attention or arm
  return type(a) == "string" and a:match(ARM) and a or nil
end

-- The arms of a group configuration, or nil when config is not one.
local function arms(config)
  if type(config) ~= "table" or type(config.model) ~= "table" or type(config.data) ~= "table" or
    type(config.train) ~= "table" then return nil end
  local a = config.arms or {"sa", "xsa"}
  if type(a) ~= "table" or #a < 1 or #a > M.MAX_RUNS then return nil end
  for _, x in ipairs(a) do
    if not attention(x) or (type(x) == "table" and x.lambda ~= nil and type(x.lambda) ~= "number") then return nil end
  end
  return a
end

-- The model of one arm: the group's, with its attention, and its lambda
-- (the arm's, else the group's) unless it is SA, which has none
-- (xsa.study.new_pair: XSA's lambda defaults to 1).
local function arm_model(config, arm)
  local m = {}
  for k, v in pairs(config.model) do m[k] = v end
  m.attention = attention(arm)
  local lua = variants.registered(m.attention)
  if lua then -- a Lua variant: its code's identity, and no lambda (f holds its own)
    if type(arm) == "table" and arm.lambda ~= nil then
      error(string.format("xsa.group: arm %s is written in Lua and takes no lambda (f holds its own)", m.attention), 0)
    end
    m.lambda, m.attention_code, m.attention_version = nil, lua.code, lua.version
  elseif m.attention ~= "sa" then
    m.lambda = type(arm) == "table" and arm.lambda or config.lambda or 1.0
  else
    m.lambda = nil
  end
  return m
end

-- The runs of a group configuration in arm order, {arm =, key = <the run's
-- key, a table>}, given the data files' identity; nil when config is not a
-- group's.
function M.runs(config, identity)
  local a = arms(config)
  if not a then return nil end
  local precision = config.model.precision or "f32"
  local out = {}
  for i, arm in ipairs(a) do
    out[i] = {arm = attention(arm), key = {run = {model = arm_model(config, arm), data = config.data, train = config.train},
      data = identity, precision = precision}}
  end
  return out
end

-- The fields of a group configuration that are its own (what it asks of
-- its runs beyond training: a probe set), or nil when there are none.
local function own(config)
  local t = {}
  for k, v in pairs(config) do if not SHARED[k] then t[k] = v end end
  return next(t) and t or nil
end

-- The key text of a group (nil when config is not a group's): its runs'
-- keys in order and the fields of the configuration that are its own.
function M.key(config, identity)
  local runs = M.runs(config, identity)
  if not runs then return nil end
  local keys = {}
  for i, r in ipairs(runs) do keys[i] = r.key end
  return cache.key({runs = keys, with = own(config)})
end

-- The key text of a group's own fields (M.key's `with`), or nil.
function M.with_key(config)
  local t = own(config)
  return t and cache.key(t) or nil
end

-- The Lua variants (xsa.attention.register) among the arms of a group
-- configuration: name -> {code =, version =}; nil when there are none (or
-- config is not a group's), so that a key made with it is the same as one
-- made without it for every group of built-in variants.
function M.variants(config)
  local a = arms(config)
  local out
  for _, arm in ipairs(a or {}) do
    local lua = variants.registered(attention(arm))
    if lua then
      out = out or {}
      out[lua.name] = {code = lua.code, version = lua.version}
    end
  end
  return out
end

-- The key text of one run of a group (M.runs' key).
function M.run_key(run) return cache.key(run.key) end

-- The layout of a result: "pair" (result.sa, result.xsa: xsa.train.pair),
-- "list" (result.runs in arm order: xsa.train.runs), or nil.
local function layout(arms_, result)
  if type(result) ~= "table" then return nil end
  if type(result.runs) == "table" then return #result.runs == #arms_ and "list" or nil end
  if #arms_ == 2 and arms_[1] == "sa" and arms_[2] == "xsa" and type(result.sa) == "table" and
    type(result.xsa) == "table" then return "pair" end
end

local function copy(t)
  local out = {}
  for k, v in pairs(t) do out[k] = v end
  return setmetatable(out, getmetatable(t))
end

-- A group's result as the record keeps it: entries {arm =, key = <the run's
-- key text>, result = <the run's own record>, model = <its model as the
-- trainer describes it>, probe = <its probe>}, the rest (what the group
-- shares; a pair's improvement_pct stays there: it compares the two), and
-- the layout. nil when the result is not of a group of config's arms.
function M.split(config, result, identity)
  local a = arms(config)
  local lay = a and layout(a, result)
  if not lay then return nil end
  local runs = M.runs(config, identity)
  local rest = copy(result)
  local conf = type(result.config) == "table" and copy(result.config) or nil
  local models = conf and (lay == "pair" and conf or (type(conf.models) == "table" and copy(conf.models)))
  local pk = lay == "pair" and "probe" or "probes" -- a pair's probes by arm, a list's in arm order
  local probe = type(result[pk]) == "table" and copy(result[pk]) or nil
  local entries = {}
  for i, arm in ipairs(a) do
    local slot = lay == "pair" and arm or i
    local e = {arm = runs[i].arm, key = M.run_key(runs[i])}
    if lay == "pair" then e.result, rest[arm] = result[arm], nil else e.result = result.runs[i] end
    if models and models[slot] ~= nil then e.model, models[slot] = models[slot], nil end
    if probe and probe[slot] ~= nil then e.probe, probe[slot] = probe[slot], nil end
    entries[i] = e
  end
  if lay == "list" then
    rest.runs = nil
    if models then conf.models = next(models) and models or nil end
    if probe then probe = next(probe) and probe or nil end
  end
  rest.config = conf
  rest[pk] = probe
  return entries, rest, lay
end

-- Why entry e of a group record is refused (nil: it is fine): its fields,
-- its key that of run i of the group's key, its arm that key's attention.
local function check_entry(e, key, i)
  local what = "run " .. i
  if type(e) ~= "table" or getmetatable(e) then return what .. " is not an object" end
  for k in pairs(e) do
    if k ~= "arm" and k ~= "key" and k ~= "result" and k ~= "model" and k ~= "probe" then return what .. " has a field " .. tostring(k) end
  end
  if type(e.arm) ~= "string" or not e.arm:match(ARM) then return what .. "'s arm is not a name" end
  if type(e.result) ~= "table" then return what .. " has no result" end
  if e.model ~= nil and type(e.model) ~= "table" then return what .. "'s model is not an object" end
  local ok, text = pcall(cache.key, key)
  if not ok or e.key ~= text then return what .. "'s key is not the group key's run " .. i end
  local m = type(key) == "table" and type(key.run) == "table" and type(key.run.model) == "table" and key.run.model
  if not m or m.attention ~= e.arm then return what .. "'s arm is not the attention its key names" end
end

-- The result of a group record (format 2) as the trainer returned it, or
-- nil and why: rec.runs checked against rec.key (its runs' keys, in order,
-- each entry's arm the attention its key names) and put back where the
-- layout keeps them. The record is untrusted: any other shape is refused.
function M.join(rec)
  local lay, entries = rec.layout, rec.runs
  if lay ~= "pair" and lay ~= "list" then return nil, "layout is not pair or list" end
  local n = type(entries) == "table" and #entries or 0
  for k in pairs(type(entries) == "table" and entries or {}) do
    if math.type(k) ~= "integer" or k < 1 or k > n then n = 0 end
  end
  if n < 1 or n > M.MAX_RUNS then return nil, "runs is not a list of 1 to " .. M.MAX_RUNS .. " runs" end
  local ok, key = pcall(require("xsa.core").json.decode, rec.key)
  if not ok or type(key) ~= "table" or type(key.runs) ~= "table" or #key.runs ~= #entries then
    return nil, "its key does not list its runs"
  end
  local r = copy(rec.result)
  if lay == "pair" then
    if #entries ~= 2 or entries[1].arm ~= "sa" or entries[2].arm ~= "xsa" then return nil, "a pair's runs are not sa, xsa" end
  elseif r.runs ~= nil then return nil, "result.runs is in the runs list" end
  local pk = lay == "pair" and "probe" or "probes"
  for _, k in ipairs{"config", pk} do
    if r[k] ~= nil and type(r[k]) ~= "table" then return nil, "result." .. k .. " is not an object" end
  end
  local conf = r.config and copy(r.config)
  local probe = r[pk] and copy(r[pk])
  if lay == "list" and conf and conf.models ~= nil and type(conf.models) ~= "table" then
    return nil, "result.config.models is not a list"
  end
  local list, models = {}, nil
  for i, e in ipairs(entries) do
    local why = check_entry(e, key.runs[i], i)
    if why then return nil, why end
    local slot = lay == "pair" and e.arm or i
    if lay == "pair" then
      if r[e.arm] ~= nil then return nil, "result." .. e.arm .. " is in the runs list" end
      r[e.arm] = e.result
    else list[i] = e.result end
    if e.model ~= nil then
      conf = conf or {}
      models = lay == "pair" and conf or models or (type(conf.models) == "table" and copy(conf.models)) or {}
      if models[slot] ~= nil then return nil, "result.config holds run " .. i .. "'s model" end
      models[slot] = e.model
    end
    if e.probe ~= nil then
      probe = probe or {}
      if probe[slot] ~= nil then return nil, "result." .. pk .. " holds run " .. i .. "'s probe" end
      probe[slot] = e.probe
    end
  end
  if lay == "list" then
    r.runs = list
    if models then conf.models = models end
  end
  r.config, r[pk] = conf, probe
  return r
end

return M
