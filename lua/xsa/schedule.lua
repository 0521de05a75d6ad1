-- xsa.schedule: runs a list of units of work, some needing others' results,
-- in one process, in child processes or over MPI ranks; the results come
-- back in unit order whatever ran where.
--
--   local units = {
--     {key = "seed 0 sa", run = function() return train_sa(0) end},
--     {key = "seed 0 xsa", after = {"seed 0 sa"}, run = function(d) return train_xsa(0, d["seed 0 sa"]) end},
--   }
--   local results = xsa.schedule.serial(units)      -- results[i] is units[i]'s
--
-- A unit is {key = unique string, after = {keys it needs} (optional),
-- run = function(deps) -> result}, where deps maps each key of `after` to
-- that unit's result. A unit may need only units listed before it, so the
-- list order is always a valid serial order. levels() groups the units into
-- waves (a unit's wave is one past its latest dependency's): every unit of
-- a wave can run at the same time once the earlier waves are done. A
-- distributed run (ranks(), or processes started by the caller per wave)
-- computes each unit once somewhere; the caller then runs serial() where
-- every unit is a cheap read of what was stored (a cache or a record).
-- Non-goals: storing results (the units do: xsa.cache, xsa.record), retrying,
-- load balancing beyond round-robin.
local M = {}

-- Checks the list; returns the index of each key. Errors name the unit.
function M.check(units)
  assert(type(units) == "table", "xsa.schedule: a list of units is needed")
  local index = {}
  for i, u in ipairs(units) do
    if type(u) ~= "table" or type(u.key) ~= "string" or type(u.run) ~= "function" then
      error(string.format("xsa.schedule: unit %d needs a string key and a run function", i), 2)
    end
    if index[u.key] then error(string.format("xsa.schedule: two units have the key '%s'", u.key), 2) end
    for _, k in ipairs(u.after or {}) do
      if not index[k] then
        error(string.format("xsa.schedule: unit '%s' needs '%s', which is not listed before it", u.key, tostring(k)), 2)
      end
    end
    index[u.key] = i
  end
  return index
end

-- The waves: a list of lists of unit indices, in unit order within each.
function M.levels(units)
  local index = M.check(units)
  local level, waves = {}, {}
  for i, u in ipairs(units) do
    local l = 1
    for _, k in ipairs(u.after or {}) do l = math.max(l, level[index[k]] + 1) end
    level[i] = l
    waves[l] = waves[l] or {}
    waves[l][#waves[l] + 1] = i
  end
  return waves
end

-- How errors are handled (o, optional): o.handler, the message handler of
-- the xpcall around each unit (a traceback, say); o.skip(i, err): true to
-- leave unit i (and every unit that needs it) out instead of raising err.
local SKIPPED = {}

local function run_one(units, index, i, done, o)
  if done[i] ~= nil then return done[i] end
  local u, deps = units[i], {}
  for _, k in ipairs(u.after or {}) do
    local r = run_one(units, index, index[k], done, o)
    if r == SKIPPED then done[i] = SKIPPED; return SKIPPED end
    deps[k] = r
  end
  local ok, r = xpcall(u.run, o.handler or function(e) return e end, deps)
  if not ok then
    if o.skip and o.skip(i, r) then done[i] = SKIPPED; return SKIPPED end
    error(r, 0)
  end
  done[i] = r
  return r
end

-- Unit i, after the units it needs, in this process (a worker's share).
function M.one(units, i, o)
  local r = run_one(units, M.check(units), i, {}, o or {})
  if r ~= SKIPPED then return r end
end

-- Every unit in order, in this process. Returns the results by index (nil
-- for a unit left out by o.skip) and the list of indices left out.
function M.serial(units, o)
  local index, done, out, gone = M.check(units), {}, {}, {}
  for i = 1, #units do
    local r = run_one(units, index, i, done, o or {})
    if r == SKIPPED then gone[#gone + 1] = i else out[i] = r end
  end
  return out, gone
end

-- Over the ranks of an MPI job (comm: xsa.mpi): wave by wave, the j-th unit
-- of a wave on rank (j - 1) % size, then a barrier, so that a wave starts
-- when every unit it needs is stored. o.fail(i, err) ends the job (it must
-- not return: MPI_Abort); o.after_wave() runs on every rank before each
-- barrier; o.handler as for serial.
function M.ranks(units, comm, o)
  local index = M.check(units)
  local size, rank = comm.size(), comm.rank()
  for _, wave in ipairs(M.levels(units)) do
    local done = {}
    for j, i in ipairs(wave) do
      if (j - 1) % size == rank then
        local ok, err = pcall(run_one, units, index, i, done, {handler = o.handler})
        if not ok then o.fail(i, err) end
      end
    end
    io.stdout:flush()
    if o.after_wave then o.after_wave() end
    comm.barrier()
  end
end

-- In child processes, wave by wave: start(wave) runs the units of one wave
-- (a list of indices) and returns only when they are all done; an error
-- from it ends the schedule.
function M.processes(units, start)
  for _, wave in ipairs(M.levels(units)) do start(wave) end
end

return M
