-- xsa.store: where an experiment's runs are kept, the cache entry of this
-- machine (xsa.cache) and the record that travels with the checkout
-- (xsa.record), and what the experiment says of the records it read.
--
--   local f = xsa.store.files("cache", "mine-300steps-seed0", xsa.store.cache_config(config))
--   print(f.entry, f.checkpoints.sa, f.state)
--
-- A finished run is looked up in the records before the cache; a run
-- trained now, or a cache entry without a record, gets a record. The
-- methods (M.methods) are an experiment's (xsa.experiment installs them):
-- ex:cached, ex:recorded, ex:no_record, ex:record, ex:note_record,
-- ex:note_reused, ex:read_from, ex:refresh,
-- ex:timing, ex:measured_with, ex:measured_text.
-- Non-goals: the training (xsa.pair, the units' own run functions), where
-- runs execute (xsa.executor).
local options = require "xsa.options"
local numbers = require "xsa.numbers"
local cache = require "xsa.cache"
local record = require "xsa.record"
local group = require "xsa.group"
local reuse = require "xsa.reuse"

local M = {}

local core = require "xsa.core" -- the C functions and libraries

-- What a cache entry, its checkpoints and its saved state are keyed by:
-- the configuration and the data files by content (xsa.record's identity:
-- CRC-64 and size of the corpus and the tokenizer files), so that another
-- corpus or tokenizer at the same path is a miss, never a stale hit. An
-- entry written before the data was part of the key has another name: a
-- miss, computed again. A group with arms written in Lua adds their code's
-- identity (xsa.group.variants; nothing for built-in arms): an edited
-- function is a miss.
function M.cache_config(config)
  return {config = config, data = record.data_identity(), attention = group.variants(config)}
end

-- The seed part of a cache name: "seed3" (weights and batch order from
-- seed 3), or "init3-data0" when they differ (--data-seed, --init-seed).
function M.seed_tag(config)
  local d, m = config.data and config.data.seed, config.model and config.model.seed
  if d == m then return string.format("seed%d", m or 0) end
  return string.format("init%d-data%d", m or 0, d or 0)
end

-- Files of a cached run: the entry DIR/NAME-HASH.json; checkpoints
-- DIR/PREFIX-KIND-REST-HASH<suffix>.safetensors where NAME = PREFIX-REST
-- ("mine-300steps" -> mine-sa-300steps-HASH.safetensors); its saved state
-- (xsa.checkpoint's files).
function M.files(dir, name, config)
  local base = cache.path(dir, name, config, "")
  local hash = base:match("%-(%x+)$")
  local prefix, rest = name:match("^([^-]+)%-(.+)$")
  local function ck(kind, suffix)
    local stem = prefix and string.format("%s-%s-%s", prefix, kind, rest) or string.format("%s-%s", name, kind)
    return string.format("%s/%s-%s%s.safetensors", dir, stem, hash, suffix or "")
  end
  local function state_model(kind, slot) return string.format("%s.resume-%s-%s.safetensors", base, kind, slot) end
  return {base = base, entry = base .. ".json", checkpoint = ck,
    checkpoints = {init = ck("init"), sa = ck("sa"), xsa = ck("xsa")},
    state = base .. ".resume.json", state_model = state_model,
    state_files = {base .. ".resume.json", state_model("sa", "a"), state_model("xsa", "a"),
      state_model("sa", "b"), state_model("xsa", "b")}}
end

-- Raised (ex:run catches it) under --from-records for a run that has no
-- record: that seed is left out and named.
M.NO_RECORD = setmetatable({}, {__tostring = function()
  return "xsa.experiment: --from-records: no runs of this configuration have records (train them first)"
end})

local Ex = {}
M.methods = Ex

-- The folder of a run's records: the experiment its configuration names
-- (a run of another experiment's configuration is that one's), else this one.
local function record_part(self, config)
  return type(config) == "table" and type(config.part) == "string" and config.part or self.name
end

-- Whether --no-cache means "recompute" for this entry. In one process:
-- always. When the runs are shared out, each run once per command: under
-- mpirun an entry any rank computed in this command (the executor shares
-- the list) is a hit; after --jobs workers, one written since the command
-- started. (saved_at has whole seconds: there, an entry of an earlier
-- command finished in the second this one started would count as fresh.)
function Ex:refresh(name, config)
  if not self.opts.no_cache then return false end
  if not self.shared_out then return true end
  local path = cache.path(self.opts.out, name, M.cache_config(config))
  self.computed = self.computed or {}
  if self.computed[path] then return false end
  self.computed[path] = true -- the caller computes it now
  if core.mpi and core.mpi.size() > 1 then return true end
  local j = core.json.read_file(path)
  local since = os.date("!%Y-%m-%dT%H:%M:%SZ", self.t0)
  return not (type(j) == "table" and type(j.saved_at) == "string" and j.saved_at >= since)
end

-- The chosen record of a run, or nil (none; --no-cache: not looked at).
-- Under --from-records a run without one raises NO_RECORD, unless `later`
-- (the caller looks further, then calls ex:no_record).
function Ex:recorded(name, config, check, label, later)
  local opts = self.opts
  if not opts.results or (opts.no_cache and not opts.from_records) then return nil end
  local recs = record.find(opts.results, record_part(self, config), name, config, check)
  local rec = recs[1]
  if rec then
    self:read_from(name, recs)
    io.stderr:write(string.format("record: %s (%s, %s on %s)\n", label or name, rec.file, rec.provenance.date,
      tostring(rec.provenance.cpu)))
    return rec
  end
  if opts.from_records and not later then self:no_record(label or name) end
end

-- --from-records: the run `label` has no record; its seed is left out.
function Ex:no_record(label)
  self.missing = self.missing or {}
  self.missing[#self.missing + 1] = label
  error(M.NO_RECORD, 0)
end

-- What the summary says of a run found in another group's record
-- (xsa.reuse's hit): that record, once however many runs came from it,
-- with the other records of its group (the run's other hits in records of
-- the same folder, name and key; not found again through the group's
-- configuration, whose key may hold the code of a Lua variant since edited).
function Ex:note_reused(hit)
  local rec = hit.record
  for _, u in ipairs(self.records_used or {}) do
    if u.folder == rec.folder and u.file == rec.file then return end
  end
  local recs = {rec}
  for _, h in ipairs(reuse.all(self.opts.results, hit.key)) do
    local r = h.record
    if r ~= rec and r.folder == rec.folder and r.name == rec.name and r.key == rec.key then recs[#recs + 1] = r end
  end
  self:read_from(rec.name, recs)
end

-- A run's numbers come from recs (the chosen first): the summary names
-- them, the figures their kernel, ex:timing their provenance.
function Ex:read_from(name, recs)
  self:note_record(name, recs)
  self:measured_with(recs[1].provenance)
  self.record_provenance = self.record_provenance or {}
  self.record_provenance[recs[1].path] = recs[1].provenance
end

-- What the summary says of the records a run came from (the published
-- files name them): the chosen one, and how the others of its key differ.
function Ex:note_record(name, recs)
  local rec = recs[1]
  local diffs = {}
  for _, d in ipairs(record.differences(recs)) do
    if not d.field:match("_s$") and not d.field:match("^provenance") then diffs[#diffs + 1] = d end
  end
  self.records_used = self.records_used or {}
  local kernels = {}
  for i, r in ipairs(recs) do kernels[i] = string.format("%s, %s", record.blas_text(r.provenance), r.provenance.threads) end
  self.records_used[#self.records_used + 1] = {name = name, file = rec.file, folder = rec.path:match("([^/]+)/[^/]+$"),
    provenance = rec.provenance,
    elapsed_s = rec.result.elapsed_s, cpu_s = rec.result.cpu_s, others = #recs - 1, differences = diffs, kernels = kernels,
    seed = self.unit_seed}
end

-- Writes the record of a finished run unless this run was read from one or
-- another record of its key exists. status: the cache's ("hit": an entry
-- trained earlier; otherwise trained now, which always gets a record of its
-- own, beside any other: --no-cache).
function Ex:record(name, config, r, status)
  local opts = self.opts
  if type(r) == "table" then self:measured_with(r.provenance or record.provenance()) end
  if not opts.results or type(r) ~= "table" then return end
  local part = record_part(self, config)
  if status == "hit" and #record.find(opts.results, part, name, config) > 0 then return end
  local prov = r.provenance
  if type(prov) ~= "table" then -- a cache entry from before records: what is known
    prov = record.provenance()
    prov.commit, prov.source = "unknown", "a cache entry of this machine written before records existed"
  end
  local copy = {}
  for k, v in pairs(r) do copy[k] = v end
  copy.provenance = nil
  local path = record.write(opts.results, part, name, config, copy, prov)
  reuse.forget(opts.results)
  io.stderr:write("record written: ", path, "\n")
end

-- Where the training time of runs ({r = result, cache = status, entry =},
-- as the units return them) was spent, in words: a run read from a record
-- or the cache was trained earlier, maybe elsewhere, and says so ("recorded
-- 2026-12-01 on AMD EPYC: 1820 s of training"); one trained now, "trained
-- now: 12.3 s". `what` names a run ("paired run").
function Ex:timing(runs, what)
  local groups, order = {}, {"record", "hit", "now"}
  for _, x in ipairs(runs) do
    local kind = (x.cache == "record" or x.cache == "hit") and x.cache or "now"
    local prov = kind == "record" and (self.record_provenance or {})[x.entry] or (x.r and x.r.provenance)
    local g = groups[kind] or {n = 0, s = 0, dates = {}, cpus = {}}
    groups[kind] = g
    g.n = g.n + 1
    g.s = g.s + (numbers.finite(x.r and x.r.elapsed_s) and x.r.elapsed_s or 0)
    if type(prov) == "table" then
      local day = tostring(prov.date or "?"):match("^(%d+%-%d+%-%d+)") or "?"
      g.dates[day], g.cpus[tostring(prov.cpu or "?")] = true, true
    end
  end
  local function list(set, sep)
    local t = {}
    for k in pairs(set) do t[#t + 1] = k end
    table.sort(t)
    if sep then return #t > 1 and (t[1] .. sep .. t[#t]) or t[1] or "?" end
    return #t > 0 and table.concat(t, ", ") or "?"
  end
  local out = {}
  for _, kind in ipairs(order) do
    local g = groups[kind]
    if g then
      local runs_text = g.n > 1 and string.format(" over %d %ss", g.n, what or "run") or ""
      out[#out + 1] = kind == "now" and string.format("trained now: %.1f s%s", g.s, runs_text) or
        string.format("%s %s on %s: %.0f s of training%s", kind == "record" and "recorded" or "cached",
          list(g.dates, " to "), list(g.cpus), g.s, runs_text)
    end
  end
  return table.concat(out, "; ")
end

-- The OpenBLAS kernel and thread count of every run this experiment's
-- numbers come from (a record's provenance, or this machine for a run
-- computed here): the figures name them (ex:save_figure).
function Ex:measured_with(prov)
  if type(prov) ~= "table" then return end
  local k = string.format("%s, %s thread%s", tostring(prov.blas), tostring(prov.threads), prov.threads == 1 and "" or "s")
  self.blas_seen = self.blas_seen or {}
  self.blas_seen[k] = (self.blas_seen[k] or 0) + 1
end

-- "Measured with the OpenBLAS Haswell kernel, 1 thread" (with each one's
-- share of the runs when they differ); nil when nothing was measured.
function Ex:measured_text()
  local keys, seen = {}, self.blas_seen or {}
  for k in pairs(seen) do keys[#keys + 1] = k end
  if #keys == 0 then return nil end
  table.sort(keys)
  if #keys == 1 then return "Measured with the OpenBLAS " .. keys[1]:gsub(",", " kernel,", 1) end
  for i, k in ipairs(keys) do keys[i] = string.format("%s (%d run%s)", k, seen[k], seen[k] == 1 and "" or "s") end
  return "Measured with the OpenBLAS kernels " .. table.concat(keys, "; ")
end

-- A cached result: compute(config) on a miss (--no-cache: always), the
-- record first. o: name (default NAME), config (default ex.config),
-- check(r), label (messages). Returns result, status ("record", "hit",
-- "miss", "refresh", "corrupt"), entry path.
function Ex:cached(compute, o)
  o = options.check("ex:cached", o, {"name", "config", "check", "label"})
  local name = o.name or self.name
  local config = o.config or self.config
  local rec = self:recorded(name, config, o.check, o.label or name)
  if rec then return rec.result, "record", rec.path end
  local r, status, path = cache.fetch(self.opts.out, name, M.cache_config(config), function()
    local res = compute(config)
    if type(res) == "table" then res.provenance = record.provenance() end
    return res
  end, {no_cache = self:refresh(name, config), check = o.check, label = o.label or name})
  self:record(name, config, r, status)
  return r, status, path
end

return M
