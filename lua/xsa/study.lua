-- xsa.study: what the experiment scripts (scripts/part*.lua) share: the
-- common flags, where results and figures go, data loaders and models of
-- the study's configuration, markdown tables, the per-part summaries the
-- report reads, and a main() wrapper that turns Ctrl-C into a clean exit.
--
-- Layout of outputs (defaults; --out and --plots change them):
--   cache/            results (JSON, cache entries), checkpoints (safetensors)
--   cache/summary/    partN.json: the latest run of each part, for the report
--   plots/            figures (PNG) with their .dat and .gp files
-- Non-goals: anything a user would call from the REPL (see xsa.train, xsa.plot).
local M = {}

local sys = require "xsa.sys"
local numbers = require "xsa.numbers"

local core = require "xsa.core" -- the C functions and libraries

-- The flags every training script has (defaults per part in `d`), plus
-- `extra` ones, minus the names in `skip`. The training defaults are
-- xsa.train's (TD), written once there.
function M.options(d, extra, skip)
  local TD = require("xsa.train").DEFAULTS
  local o = {
    {"steps", "int", d.steps or TD.steps, "training steps per model", min = 1},
    {"seq-len", "int", d.seq_len or 64, "tokens per training window (model context)", min = 1, max = 1 << 20},
    {"batch", "int", d.batch or 16, "sequences per batch", min = 1},
    {"lr", "number", d.lr or TD.lr, "AdamW learning rate", check = function(v) return v > 0, "must be > 0" end},
    {"weight-decay", "number", d.weight_decay or TD.weight_decay, "AdamW weight decay", min = 0},
    {"max-tokens", "int", d.max_tokens or 500000, "TinyStories tokens used (from the start of the text)", min = 1},
    {"val-frac", "number", d.val_frac or 0.1, "fraction of the windows held out for validation",
      check = function(v) return v > 0 and v < 1, "must be between 0 and 1" end},
    {"eval-every", "int", d.eval_every or TD.eval_every, "steps between evaluations", min = 1},
    {"eval-batches", "int", d.eval_batches or TD.eval_batches, "val batches per intermediate evaluation (final: all)", min = 1},
    {"lambda", "number", d.lambda or 1.0, "XSA strength (1 = full projection)"},
    {"n-layer", "int", d.n_layer or 2, "transformer blocks", min = 1, max = 1024},
    {"d-model", "int", d.d_model or 128, "model width", min = 1, max = 1 << 16},
    {"n-head", "int", d.n_head or 2, "attention heads", min = 1, max = 1 << 16,
      after = function(o)
        return not (o.d_model and o.n_head) or o.d_model % o.n_head == 0, "--d-model must be a multiple of --n-head"
      end},
    {"seed", "int", d.seed or 0, "seed of the initial weights and of the batch order (one paired run)", min = 0},
    {"seeds", "string", nil, "seed replication: N (seeds 0..N-1) or a list (3,7,11); each seed an independent " ..
      "paired run, summarised with a 95% interval", check = function(v) return M.parse_seeds(v) ~= nil, select(2, M.parse_seeds(v)) end},
    {"data-seed", "int", nil, "hold the batch order at this seed while the initial weights follow each seed", min = 0},
    {"init-seed", "int", nil, "hold the initial weights at this seed while the batch order follows each seed", min = 0},
    {"jobs", "int", 1, "seeds trained side by side, each in its own process with 1 BLAS thread (--seeds)",
      check = function(v) return v >= 1, "must be at least 1" end},
    {"worker", "bool", false, "internal (--jobs): run the one run of --unit, then exit"},
    {"unit", "int", nil, "internal (--jobs, with --worker): the index of the run", min = 1},
    {"data-parallel", "bool", false, "under mpirun: every rank trains each pair on its rows of every batch " ..
      "(gradients averaged over the ranks), instead of taking runs of its own"},
    {"threads", "int", d.threads or 0, "BLAS/engine threads (0: leave as is)", min = 0, max = 1024},
    {"precision", "string", "f32", "f32, or bf16: the lm_head's products bf16 through oneDNN (opt-in)",
      check = function(v) return v == "f32" or v == "bf16", "expects f32 or bf16" end},
    {"out", "string", "cache", "results folder (JSON, checkpoints, cache entries)"},
    {"plots", "string", "plots", "figures folder"},
    {"format", "string", "png", "figure format: png or svg", one_of = {"png", "svg"}},
    {"no-cache", "bool", false, "recompute even when a cached result or a record exists (a new record lands beside)"},
    {"results", "string", "results", "the study's record: one JSON file per finished group of runs (xsa.record)"},
    {"from-records", "bool", false, "train nothing: use the runs that have a record, report the seeds that have none"},
    {"resume", "bool", true, "continue an unfinished run from its saved state (--no-resume: start over)"},
    {"save-every", "int", d.save_every or 50, "steps between saved states of a training run (0: only when stopped)", min = 0},
    {"quick", "bool", false, "a fast small run (seconds), for trying things out and tests"},
  }
  for _, e in ipairs(extra or {}) do o[#o + 1] = e end
  if skip then
    local drop = {}
    for _, n in ipairs(skip) do drop[n] = true end
    local kept = {}
    for _, e in ipairs(o) do if not drop[e[1]] then kept[#kept + 1] = e end end
    o = kept
  end
  return o
end

-- The seeds of --seeds: "N" is seeds 0..N-1, "a,b,c" (a comma) is that
-- list. Returns the list, or nil and why.
function M.parse_seeds(s)
  s = tostring(s)
  local function bad(why) return nil, why .. " (--seeds N runs seeds 0..N-1; --seeds 3,7,11 those seeds)" end
  if not s:find(",", 1, true) then
    local n = math.tointeger(tonumber(s))
    if not n or n < 1 then return bad(string.format("'%s' is not a positive number of seeds", s)) end
    if n > 10000 then return bad(string.format("%d seeds is more than 10000", n)) end
    local out = {}
    for i = 1, n do out[i] = i - 1 end
    return out
  end
  local out, seen = {}, {}
  for item in s:gmatch("[^,]+") do
    local v = math.tointeger(tonumber(item))
    if not v or v < 0 then return bad(string.format("'%s' is not a seed (an integer >= 0)", item)) end
    if seen[v] then return bad(string.format("seed %d is given twice", v)) end
    seen[v] = true
    out[#out + 1] = v
  end
  if #out == 0 then return bad("no seed given") end
  return out
end

-- The seeds a run replicates over (opts.seed_list): --seeds, else --seed
-- alone. --seed together with --seeds, or --data-seed together with
-- --init-seed over several seeds (nothing would vary), is an error.
function M.seed_list(opts)
  if opts.seeds == nil then return {opts.seed or 0} end
  local given = opts.given or {}
  if given.seed then return nil, "give --seed S (one seed) or --seeds (several), not both" end
  local list, why = M.parse_seeds(opts.seeds)
  if not list then return nil, why end
  if #list > 1 and opts.data_seed and opts.init_seed then
    return nil, "--data-seed and --init-seed together leave nothing to vary between seeds"
  end
  return list
end

-- The seeds of the batch order and of the initial weights for seed s.
function M.seeds_of(opts, s)
  return opts.data_seed or s, opts.init_seed or s
end

-- Where a run's default folders (cache, plots, results) go: the checkout for
-- a script inside it (the study's own), else the folder of the script that
-- runs (a user's experiment writes under its own folder, never into the
-- engine's tree), else (-e, stdin, the REPL) the working directory.
function M.default_base(root)
  local script = arg and arg[0]
  local cwd = sys.abspath(".")
  if type(script) ~= "string" or not script:find("%.lua$") or not sys.exists(script) then return cwd end
  local dir = sys.abspath(script):match("^(.*)/[^/]*$")
  if not dir or dir == "" then return cwd end
  if not sys.installed() and (dir == root or dir:sub(1, #root + 1) == root .. "/") then return root end
  return dir
end

-- Flags that say where or how a run is done, not what it computes: a run
-- given only these is the default run.
local HOUSEKEEPING = {out = true, plots = true, format = true, threads = true, jobs = true, worker = true, unit = true,
  no_cache = true, resume = true, save_every = true, results = true, from_records = true, data_parallel = true,
  skip = true, only = true, output = true, help = true}

-- A 32-bit FNV-1a hash of a string (labels cut short stay apart).
local function text_hash(s)
  local h = 2166136261
  for i = 1, #s do h = ((h ~ s:byte(i)) * 16777619) & 0xffffffff end
  return h
end

-- The label of a run that is not the default one, from the flags it was
-- given (opts.given), else nil: "quick", "quick_seeds-2", "steps-100_lr-0.003".
-- Its figures, summaries and cache go to runs/LABEL/ (M.setup).
function M.run_label(opts)
  local keys = {}
  for k in pairs(opts.given or {}) do
    if not HOUSEKEEPING[k] and opts[k] ~= nil then keys[#keys + 1] = k end
  end
  if #keys == 0 then return nil end
  table.sort(keys, function(a, b) if (a == "quick") ~= (b == "quick") then return a == "quick" end return a < b end)
  local parts = {}
  for i, k in ipairs(keys) do
    local v, name = opts[k], k:gsub("_", "-")
    if type(v) == "table" then
      local t = {}
      for j, x in ipairs(v) do t[j] = tostring(x) end
      v = table.concat(t, ",")
    end
    parts[i] = v == true and name or v == false and ("no-" .. name) or (name .. "-" .. tostring(v))
  end
  local label = table.concat(parts, "_"):gsub("[^%w.,=+-]", "_")
  if #label > 80 then label = label:sub(1, 64) .. "-" .. string.format("%08x", text_hash(label)) end
  return label
end

-- Settings after parsing: threads, absolute folders relative to default_base
-- for the defaults and to the working directory for user-given paths, the
-- seed list (opts.seed_list).
function M.setup(opts)
  if opts.seeds ~= nil or opts.seed ~= nil then
    local list, why = M.seed_list(opts)
    if not list then
      io.stderr:write(why, "\n")
      os.exit(2)
    end
    opts.seed_list = list
  end
  if opts.threads and opts.threads > 0 then
    core.set_threads(opts.threads)
  elseif core.mpi and core.mpi.size() > 1 then
    -- ranks sharing a node share its cores: max(1, cores / ranks on the node)
    core.set_threads(core.mpi.threads_per_rank())
  end
  local root = sys.abspath(sys.root())
  local base = M.default_base(root)
  -- a quick or non-default run of the study's own scripts writes apart, in
  -- runs/LABEL/ (M.run_label), never over the default run's cache/
  -- summaries and plots/ figures; the folders it gets are then given
  -- (children of --jobs get the same). A user's experiment elsewhere has no
  -- published figures to protect: it writes beside itself.
  local label = base == root and M.run_label(opts) or nil
  opts.run_label = label
  local function place(key, default)
    if opts.given and opts.given[key] then return sys.abspath(opts[key]) end
    if label and opts.given then
      opts.given[key] = true
      return base .. "/runs/" .. label .. "/" .. default
    end
    return base .. "/" .. default
  end
  opts.out = place("out", "cache")
  opts.plots = place("plots", "plots")
  if opts.results then
    -- the study's record is the checkout's results/; a --quick run's records
    -- are scratch (OUT/records), and $XSA_RESULTS moves the default (tests)
    opts.results = (opts.given and opts.given.results) and sys.abspath(opts.results) or sys.env("XSA_RESULTS") or
      (opts.quick and (opts.out .. "/records")) or (base .. "/results")
  end
  if opts.format ~= nil and opts.format ~= "png" and opts.format ~= "svg" then
    io.stderr:write("--format must be png or svg\n")
    os.exit(2)
  end
  sys.mkdir(opts.out)
  sys.mkdir(opts.plots)
  sys.mkdir(opts.out .. "/summary")
  opts.root = root
  return opts
end

-- The data part of a configuration (what defines the loaders); `seed` is
-- the seed of the batch order (default --seed).
function M.data_config(opts, seq_len, batch, seed)
  return {
    max_tokens = opts.max_tokens, seq_len = seq_len or opts.seq_len, batch_size = batch or opts.batch,
    val_frac = opts.val_frac, seed = seed or opts.seed,
  }
end

-- The probe set of parts 5 and 6: the validation windows of the first
-- --probe-tokens tokens in batches of --probe-batch (the notebook probes an
-- 80k-token set in batches of 16, whatever the training set was).
function M.probe_data_config(opts, seq_len)
  return {max_tokens = opts.probe_tokens, seq_len = seq_len or opts.seq_len, batch_size = opts.probe_batch,
    val_frac = opts.val_frac, seed = 0, split = "val"}
end

-- The options of a probe set (parts 5 and 6).
function M.probe_options(batches)
  return {
    {"probe-batches", "int", batches, "validation batches of the probe set each probe averages over", min = 1},
    {"probe-tokens", "int", 80000, "tokens of the probe set (its validation windows are probed)", min = 1},
    {"probe-batch", "int", 16, "sequences per probe batch", min = 1},
  }
end

-- Train and val loaders over the first max_tokens tokens of TinyStories.
function M.loaders(dc)
  local t0 = os.time()
  local train, val = require("xsa.data").tinystories{
    max_tokens = dc.max_tokens, seq_len = dc.seq_len, batch = dc.batch_size,
    val_fraction = dc.val_frac, seed = dc.seed or 0,
  }
  if os.time() - t0 > 2 then
    io.stderr:write(string.format("data: ready in %ds\n", os.time() - t0))
  end
  if train:num_batches() < 1 or val:num_batches() < 1 then
    error(string.format("not enough data: %d train and %d val batches of %d x %d (raise --max-tokens or lower --batch)",
      train:num_batches(), val:num_batches(), dc.batch_size, dc.seq_len), 0)
  end
  return train, val
end

-- The model part of a configuration; `seed` is the seed of the initial
-- weights (default --seed).
function M.model_config(opts, seq_len, seed)
  return {
    vocab = opts.vocab or 50257, n_layer = opts.n_layer, d_model = opts.d_model, n_head = opts.n_head,
    seq_len = seq_len or opts.seq_len, seed = seed or opts.seed,
    precision = opts.precision ~= "f32" and opts.precision or nil, -- f32 keeps the cache keys as before
  }
end

-- A fresh SA model of a model configuration.
function M.new_model(mc)
  local c = {}
  for k, v in pairs(mc) do c[k] = v end
  c.attention = "sa"
  return core.gpt(c)
end

-- A fresh SA model and an XSA clone with identical weights.
function M.new_pair(mc, lambda)
  local sa_model = M.new_model(mc)
  local xsa_model = sa_model:clone{attention = "xsa", lambda = lambda or 1.0}
  return sa_model, xsa_model
end

-- The training part of a configuration (what xsa.train.pair is given).
-- final_point = "all": the last point of the validation curve is over the
-- whole val set and is the final val loss (xsa.train.pair).
function M.adam_config(opts)
  return {steps = opts.steps, lr = opts.lr, weight_decay = opts.weight_decay, eval_every = opts.eval_every,
    eval_batches = opts.eval_batches, final_point = "all"}
end

-- The options of xsa.train.pair: the training part of a configuration
-- (adam_config) plus `extra` (label, save, baseline, ...), so that what is
-- trained is what the cache key says.
function M.pair_options(train, extra)
  local o = {}
  for k, v in pairs(train) do o[k] = v end
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

-- The cache check of an xsa.train.pair result: the run finished, both final
-- val losses are there and every number is finite. Returns true or false, why.
function M.check_pair(r)
  if r.status ~= "done" then return false, "run did not finish" end
  if not (r.sa and r.xsa and numbers.finite(r.sa.final_val) and numbers.finite(r.xsa.final_val)) then
    return false, "final val losses missing"
  end
  return numbers.all_finite(r)
end

----------------------------------------------------------------------------
-- numbers in words and tables

-- "0-49" for seeds 0, 1, ..., 49: runs of three or more consecutive seeds
-- joined, others listed ("2, 3, 5-7"); seeds given as strings (a summary's
-- seeds_missing) read as numbers.
function M.seed_ranges(list)
  local seeds, out, i = {}, {}, 1
  for k, v in ipairs(list) do seeds[k] = tonumber(v) or v end
  while i <= #seeds do
    local j = i
    while math.type(seeds[j]) and seeds[j + 1] == seeds[j] + 1 do j = j + 1 end
    out[#out + 1] = j > i + 1 and (seeds[i] .. "-" .. seeds[j]) or table.concat(seeds, ", ", i, j)
    i = j + 1
  end
  return table.concat(out, ", ")
end

-- "+1.80%", or "n/a" for a missing or non-finite value.
function M.pct(x)
  if not numbers.finite(x) then return "n/a" end
  return numbers.text("%+.2f%%", x)
end

-- "XSA's final val loss (3.1000) is 1.80% lower than SA's (3.1568)": the
-- sentence the scripts print and the report writes; `what` defaults to
-- "final val loss".
function M.compare_words(sa_value, xsa_value, what)
  what = what or "final val loss"
  if not (numbers.finite(sa_value) and numbers.finite(xsa_value)) then
    return "no comparison is possible (missing values)"
  end
  if sa_value == xsa_value then return string.format("SA and XSA have the same %s (%.4f)", what, sa_value) end
  local d = 100 * (xsa_value - sa_value) / sa_value
  return string.format("XSA's %s (%.4f) is %.2f%% %s than SA's (%.4f)", what, xsa_value, math.abs(d),
    d < 0 and "lower" or "higher", sa_value)
end

-- A markdown table: headers (list of strings), rows (lists of values).
-- Text from a record (a CPU name, a library, a field) as plain text in
-- Markdown: what would open markup is backslash-escaped (a table's pipe,
-- HTML tags and entities, links and images, emphasis, code, autolinks) and
-- line breaks become spaces. A "_" inside a word stays: GFM reads no
-- emphasis there, and names like XSA_LMHEAD_ROWS keep their bytes.
function M.md_text(s)
  s = tostring(s):gsub("[%c]", " "):gsub("[\\`*{}%[%]<>!|&~]", "\\%0")
  s = s:gsub("()_", function(i)
    local a, b = s:sub(i - 1, i - 1), s:sub(i + 1, i + 1)
    return (a:match("^%w$") and b:match("^%w$")) and "_" or "\\_"
  end)
  return (s:gsub("(%a)://", "%1\\://"):gsub("([Ww][Ww][Ww])%.", "%1\\."):gsub("(%S)@(%S)", "%1\\@%2"))
end

function M.md_table(headers, rows, text_cols)
  local lines = {}
  lines[1] = "| " .. table.concat(headers, " | ") .. " |"
  local sep = {}
  for i = 1, #headers do sep[i] = (i <= (text_cols or 1)) and "---" or "---:" end
  lines[2] = "| " .. table.concat(sep, " | ") .. " |"
  for _, r in ipairs(rows) do
    local cells = {}
    for i = 1, #headers do cells[i] = tostring(r[i] == nil and "" or r[i]) end
    lines[#lines + 1] = "| " .. table.concat(cells, " | ") .. " |"
  end
  return table.concat(lines, "\n") .. "\n"
end

----------------------------------------------------------------------------
-- outputs

-- Saves a figure; prints where (or how to render it without gnuplot).
-- `caption` (optional) is the sentence the report writes under it.
function M.save_figure(fig, opts, name, caption)
  local path = opts.plots .. "/" .. name .. "." .. opts.format
  local out, msg = fig:save(path, {format = opts.format})
  if out then
    print("figure: " .. out)
    if msg then io.stderr:write("gnuplot: ", msg, "\n") end
  else
    io.stderr:write("figure not rendered: ", msg, "\n")
  end
  return {name = name, path = path, gp = opts.plots .. "/" .. name .. ".gp", rendered = out ~= nil, caption = caption}
end

-- The summary of a part's latest run (what the report reads).
function M.write_summary(opts, part, summary)
  summary.part = part
  summary.finished_at = os.date("!%Y-%m-%d %H:%M:%S UTC")
  summary.command = summary.command or M.command_line()
  local path = opts.out .. "/summary/" .. part .. ".json"
  core.json.write_file(path, summary, {indent = true})
  return path
end

function M.command_line()
  local parts = {"xsa", arg and arg[0] or "?"}
  for i = 1, #(arg or {}) do parts[#parts + 1] = arg[i] end
  return table.concat(parts, " ")
end

-- Runs main(); "interrupted!" (Ctrl-C) ends the script with status 130 and no
-- traceback (the training loop already said what it saved).
-- Under mpirun the other ranks may be waiting in a collective for this one,
-- so a failing rank ends the whole job (xsa.mpi.abort names the rank).
function M.main(fn)
  local ok, err = xpcall(fn, sys.traceback_unless_interrupted)
  if ok then return end
  local mpi = core.mpi
  local function stop(msg, code)
    if mpi and mpi.size() > 1 then mpi.abort(msg, code) end
    io.stderr:write(msg, "\n")
    os.exit(code)
  end
  if sys.interrupted(err) then stop("interrupted", 130) end
  -- an expected stop (a diverging loss) needs no traceback
  -- and so does a refused record (xsa.record names its file and why)
  local plain = type(err) == "string" and (err:match("^(train%.pair: [^\n]*loss became[^\n]*)") or
    err:match("^(record [^\n]* is refused: [^\n]*)") or err:match("^(records folder [^\n]* cannot be listed: [^\n]*)") or
    err:match("^([%w_]+: no runs of this configuration have records in [^\n]*)"))
  if plain then stop(plain, 1) end
  stop(tostring(err), 1)
end

-- Improvement bars: XSA blue where XSA's loss is lower (positive), SA red
-- where SA's is, each labelled with its value.
function M.improvement_bars(panel, xs, vals, width)
  local plot = require "xsa.plot"
  local px, py, nx, ny, zx, zy = {}, {}, {}, {}, {}, {}
  for i, v in ipairs(vals) do
    if v > 0 then px[#px + 1] = xs[i]; py[#py + 1] = v
    elseif v < 0 then nx[#nx + 1] = xs[i]; ny[#ny + 1] = v
    else zx[#zx + 1] = xs[i]; zy[#zy + 1] = v end
  end
  if #zx > 0 then panel:bars(zx, zy, {color = plot.colors.untrained, barwidth = width, values = "%+.2f%%", label = "equal"}) end
  if #px > 0 then panel:bars(px, py, {color = plot.colors.xsa, barwidth = width, values = "%+.2f%%", label = "XSA's loss lower"}) end
  if #nx > 0 then panel:bars(nx, ny, {color = plot.colors.sa, barwidth = width, values = "%+.2f%%", label = "SA's loss lower"}) end
end

----------------------------------------------------------------------------
-- across seeds

local function stats_lib() return require "xsa.stats" end

-- The mean of a list of numbers with its 95% t interval (lo, hi nil for one
-- value): {n=, mean=, sd=, lo=, hi=}. Non-finite values are left out.
function M.mean_ci(values, level)
  local stats = stats_lib()
  local xs = {}
  for _, v in ipairs(values) do if numbers.finite(v) then xs[#xs + 1] = v end end
  if #xs == 0 then return {n = 0} end
  local out = {n = #xs, mean = stats.mean(xs)}
  if #xs > 1 then
    out.sd = stats.sd(xs)
    out.lo, out.hi = stats.t_interval(xs, level)
  end
  return out
end

-- A curve across seeds: runs[i][model][kind] (kind "val" or "train") at the
-- evaluation points runs[1].steps; per point the mean over seeds and its 95%
-- t interval. Returns steps, mean, lo, hi (lo/hi NaN for one seed).
function M.curve_band(runs, model, kind)
  local steps, mean, lo, hi = {}, {}, {}, {}
  for i, step in ipairs(runs[1].steps) do
    local vals = {}
    for _, r in ipairs(runs) do vals[#vals + 1] = r[model][kind][i] end
    local c = M.mean_ci(vals)
    steps[i], mean[i] = step, c.mean or 0 / 0
    lo[i], hi[i] = c.lo or 0 / 0, c.hi or 0 / 0
  end
  return steps, mean, lo, hi
end

-- A mean with its interval (M.mean_ci) as text in format f: "0.6410
-- (0.6300 to 0.6520)", "0.6410" without an interval, "n/a" without a mean.
function M.ci_text(c, f)
  if not c.mean then return "n/a" end
  local t = numbers.text
  return t(f, c.mean) .. (c.lo and (" (" .. t(f, c.lo) .. " to " .. t(f, c.hi) .. ")") or "")
end

-- The spread of a curve across seeds: per evaluation point the sd over
-- seeds of runs[i][model][kind] (NaN for one seed).
function M.curve_sd(runs, model, kind)
  local sds = {}
  for i = 1, #runs[1].steps do
    sds[i] = M.mean_ci(M.collect(runs, function(r) return r[model][kind][i] end)).sd or 0 / 0
  end
  return sds
end

-- The paired comparison over seeds of the final val losses (lists by seed):
-- xsa.stats.paired_summary (d = 100 (SA - XSA) / SA per seed; mean, sd, 95%
-- t interval, bootstrap interval with 10,000 resamples drawn from seed 0,
-- exact Wilcoxon and paired-t p-values, k_xsa_lower, verdict), plus
-- `seeds` (the seeds, in the order of the lists).
function M.paired_stats(sa, xsa_values, seeds)
  local s = stats_lib().paired_summary(sa, xsa_values, {resamples = 10000, seed = 0})
  s.seeds = seeds
  return s
end

local function p_text(p) return numbers.finite(p) and (p < 0.001 and string.format("%.1e", p) or string.format("%.3f", p)) or "n/a" end

-- What d of a paired summary is, and a value of d with its unit: points of
-- % for a relative difference (the default, and what older summaries hold),
-- one decimal and the unit for an absolute one.
local function diff_words(s)
  if s.diff == "absolute" then
    local u, dec = (s.unit and s.unit ~= "") and (" " .. s.unit) or "", "%." .. (tonumber(s.decimals) or 1) .. "f"
    return s.better == "higher" and "difference = XSA - SA per seed" or "difference = SA - XSA per seed",
      function(x) return numbers.text("%+" .. dec:sub(2), x) .. u end, dec, u
  end
  local dec = "%." .. (tonumber(s.decimals) or 2) .. "f"
  return s.better == "higher" and "improvement = 100 (XSA - SA) / SA per seed" or
    "improvement = 100 (SA - XSA) / SA per seed", function(x) return numbers.text("%+" .. dec:sub(2) .. "%%", x) end, dec, " points"
end

-- The seeds a 95% t interval of the listed half-widths would need at the
-- spread observed (s.seeds_needed, xsa.stats.paired_summary), so that an
-- "inconclusive" reads as "no effect" or as "not enough runs"; nil for one
-- seed or when none were asked for.
function M.seeds_needed_line(s)
  if not (s.n and s.n > 1 and s.seeds_needed and #s.seeds_needed > 0) then return nil end
  local _, _, dec, u = diff_words(s)
  local parts = {}
  for i, e in ipairs(s.seeds_needed) do
    local unit = u == " points" and (e.half_width == 1 and " point" or " points") or u
    parts[i] = string.format("±%g%s: %s", e.half_width, unit, e.n and tostring(e.n) or (e.note or "n/a"))
  end
  return string.format("seeds needed for a %g%% t interval of %s, at this spread (sd " .. dec .. "%s; this comparison has %d)",
    100 * (s.level or 0.95), table.concat(parts, ", of "), s.sd, u, s.n)
end

-- The lines that state a paired comparison over seeds (printed by the
-- scripts, written by the report): the verdict, the numbers, the seeds an
-- interval of +-1 and +-0.5 points would need. `what` names the comparison
-- ("final val loss"); `hint` adds, for one seed, how to get an interval.
function M.stats_lines(s, what, hint)
  local out = {}
  what = what or "final val loss"
  local dtext, f = diff_words(s)
  out[1] = string.format("verdict (%s, %s): %s", what, dtext, s.verdict)
  if s.n > 1 then
    local sd = string.format(select(3, diff_words(s)), s.sd or 0)
    local ci = function(a, b) return f(a):gsub("[%% ].*$", "") .. " to " .. f(b):gsub("[%% ].*$", "") end
    out[2] = string.format("mean %s (sd %s) over %d seeds; 95%% t interval %s; bootstrap (10,000 resamples) %s; paired t p = %s, exact Wilcoxon p = %s; XSA %s in %d of %d seeds",
      f(s.mean), sd, s.n, ci(s.t_lo, s.t_hi), ci(s.boot_lo, s.boot_hi), p_text(s.p_t), p_text(s.p_wilcoxon),
      s.ahead_word or "lower", s.k_xsa_better or s.k_xsa_lower, s.n)
    out[3] = M.seeds_needed_line(s)
  elseif hint then
    out[2] = "for a 95% interval run with --seeds 5 (five independent paired runs, about five times the time)"
  end
  return out
end

-- Every endpoint of doc/study.md ("Endpoints") compared over seeds:
-- xsa.endpoints.paired of the per-seed results (xsa.train.pair results, in
-- the order of `seeds`), each row's stats as paired_stats gives them (10,000
-- bootstrap resamples from seed 0) with stats.seeds the seeds it used (a
-- pair where neither model reached a step endpoint's level is left out).
-- opts: targets, escape_level (xsa.endpoints). Rows: key, kind, label, sa,
-- xsa, censored, stats (nil with note when no pair is left).
function M.endpoint_stats(results, seeds, opts)
  local o = {resamples = 10000, seed = 0}
  for k, v in pairs(opts or {}) do o[k] = v end
  local rows = require("xsa.endpoints").paired(results, o)
  for _, row in ipairs(rows) do
    local used = {}
    for j, i in ipairs(row.used) do used[j] = seeds and seeds[i] or (i - 1) end
    row.used = nil
    if row.stats then row.stats.seeds = used end
  end
  return rows
end

-- The statements of every endpoint_stats row (stats_lines each, named
-- `prefix` .. its label; a row without statistics: its note).
function M.endpoint_lines(rows, prefix)
  local out = {}
  for _, row in ipairs(rows) do
    local what = (prefix or "") .. row.label
    for _, l in ipairs(row.stats and M.stats_lines(row.stats, what) or {what .. ": " .. row.note}) do out[#out + 1] = l end
  end
  return out
end

-- A markdown table of endpoint_stats rows (one line per endpoint): the means
-- of both models, the mean paired difference with its t and bootstrap
-- intervals, the p-values, in how many seeds XSA was ahead, the seeds a
-- narrower interval would need, and what was censored.
function M.endpoint_table(rows)
  local out = {}
  for i, row in ipairs(rows) do
    local s, c = row.stats, row.censored
    local step = row.kind == "step"
    local v = function(x) return numbers.finite(x) and string.format(step and "%.1f" or "%.4f", x) or "n/a" end
    local cens = (c.sa + c.xsa + c.both > 0) and string.format("SA %d, XSA %d, both %d", c.sa, c.xsa, c.both) or "none"
    if not s then
      out[i] = {row.label, "n/a", "n/a", row.note, "", "", "", "", "", cens}
    else
      local _, f, dec = diff_words(s)
      local iv = function(a, b) return a and string.format(dec .. " to " .. dec, a, b) or "n/a" end
      local need = {}
      for j, e in ipairs(s.seeds_needed or {}) do need[j] = string.format("±%g: %s", e.half_width, e.n or ">1e6") end
      out[i] = {row.label, v(stats_lib().mean(row.sa)), v(stats_lib().mean(row.xsa)), f(s.mean), iv(s.t_lo, s.t_hi),
        iv(s.boot_lo, s.boot_hi), string.format("%s / %s", p_text(s.p_t), p_text(s.p_wilcoxon)),
        string.format("%d of %d", s.k_xsa_better, s.n), #need > 0 and table.concat(need, ", ") or "n/a", cens}
    end
  end
  return {"endpoint", "SA (mean)", "XSA (mean)", "XSA ahead by (mean)", "95% t interval", "bootstrap interval",
    "p (t / Wilcoxon)", "XSA ahead in", "seeds for 95% CI of ±h", "censored"}, out
end

-- Values of one field of every seed's result as a list: pick(r) per run.
function M.collect(runs, pick)
  local out = {}
  for i, r in ipairs(runs) do out[i] = pick(r) end
  return out
end

-- Loss curves of SA and XSA (kind "train" or "val") of the results of one
-- or more seeds into a panel. One seed: both curves with the gap between
-- them shaded. Several: per model the mean over seeds with its 95% t band at
-- each point, and each seed as a thin line.
function M.loss_curves(panel, results, kind)
  local plot = require "xsa.plot"
  local N, r1 = #results, results[1]
  if N == 1 then
    panel:band(r1.steps, r1.sa[kind], r1.xsa[kind], {color = "#7D3C98", alpha = 0.18, label = "gap"})
    panel:line(r1.steps, r1.sa[kind], {label = "SA", color = plot.colors.sa, points = true, pointsize = 0.7})
    panel:line(r1.steps, r1.xsa[kind], {label = "XSA", color = plot.colors.xsa, points = true, pointsize = 0.7})
    return
  end
  for _, m in ipairs{{"sa", "SA"}, {"xsa", "XSA"}} do
    local steps, mean, lo, hi = M.curve_band(results, m[1], kind)
    local color = plot.colors[m[1]]
    panel:band(steps, lo, hi, {color = color, alpha = 0.2, label = m[2] .. " 95% band"})
    for _, r in ipairs(results) do panel:line(r.steps, r[m[1]][kind], {color = color, width = 0.6}) end
    panel:line(steps, mean, {label = m[2] .. " mean of " .. N .. " seeds", color = color, points = true, pointsize = 0.6})
  end
end

-- The next panel of fig: each seed's improvement (dots), their mean with its
-- 95% t interval (an error bar) and the verdict (st: paired_stats).
function M.seed_improvement_panel(fig, st)
  local plot = require "xsa.plot"
  local lo, hi = math.min(0, st.t_lo, table.unpack(st.d)), math.max(0, st.t_hi, table.unpack(st.d))
  local pad = (hi - lo) * 0.15 + 1e-9
  local p = fig:panel{title = "improvement per seed, % (positive: XSA lower)", xlabel = st.verdict,
    ylabel = "100 (SA - XSA) / SA", xrange = {0.4, 1.6}, yrange = {lo - pad, hi + 2 * pad},
    xtics = {{"seeds", 0.85}, {"mean", 1.25}}, zero = true, key = "top left"}
  local xs = {}
  for i = 1, st.n do xs[i] = 0.7 + 0.3 * (i - 0.5) / st.n end
  p:points(xs, st.d, {color = "#555555", pointsize = 1.1, label = "one seed"})
  p:errorbars({1.25}, {st.mean}, {st.t_lo}, {st.t_hi}, {color = plot.colors.xsa, pointsize = 1.4, width = 2.5,
    label = "mean, 95% t interval"})
  return p
end

-- Improvement bars over seeds: per x the mean improvement (bar, blue where
-- XSA's loss is lower, red where SA's is), its 95% t interval (error bar)
-- and every seed's value (grey dots), labelled with the mean above the
-- highest of them. `sts` are paired_stats per x. One seed: the bars alone.
function M.improvement_bars_ci(panel, xs, sts, width)
  local plot = require "xsa.plot"
  local means = {}
  for i, s in ipairs(sts) do means[i] = s.mean end
  if sts[1] and sts[1].n == 1 then return M.improvement_bars(panel, xs, means, width) end
  local px, py, nx, ny, zx, zy = {}, {}, {}, {}, {}, {}
  for i, v in ipairs(means) do
    if v > 0 then px[#px + 1] = xs[i]; py[#py + 1] = v
    elseif v < 0 then nx[#nx + 1] = xs[i]; ny[#ny + 1] = v
    else zx[#zx + 1] = xs[i]; zy[#zy + 1] = v end
  end
  if #zx > 0 then panel:bars(zx, zy, {color = plot.colors.untrained, barwidth = width, label = "mean: equal"}) end
  if #px > 0 then panel:bars(px, py, {color = plot.colors.xsa, barwidth = width, alpha = 0.45, label = "mean: XSA's loss lower"}) end
  if #nx > 0 then panel:bars(nx, ny, {color = plot.colors.sa, barwidth = width, alpha = 0.45, label = "mean: SA's loss lower"}) end
  local dx, dy, lo, hi, top, texts = {}, {}, {}, {}, {}, {}
  for i, s in ipairs(sts) do
    local n = #s.d
    local m = s.mean
    for j, d in ipairs(s.d) do
      dx[#dx + 1] = xs[i] - width * 0.3 + width * 0.6 * (j - 0.5) / n
      dy[#dy + 1] = d
      m = math.max(m, d)
    end
    lo[i], hi[i] = s.t_lo, s.t_hi
    top[i] = math.max(m, s.t_hi or m)
    texts[i] = numbers.text("%+.2f%%", s.mean)
  end
  panel:points(dx, dy, {color = "#444444", pointsize = 0.7, label = "one seed"})
  panel:errorbars(xs, means, lo, hi, {color = "#222222", pointsize = 0.5, width = 2, label = "mean, 95% t interval"})
  panel:labels(xs, top, texts, {offset = {0, 0.9}, fontsize = 9})
end

-- Points with 95% error bars over seeds at xs + offset: per x the mean of
-- the seeds' values (lists), its t interval, and each seed's value as a
-- small dot. One seed: the points alone. o: color, label, offset, line,
-- dash, values (a format: each mean written above its interval), fontsize.
function M.points_ci(panel, xs, per_x, o)
  local px, mean, lo, hi, dx, dy, top, texts = {}, {}, {}, {}, {}, {}, {}, {}
  local off = o.offset or 0
  for i, vals in ipairs(per_x) do
    local c = M.mean_ci(vals)
    px[i], mean[i], lo[i], hi[i] = xs[i] + off, c.mean or 0 / 0, c.lo or 0 / 0, c.hi or 0 / 0
    top[i] = c.hi or c.mean or 0 / 0
    for _, v in ipairs(vals) do
      dx[#dx + 1] = xs[i] + off
      dy[#dy + 1] = v
      if numbers.finite(v) and v > top[i] then top[i] = v end
    end
    texts[i] = o.values and numbers.finite(mean[i]) and numbers.text(o.values, mean[i]) or ""
  end
  if o.values then panel:labels(px, top, texts, {offset = {0, 0.7}, fontsize = o.fontsize or 8}) end
  -- the legend entry goes to the line when there is one (it shows the dash), else to the error bars
  local label = o.label and (#per_x[1] > 1 and (o.label .. " (mean, 95% t interval)") or o.label)
  if o.line then panel:line(px, mean, {color = o.color, width = 1.5, dash = o.dash, label = label}) end
  if #per_x[1] > 1 then
    panel:points(dx, dy, {color = o.color, pointsize = 0.45, pointtype = 6})
    panel:errorbars(px, mean, lo, hi, {color = o.color, label = not o.line and label or nil, pointsize = 1, width = 2})
  else
    panel:points(px, mean, {color = o.color, label = not o.line and o.label or nil, pointsize = 1.2})
  end
  return mean, lo, hi
end

-- The runs of a sweep in groups, one per value of the swept setting (part
-- of a study: a sequence length, a lambda), for its table and figure:
-- group_of(x, j) places run x (j: its place in `runs`) in one of n groups;
-- per group its runs in order, their SA and XSA values (x.sa_val,
-- x.xsa_val) with their means, and the paired statistics over `seeds`.
function M.paired_groups(runs, n, group_of, seeds)
  local groups, mean = {}, stats_lib().mean
  for i = 1, n do groups[i] = {runs = {}} end
  for j, x in ipairs(runs) do
    local g = groups[group_of(x, j)]
    g.runs[#g.runs + 1] = x
  end
  for _, g in ipairs(groups) do
    g.sa = M.collect(g.runs, function(r) return r.sa_val end)
    g.xsa = M.collect(g.runs, function(r) return r.xsa_val end)
    g.stats = M.paired_stats(g.sa, g.xsa, seeds)
    g.sa_mean, g.xsa_mean = mean(g.sa), mean(g.xsa)
  end
  return groups
end

-- "5 seeds" or "seed 3": what a figure's title says of its seeds.
function M.seeds_text(seeds)
  return #seeds > 1 and string.format("%d seeds", #seeds) or string.format("seed %d", seeds[1])
end

-- The x extent of a sweep over the values xs: lo, hi, a padding and a bar
-- width that keep bars apart at any spacing.
function M.sweep_span(xs)
  local lo, hi = math.min(table.unpack(xs)), math.max(table.unpack(xs))
  return lo, hi, math.max(0.08, (hi - lo) * 0.08), #xs > 1 and math.min(0.15, (hi - lo) / #xs * 0.6) or 0.15
end

-- The training flags a sweep's summary records (its configuration), with
-- the sweep's own fields in `extra`.
function M.train_config(opts, seeds, extra)
  local c = {steps = opts.steps, batch = opts.batch, seq_len = opts.seq_len, max_tokens = opts.max_tokens, lr = opts.lr,
    seeds = seeds, data_seed = opts.data_seed, init_seed = opts.init_seed}
  for k, v in pairs(extra or {}) do c[k] = v end
  return c
end

-- "+0.12 to +3.40": the t interval of paired statistics, or "n/a".
function M.interval_text(s)
  local f = "%+." .. math.max(2, tonumber(s.decimals) or 2) .. "f"
  return s.t_lo and (numbers.text(f, s.t_lo) .. " to " .. numbers.text(f, s.t_hi)) or "n/a"
end

-- Mean of a per-layer metric over layers.
function M.layer_mean(probe, key)
  local s, n = 0, 0
  for _, l in ipairs(probe) do
    if numbers.finite(l[key]) then s = s + l[key]; n = n + 1 end
  end
  return n > 0 and s / n or nil
end

-- The probe as plain data {layers = {{value_cos=,...}, ...}} (JSON-safe).
function M.probe(model, loader, n_batches)
  local p = core.no_grad(function() return model:probe(loader, n_batches) end)
  local out = {}
  for i, l in ipairs(p) do
    out[i] = {value_cos = l.value_cos, self_attn = l.self_attn, pre_cos = l.pre_cos, post_cos = l.post_cos,
      pre_cos_pos1 = l.pre_cos_pos1, post_cos_pos1 = l.post_cos_pos1}
  end
  return out
end

return M
