-- lambda.lua: the runs of part 6's lambda sweep that other parts have made.
-- XSA(1) and XSA(0) (= SA, to the bit) of a seed are part 3's pair, and
-- their probes part 5's: when both are recorded, part 6 reads them instead
-- of training them again, and its other lambdas train against part 3's SA.
--
--   local L = dofile(dir .. "lambda.lua")
--   local units = L.units(ex, {0, 0.5, 1}, 8, probe_data, run)   -- run(seed, lambda, first, reuse)
local xsa = xsa or require "xsa"
xsa.sys.library_file()
local record, study, E = xsa.record, xsa.study, xsa.experiment

local M = {}

-- Part 3's pair of `seed` at ex's flags and part 5's probes of its models
-- (probe_batches batches of probe_data), from their records: {pair = <part
-- 3's result>, probes = <part 5's>}, or nil when either is missing or
-- --no-cache (a run is never trained twice for two parts).
function M.part3_with_probes(ex, seed, probe_batches, probe_data)
  local opts = ex.opts
  if not opts.results or (opts.no_cache and not opts.from_records) then return nil end
  local c3 = E.pair_config(opts, "part3", {seed = seed, lambda = 1.0})
  local c5 = {part = "part5", part3 = c3, probe_batches = probe_batches, probe = probe_data}
  local n3, n5 = E.pair_name("part3", c3), "part5-" .. E.seed_tag(c3)
  local r3 = record.find(opts.results, "part3", n3, c3, function(r) return type(r.sa.step_loss) == "table", "no step_loss" end)
  local r5 = record.find(opts.results, "part5", n5, c5, function(r)
    return type(r.models.sa) == "table" and type(r.models.xsa) == "table", "no probes" end)
  if not (r3[1] and r5[1]) then return nil end
  ex:note_record(n3, r3)
  ex:note_record(n5, r5)
  return {pair = r3[1].result, probes = r5[1].result}
end

-- The units of a lambda sweep: per seed, one per lambda, whose run is
-- run(seed, lambda, first, reuse). With part 3's pair and part 5's probes
-- of the seed recorded (reuse, M.part3_with_probes) they are independent;
-- else the others need the first lambda's (first: its result).
function M.units(ex, lambdas, probe_batches, probe_data, run)
  local units = {}
  for _, seed in ipairs(ex.seeds) do
    local first = string.format("seed %d lambda %g", seed, lambdas[1])
    ex.unit_seed = seed -- the records it reads are this seed's (ex:note_record)
    local reuse = M.part3_with_probes(ex, seed, probe_batches, probe_data)
    ex.unit_seed = nil
    for i, lam in ipairs(lambdas) do
      local dep = not reuse and i > 1 and {first} or nil
      units[#units + 1] = {key = string.format("seed %d lambda %g", seed, lam), seed = seed, after = dep,
        run = function(d) return run(seed, lam, dep and d[first], reuse) end}
    end
  end
  return units
end

-- A lambda sweep's run from part 3's pair and part 5's probes of it
-- (M.part3_with_probes): at lambda 1 their XSA; at lambda 0 their SA, since
-- XSA(0) computes what SA computes (z = y - 0 * projection: the same bits,
-- tests/test_train.lua). Other lambdas: nil, and `baseline` is the SA run
-- to train against (xsa.train.pair's baseline, with its probe).
function M.from_part3(reuse, lam)
  local p3, p5 = reuse.pair, reuse.probes
  local baseline = {sa = p3.sa, probe = {sa = p5.models.sa}}
  if lam ~= 0 and lam ~= 1 then return nil, baseline end
  local x = lam == 1 and p3.xsa or p3.sa
  return {sa = p3.sa, xsa = x, steps = p3.steps, improvement_pct = lam == 1 and p3.improvement_pct or 0, elapsed_s = 0, checkpoints = {},
    probe = {batches = p5.probe_batches, sa = p5.models.sa, xsa = lam == 1 and p5.models.xsa or p5.models.sa},
    reused = lam == 1 and "part 3's pair, part 5's probes" or "part 3's SA, part 5's probe"}, baseline
end

-- The `after` of a paired run that probes both trained models on
-- n_batches of the probe set (probe_data); with `baseline` (its seed's SA
-- run, reused) the SA probe and checkpoint are the baseline's.
function M.probe_after(probe_data, n_batches, baseline)
  return function(res, m)
    res.xsa.step_loss = nil
    local _, pv = study.loaders(probe_data)
    local n = math.min(n_batches, pv:num_batches())
    res.probe = {batches = n, xsa = study.probe(m.xsa, pv, n), sa = baseline and baseline.probe.sa or study.probe(m.sa, pv, n)}
    if baseline then res.checkpoints.sa = baseline.checkpoints and baseline.checkpoints.sa end
    pv:free()
  end
end

return M
