-- test_results.lua: the published results are what the records give. The
-- README's results section, doc/results.md and results/report.html are
-- regenerated from results/ (scripts/results.lua --check, which trains
-- nothing) and must equal the committed files byte for byte, as
-- doc/api-index.md must equal what the help entries give.
local T = require "testing"
local xsa = xsa or require "xsa"

local ROOT = xsa.sys.abspath(xsa.sys.root())
local shq = xsa.sys.shell_quote

T.case("the committed results are what results/ gives", function()
  local p = io.popen(string.format("cd %s && %s scripts/results.lua --check --results %s 2>&1", shq(ROOT),
    shq(xsa.experiment.exe()), shq(ROOT .. "/results")))
  local out = p:read("a")
  local ok = p:close()
  T.ok(ok, "stale published results (run make results):\n" .. out)
  T.ok(out:find("results: up to date", 1, true), out)
end)

T.case("no published number is a signed zero", function()
  for _, f in ipairs{"README.md", "doc/results.md", "results/report.html"} do
    local text = assert(xsa.read_file(ROOT .. "/" .. f))
    -- "-0.0000", "+0.00%": a sign before nothing but zeros
    local bad = text:match("[^%w.][%-+]0%.0+[^%d]")
    T.ok(not bad, f .. " prints " .. tostring(bad))
  end
end)

T.done()
