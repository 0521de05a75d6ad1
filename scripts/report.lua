-- report.lua: gathers whatever results exist into plots/report.html, one
-- self-contained page (inline SVG figures, tables, a short text per part
-- computed from that run's numbers, configuration and timing). Parts not run
-- yet are listed with the command that produces them.
--
--   xsa scripts/report.lua
--   xsa scripts/report.lua --out /tmp/results --plots /tmp/plots
local xsa = xsa or require "xsa"
local study = xsa.study
local parts = dofile(arg[0]:match("^(.-)[^/]*$") .. "parts.lua") -- the study's registry, beside this script

local spec = {
  name = "report.lua",
  summary = "One HTML page of the parts' results: their figures (inline SVG), tables and sentences.",
  writes = "PLOTS/report.html (plots/report.html; --output elsewhere) from the summaries in OUT/summary/\n" ..
    "(cache/summary/) and the figures the parts wrote in PLOTS. Trains nothing. For a run in runs/LABEL/\n" ..
    "(--quick and the like): --out runs/LABEL/cache --plots runs/LABEL/plots.",
  options = {
    {"out", "string", "cache", "results folder the part scripts wrote to"},
    {"plots", "string", "plots", "figures folder"},
    {"output", "string", "", "the HTML file (default: PLOTS/report.html)"},
  },
}

study.main(function()
  local opts = study.setup(xsa.args.parse(arg, spec))
  local output = opts.output ~= "" and xsa.sys.abspath(opts.output) or (opts.plots .. "/report.html")
  -- commands for missing parts name the same folders when they are not the defaults
  local folders = {}
  for _, k in ipairs{"out", "plots"} do
    if opts.given and opts.given[k] then folders[#folders + 1] = "--" .. k .. " " .. xsa.sys.shell_quote(opts[k]) end
  end
  local path, info = xsa.report.write{out = opts.out, plots = opts.plots, output = output,
    folder_flags = table.concat(folders, " "), sections = parts.sections(), closing = parts.closing}
  for _, w in ipairs(info.warnings) do io.stderr:write("warning: ", w, "\n") end
  print(string.format("report: %s (%d part%s present%s)", path, #info.present, #info.present == 1 and "" or "s",
    #info.missing > 0 and ("; missing: " .. table.concat(info.missing, ", ")) or ""))
end)
