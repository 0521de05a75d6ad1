-- xsa.reuse: a run found by its own key in any record of a results
-- folder, whichever group, part or machine trained it. A group's record
-- keeps each run under the key of what determines its numbers (xsa.group:
-- model, data, training, data files, precision; not the part, not the
-- group's name), so a run another part trained is an ordinary cache hit:
-- a lambda sweep's XSA(1) is part 3's XSA when their keys are equal.
--
--   local hit = xsa.reuse.find("results", xsa.group.run_key(run))
--   if hit then print(hit.result.final_val, hit.record.file) end
--
-- A hit: {key = <the run's key text>, result = <the run's record as the
-- trainer gave it>, model =,
-- probe = <its probe, if its group probed it>, with = <the key text of
-- what else its group's configuration asked (a probe set), or nil>,
-- record = <the record it is in>}. Of several records of one run the
-- oldest is chosen (xsa.record.older). A run copied into a record
-- from another (a reused baseline) is not a hit: its own record is.
-- The index of a folder is read once per process (every record of every
-- folder, each checked as xsa.record.all checks it: a refused one raises,
-- naming its file) and forgotten when a record is written (M.forget).
-- Non-goals: training, the runs a group still lacks (xsa.runs).
local record = require "xsa.record"
local group = require "xsa.group"

local M = {}

local indexes = {} -- results folder -> {run key text -> hits, oldest first}

local function older(a, b)
  if a.record ~= b.record then return record.older(a.record, b.record) end
  return a.slot < b.slot
end

-- The hits of one group record: its runs in arm order, with what its
-- result keeps of each where the trainer put it (a pair: result.sa, .xsa;
-- a list: result.runs[i]).
local function hits_of(rec, add)
  local with = group.with_key(rec.config)
  local r, pair = rec.result, rec.layout == "pair"
  local conf = type(r.config) == "table" and r.config or {}
  local probes = (pair and r.probe or r.probes) or {}
  for i, e in ipairs(rec.runs) do
    local slot = pair and e.arm or i
    local res = pair and r[e.arm] or r.runs[i]
    if type(res) == "table" and res.reused == nil then
      add(e.key, {key = e.key, result = res, model = pair and conf[slot] or (conf.models or {})[slot],
        probe = probes[slot], with = with, record = rec, slot = i})
    end
  end
end

local function build(dir)
  local idx = {}
  local function add(k, hit)
    idx[k] = idx[k] or {}
    table.insert(idx[k], hit)
  end
  for _, rec in ipairs(record.all(dir)) do
    if rec.format == record.GROUP_FORMAT then hits_of(rec, add) end
  end
  for _, list in pairs(idx) do table.sort(list, older) end
  return idx
end

-- The hits of the run keyed `key` (xsa.group.run_key) in dir's records,
-- the chosen (oldest) first; {} when there are none.
function M.all(dir, key)
  indexes[dir] = indexes[dir] or build(dir)
  return indexes[dir][key] or {}
end

-- The chosen hit of the run keyed `key`, or nil.
function M.find(dir, key) return M.all(dir, key)[1] end

-- Forgets what was read of dir (a record was written there).
function M.forget(dir) indexes[dir] = nil end

return M
