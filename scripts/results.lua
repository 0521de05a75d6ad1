-- results.lua: the published results, generated from the study's record
-- (results/, one JSON file per finished run) and from nothing else: no run
-- is trained. Writes the README's results section (between its
-- "results:begin" and "results:end" lines), doc/results.md (every table,
-- the per-seed values, compute time, provenance, the cross-machine
-- comparison) and results/report.html with its figures in results/figures.
--
--   xsa scripts/results.lua          # what `make results` runs
--   xsa scripts/results.lua --check  # exit 1 when a committed file is not what the records give
--
-- Each part runs as a child `xsa scripts/partN.lua --from-records --seeds N`
-- (at its defaults: only default-configuration records feed the published
-- files) into a scratch folder; seeds without a record are left out and
-- named. The seeds each part is published over are the study's design,
-- below. Everything written is a function of the records and the code: no
-- date, machine or absolute path of the generating run appears in it.
local xsa = xsa or require "xsa"
local study, sys = xsa.study, xsa.sys

-- the study's design: the parts in order and the seeds each is published over
local PARTS = {
  {part = "part1", script = "part1_bias.lua", title = "Bias probe, untrained model"},
  {part = "part2", script = "part2_geometry.lua", plain = true, title = "Geometry of the projection"},
  {part = "part3", script = "part3_train.lua", seeds = 20, title = "Paired training"},
  {part = "part4", script = "part4_seqlen.lua", seeds = 10, title = "Sequence length"},
  {part = "part5", script = "part5_bias_trained.lua", seeds = 5, title = "Bias probe after training"},
  {part = "part6", script = "part6_lambda_sweep.lua", seeds = 5, title = "Lambda sweep"},
  {part = "part7", script = "part7_recipe.lua", seeds = 10, title = "Training recipe"},
}
local BEGIN, END = "<!-- results:begin", "<!-- results:end -->"

local spec = {name = "results.lua", summary = "Regenerates the README's results section, doc/results.md and " ..
  "results/report.html from the records in results/ (no training).",
  options = {{"check", "bool", false, "write nothing; exit 1 when a committed file differs from what the records give"},
    {"results", "string", "results", "the records folder"}}}

local claims = dofile(sys.root() .. "/scripts/claims.lua")
local numbers_ok = xsa.numbers.finite
local function fmt_pct(x) return numbers_ok(x) and string.format("%+.2f%%", x) or "n/a" end

-- Runs one part from the records into scratch; its summary, or nil, why.
local function run_part(p, scratch, results)
  local argv = {sys.shell_quote(xsa.experiment.exe()), sys.shell_quote(sys.root() .. "/scripts/" .. p.script),
    "--out", sys.shell_quote(scratch), "--plots", sys.shell_quote(scratch .. "/figures")}
  if not p.plain then
    for _, a in ipairs{"--from-records", "--results", results} do argv[#argv + 1] = sys.shell_quote(a) end
  end
  if p.seeds then argv[#argv + 1] = "--seeds " .. p.seeds end
  local log = scratch .. "/" .. p.part .. ".log"
  local ok = os.execute(table.concat(argv, " ") .. " >" .. sys.shell_quote(log) .. " 2>&1")
  if not ok then return nil, (xsa.read_file(log) or "") end
  return xsa.json.read_file(scratch .. "/summary/" .. p.part .. ".json")
end

-- "+1.55%", "-4.30 to +7.40", "3 of 5", the verdict word: one row of the
-- verdict table from a paired statistics result (positive d: XSA better,
-- in % or, for a step endpoint, in steps).
local function verdict_row(what, st)
  local n = st.n or 0
  local word = n < 2 and "one seed: no interval" or (st.t_lo and st.t_lo > 0 and "XSA better") or
    (st.t_hi and st.t_hi < 0 and "SA better") or string.format("inconclusive at %d seeds", n)
  local unit = st.unit == "steps" and " steps" or "%"
  local mean = numbers_ok(st.mean) and string.format("%+.2f%s", st.mean, unit) or "n/a"
  local need = st.seeds_needed and st.seeds_needed[1] and st.seeds_needed[1].n
  return {what, tostring(n), mean, st.t_lo and string.format("%+.2f to %+.2f", st.t_lo, st.t_hi) or "n/a",
    string.format("%d of %d", st.k_xsa_better or st.k_xsa_lower or 0, n), word, need and tostring(need) or "n/a"}
end

-- Part 3's secondary endpoints (doc/study.md, "Endpoints") from its per-seed curves.
local function part3_endpoints(s3)
  local rows, want = {}, {mean = true, escape = true}
  local ok, eps = pcall(study.endpoint_stats, s3.runs or {}, s3.seeds)
  for _, e in ipairs(ok and eps or {}) do
    if want[e.key] and e.stats then rows[#rows + 1] = verdict_row("part 3: " .. e.label, e.stats) end
  end
  return rows
end

-- The verdict rows of every paired comparison in the summaries.
local function verdicts(sums)
  local rows = {}
  local s3 = sums.part3
  if s3 and s3.stats then
    rows[#rows + 1] = verdict_row("part 3: the notebook's pair (seq_len 64, 300 steps), final val loss", s3.stats)
    for _, r in ipairs(part3_endpoints(s3)) do rows[#rows + 1] = r end
  end
  for _, r in ipairs(sums.part4 and sums.part4.result.runs or {}) do
    rows[#rows + 1] = verdict_row(string.format("part 4: seq_len %d (500 steps)", r.seq_len), r.stats)
  end
  for _, r in ipairs(sums.part6 and sums.part6.result.runs or {}) do
    rows[#rows + 1] = verdict_row(string.format("part 6: λ = %g", r.lambda), r.stats)
  end
  for _, rc in ipairs{"constant", "cosine"} do
    local r7 = sums.part7 and sums.part7.recipes and sums.part7.recipes[rc]
    for _, e in ipairs(r7 and r7.endpoints or {}) do
      if e.key == "final" and e.stats then rows[#rows + 1] = verdict_row("part 7: " .. r7.label .. ", final val loss", e.stats) end
    end
  end
  return study.md_table({"comparison", "seeds", "XSA's gain (mean)", "95% t interval", "XSA ahead in", "verdict",
    "seeds for ±1 point (steps: ±20)"}, rows)
end

local function compute_hours(sums)
  local total, n, cpus = 0, 0, {}
  for _, p in ipairs(PARTS) do
    for _, r in ipairs(sums[p.part] and sums[p.part].records or {}) do
      n = n + 1
      total = total + (numbers_ok(r.elapsed_s) and r.elapsed_s or 0)
      cpus[string.format("%s (%s, %s thread%s)", r.provenance.cpu, r.provenance.blas, r.provenance.threads,
        r.provenance.threads == 1 and "" or "s")] = true
    end
  end
  local list = {}
  for c in pairs(cpus) do list[#list + 1] = c end
  table.sort(list)
  return n, total / 3600, list
end

-- The README's section.
local function readme_section(sums)
  local n, hours, cpus = compute_hours(sums)
  return table.concat({BEGIN .. ": generated by `make results` from results/; edit scripts/results.lua, not this -->",
    "XSA's gain, paired by seed: 100·(SA − XSA)/SA of a loss, or SA's step − XSA's for a step endpoint (positive:",
    "XSA better); final val loss (whole validation set) is the primary endpoint, the others are defined in",
    "[doc/study.md](doc/study.md#endpoints). A verdict needs the 95% t interval to exclude 0.", "",
    verdicts(sums),
    string.format("From %d records (%.1f h of compute, the sum over the records) on %s.", n, hours, table.concat(cpus, "; ")),
    "Every table, per-seed value, provenance and the cross-machine comparison: [doc/results.md](doc/results.md);",
    "figures: [results/report.html](results/report.html).", END}, "\n") .. "\n"
end

local function provenance_table(sums)
  local rows = {}
  for _, p in ipairs(PARTS) do
    for _, r in ipairs(sums[p.part] and sums[p.part].records or {}) do
      local v = r.provenance
      rows[#rows + 1] = {p.part, r.name, v.date, v.cpu, string.format("%s, %s", v.blas, v.threads),
        tostring(v.commit):sub(1, 10), numbers_ok(r.elapsed_s) and string.format("%.0f", r.elapsed_s) or "n/a",
        numbers_ok(v.load) and string.format("%.1f", v.load) or "n/a", tostring(r.others)}
    end
  end
  return study.md_table({"part", "run", "date", "CPU", "BLAS kernel, threads", "commit", "compute s",
    "load average at the end", "other records"}, rows)
end

local function comparison_table(sums)
  local rows = {}
  for _, p in ipairs(PARTS) do
    for _, r in ipairs(sums[p.part] and sums[p.part].records or {}) do
      for _, d in ipairs(r.others > 0 and r.differences or {}) do
        local vals = {}
        for i, v in ipairs(d.values) do vals[i] = numbers_ok(v) and string.format("%.6g", v) or "n/a" end
        rows[#rows + 1] = {r.name, d.field, table.concat(vals, " / "), string.format("%.3g", d.max_abs)}
      end
    end
  end
  if #rows == 0 then return "No run has a second record yet (from another machine or a rerun with --no-cache).\n" end
  return study.md_table({"run", "field", "values (chosen record first)", "largest difference"}, rows)
end

-- The claims section: one line per claim with its overall word, the table.
local CLAIM_ORDER = {"part3", "part4", "part6", "part7"}
local function claims_section(sums)
  local rows, lines = claims.rows(sums), {}
  for _, k in ipairs(CLAIM_ORDER) do
    lines[#lines + 1] = string.format("%s: %s.", claims.CLAIMS[k], claims.overall(rows, claims.CLAIMS[k]))
  end
  lines[#lines + 1] = "A claim is supported on an endpoint when the 95% t interval of its per-seed number lies " ..
    "above 0, contradicted when it lies below 0, inconclusive otherwise; the final val loss (the notebook's) decides, " ..
    "the secondary endpoints (doc/study.md) are reported beside it. \"Seeds for a decision\": the seeds whose " ..
    "interval would be as narrow as the half-width named, at the spread observed."
  return {lines = lines, table = claims.table(rows)}
end

-- doc/results.md.
local function results_md(sums, cl)
  local n, hours = compute_hours(sums)
  local out = {"# Results", "",
    "Generated by `make results` (scripts/results.lua) from the study's record, `results/`: one JSON file per",
    "finished run, keyed by its whole configuration, the content of its data and its precision. Do not edit.", "",
    "**Which record counts.** A run may have several records (other machines, reruns with `--no-cache`): the",
    "oldest by its provenance date counts, ties broken by file name; the others are compared below.", "",
    "## Verdicts", "", verdicts(sums),
    string.format("%d records, %.2f h of compute in all (the sum of their training times).", n, hours), "",
    "## The claims", ""}
  for _, l in ipairs(cl.lines) do out[#out + 1] = "- " .. l end
  out[#out + 1] = ""
  out[#out + 1] = cl.table
  for _, p in ipairs(PARTS) do
    local s = sums[p.part]
    out[#out + 1] = "## " .. p.title .. " (" .. p.part .. (p.seeds and (", designed for " .. p.seeds .. " seeds") or "") .. ")"
    out[#out + 1] = ""
    if not s then
      out[#out + 1] = "No records of this part at its defaults yet."
      out[#out + 1] = ""
    else
      if s.seeds then out[#out + 1] = "Seeds: " .. table.concat(s.seeds, ", ") .. "." end
      if s.seeds_missing and #s.seeds_missing > 0 then
        out[#out + 1] = "Seeds of the design without a complete record yet: " .. table.concat(s.seeds_missing, ", ") .. "."
      end
      for _, l in ipairs(s.stats_lines or {}) do out[#out + 1] = "- " .. l end
      out[#out + 1] = ""
      out[#out + 1] = s.table or ""
    end
  end
  for _, l in ipairs{"## Provenance of every record used", "", provenance_table(sums),
    "## Cross-machine comparison", "", "Numbers that differ between the records of one run.", "", comparison_table(sums)} do
    out[#out + 1] = l
  end
  return table.concat(out, "\n")
end

-- text with the README's section replaced (nil when the markers are missing)
local function with_section(readme, section)
  local a = readme:find(BEGIN, 1, true)
  local b = readme:find(END, 1, true)
  if not (a and b and b > a) then return nil end
  return readme:sub(1, a - 1) .. section .. readme:sub(b + #END + 1)
end

study.main(function()
  local opts = xsa.args.parse(arg, spec)
  local root = sys.abspath(sys.root())
  local results = opts.given and opts.given.results and sys.abspath(opts.results) or (root .. "/results")
  local scratch = os.tmpname()
  os.remove(scratch)
  sys.mkdir(scratch)
  local sums = {}
  for _, p in ipairs(PARTS) do
    local s, why = run_part(p, scratch, results)
    if not s and not tostring(why):find("no runs of this configuration have records", 1, true) then
      error(string.format("results: %s failed:\n%s", p.part, why), 0)
    end
    sums[p.part] = s
    io.stdout:write(string.format("%s: %s\n", p.part, s and (#(s.records or {}) .. " records") or "no records yet"))
  end
  local files = {}
  local readme = assert(xsa.read_file(root .. "/README.md"))
  files[#files + 1] = {root .. "/README.md", with_section(readme, readme_section(sums)) or error("README.md has no results markers", 0)}
  local cl = claims_section(sums)
  files[#files + 1] = {root .. "/doc/results.md", results_md(sums, cl)}
  local html, info = xsa.report.build{out = scratch, plots = scratch .. "/figures", published = true, claims = cl}
  for _, w in ipairs(info.warnings) do io.stderr:write("warning: ", w, "\n") end
  files[#files + 1] = {results .. "/report.html", html}
  local differ = {}
  for _, f in ipairs(files) do
    if xsa.read_file(f[1]) ~= f[2] then
      differ[#differ + 1] = f[1]:sub(#root + 2)
      if not opts.check then xsa.write_file_atomic(f[1], f[2]) end
    end
  end
  os.execute("rm -rf " .. sys.shell_quote(scratch))
  if opts.check and #differ > 0 then
    io.stderr:write("results: not what results/ gives: ", table.concat(differ, ", "), " (run make results)\n")
    os.exit(1)
  end
  print(#differ == 0 and "results: up to date" or ("results: wrote " .. table.concat(differ, ", ")))
end)
