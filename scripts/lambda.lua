-- lambda.lua: what part 6's lambda sweep takes from other parts. The sweep
-- is one group per seed, SA and XSA at each lambda (XSA(0) computes what SA
-- computes, to the bit: its SA), trained on the same batches; a run another
-- part trained (part 3's SA and XSA(1)) is found in that part's record by
-- its key (xsa.reuse) and not trained again. What the records of runs do
-- not hold is their probes of part 5's probe set, which part 5 records of
-- part 3's models: those are read here.
--
--   local L = dofile(dir .. "lambda.lua")
--   local probes = L.part5_probes(ex, seed, 8, probe_data)  -- run key -> probe
--   for i, x in ipairs(L.sweep(ex, seed, probes)) do print(ex.opts.lambdas[i], x.improvement_pct) end
local xsa = xsa or require "xsa"
xsa.sys.library_file()
local record, study, E, group = xsa.record, xsa.study, xsa.experiment, xsa.group

local M = {}

-- The arms of a sweep over `lambdas`: SA, then XSA at each lambda but 0,
-- in order; and the arm each lambda reads (at[i]; lambda 0: SA's).
function M.arms(lambdas)
  local arms, at = {"sa"}, {}
  for i, lam in ipairs(lambdas) do
    if lam == 0 then at[i] = 1 else arms[#arms + 1], at[i] = {attention = "xsa", lambda = lam}, #arms + 1 end
  end
  return arms, at
end

-- Part 5's probes of part 3's models for `seed` at ex's flags (probe_batches
-- batches of probe_data): run key text -> probe, with both records noted;
-- {} when either record is missing or --no-cache (not --from-records).
function M.part5_probes(ex, seed, probe_batches, probe_data)
  local opts = ex.opts
  if not opts.results or (opts.no_cache and not opts.from_records) then return {} end
  local c3 = E.pair_config(opts, "part3", {seed = seed, lambda = 1.0})
  local c5 = {part = "part5", part3 = c3, probe_batches = probe_batches, probe = probe_data}
  local n3, n5 = E.pair_name("part3", c3), "part5-" .. E.seed_tag(c3)
  local r3 = record.find(opts.results, "part3", n3, c3, function(r) return type(r.sa.step_loss) == "table", "no step_loss" end)
  local r5 = record.find(opts.results, "part5", n5, c5, function(r)
    return type(r.models.sa) == "table" and type(r.models.xsa) == "table", "no probes" end)
  if not (r3[1] and r5[1]) then return {} end
  ex:note_record(n3, r3)
  ex:note_record(n5, r5)
  local out, models = {}, r5[1].result.models
  for _, run in ipairs(group.runs(c3, record.data_identity())) do out[group.run_key(run)] = models[run.arm] end
  return out
end

-- Whether a run found in another record serves the sweep (ex:group's
-- accept): with its probe of this probe set, its own group's or part 5's
-- (probes: M.part5_probes); without one it is trained again.
function M.accept(probes)
  return function(_, hit, with, key)
    if hit.probe ~= nil and hit.with == with then return hit end
    if probes[key] == nil then return nil end
    local h = {}
    for k, v in pairs(hit) do h[k] = v end
    h.probe = probes[key]
    return h
  end
end

-- The group's after(): every trained model probed on n_batches of the
-- probe set (a run found elsewhere keeps its probe). Step losses stay: a
-- later sweep at other lambdas trains beside these runs (xsa.train.runs'
-- baseline) instead of training them again.
function M.probe_after(probe_data, n_batches)
  return function(res, m)
    local _, pv = study.loaders(probe_data)
    local n = math.min(n_batches, pv:num_batches())
    res.probes = {}
    for i, model in ipairs(m.models) do
      res.probes[i] = m.reused[i] and m.reused[i].probe or study.probe(model, pv, n)
    end
    pv:free()
  end
end

-- One seed of the sweep at ex's flags: SA and XSA at every lambda, one
-- group (runs found elsewhere not trained again), probed; per lambda, what
-- part 6's tables and figures read. probes: M.part5_probes.
function M.sweep(ex, seed, probes)
  local o, probe_data = ex.opts, study.probe_data_config(ex.opts, ex.opts.seq_len)
  local config = ex:pair_config{seed = seed, probe_batches = o.probe_batches, probe = probe_data}
  local at
  config.arms, at = M.arms(o.lambdas)
  local r, status, entry = ex:group{name = "part6-" .. xsa.experiment.seed_tag(config), config = config,
    label = string.format("part6 seed %d", seed), checkpoints = true, accept = M.accept(probes),
    after = M.probe_after(probe_data, o.probe_batches),
    check = function(res) return #(res.probes or {}) == #config.arms, "no probe" end}
  local sa, out, ck = r.runs[1], {}, r.checkpoints
  local cos = function(j, key) return study.layer_mean(r.probes[j], key or "post_cos_pos1") end
  for i, lam in ipairs(o.lambdas) do
    local j = at[i]
    local x = r.runs[j] -- its checkpoints: SA's, and this lambda's (files named by arm: "xsa-l0.5", ex:group)
    local checkpoints = ck and {sa = ck.sa, xsa = ck[j == 1 and "sa" or string.format("xsa-l%g", lam)]}
    out[i] = {seed = seed, sa_val = sa.final_val, xsa_val = x.final_val, steps = r.steps, sa_curve = sa.val, xsa_curve = x.val,
      improvement_pct = j == 1 and 0 or xsa.train.improvement(sa.final_val, x.final_val), -- the mean val loss (make results)
      xsa_post_cos = cos(j), sa_post_cos = cos(1), xsa_post_cos_all = cos(j, "post_cos"), elapsed_s = r.elapsed_s,
      checkpoints = checkpoints, cache = status, entry = entry}
  end
  return out
end

return M
