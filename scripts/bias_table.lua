-- bias_table.lua: part 5's table of the self-value bias before and after
-- the projection, over seeds (the study's, not installed).
--
--   local rows, means = dofile(dir .. "bias_table.lua").rows(per_seed, models, L)
local xsa = xsa or require "xsa"
xsa.sys.library_file()
local study, numbers = xsa.study, xsa.numbers

local M = {}

-- 100 (|pre| - |post|) / |pre|: how much of the self-value bias the
-- projection removed, or nil.
local function removed(pre, post)
  if not (numbers.finite(pre) and numbers.finite(post) and pre ~= 0) then return nil end
  return 100 * (math.abs(pre) - math.abs(post)) / math.abs(pre)
end

-- One model's rows of bias_rows: per layer, then the mean over layers.
local function bias_model_rows(per_seed, m, L, rows)
  for l = 1, L + 1 do
    local pre, post, rem = {}, {}, {}
    for i, x in ipairs(per_seed) do
      local probe = x.result.models[m.key]
      pre[i] = l <= L and probe[l].pre_cos_pos1 or study.layer_mean(probe, "pre_cos_pos1")
      post[i] = l <= L and probe[l].post_cos_pos1 or study.layer_mean(probe, "post_cos_pos1")
      rem[i] = removed(pre[i], post[i])
    end
    local cp, cq, cr = study.mean_ci(pre), study.mean_ci(post), study.mean_ci(rem)
    rows[#rows + 1] = {m.label, l <= L and tostring(l) or "mean", study.ci_text(cp, "%.4f"), study.ci_text(cq, "%.4f"), study.ci_text(cr, "%.1f")}
    if l > L then
      local all = function(key) return study.collect(per_seed, function(x) return study.layer_mean(x.result.models[m.key], key) end) end
      return {model = m.key, pre = cp.mean, post = cq.mean, removed_pct = cr.mean, pre_ci = {cp.lo, cp.hi},
        post_ci = {cq.lo, cq.hi}, removed_ci = {cr.lo, cr.hi}, positions = ">= 1",
        pre_all = xsa.stats.mean(all("pre_cos")), post_all = xsa.stats.mean(all("post_cos"))}
    end
  end
end

-- The pre- and post-projection table of probes over seeds (positions >= 1):
-- per model ({key =, label =}) and layer, and the mean over layers, the mean
-- and 95% t interval of cos(y_i, v_i), cos(z_i, v_i) and the bias removed.
-- per_seed[i].result.models[key] is seed i's probe of a model (L layers).
-- Returns the rows and, per model, its means over layers.
function M.rows(per_seed, models, L)
  local rows, means = {}, {}
  for _, m in ipairs(models) do means[#means + 1] = bias_model_rows(per_seed, m, L, rows) end
  return rows, means
end

return M
