-- test_tour.lua: the README's five-minute tour, run as written (its lua
-- block saved as tour.lua in a scratch folder), prints what the README says
-- it prints: every line equal, except the two final val losses, which may
-- differ in their last digit (the CPU's vector unit and the matrix library:
-- the README says so) by at most 0.001, and the path, which is the scratch
-- folder's. About 80 s of CPU (3 min on the loaded 2-core machine).
local T = require "testing"
local root = os.getenv("XSA_ROOT") or "."
local exe = os.getenv("XSA_EXE") or "build/xsa"
if not exe:find("^/") then exe = root .. "/" .. exe end

local readme = assert(xsa.read_file(root .. "/README.md"))
local tour = readme:match("\n## A five%-minute tour\n(.-)\n## ")

T.case("the README's tour prints what the README says, to the digits it promises", function()
  local code = assert(tour:match("```lua\n(.-)```"), "the tour's code block")
  local expected = assert(tour:match("\nIt prints:\n\n(.-)\n\n"), "the tour's expected output")
  T.ok(tour:find("last digit depends on the CPU's vector unit and the matrix library", 1, true),
    "the README says which digits vary")
  local dir = T.tmpdir()
  T.writefile(dir .. "/tour.lua", code)
  local p = io.popen(string.format("cd '%s' && '%s' tour.lua 2>/dev/null", dir, exe))
  local out = p:read("a")
  T.ok(p:close(), out)
  local got, want = {}, {}
  for l in out:gmatch("[^\n]+") do got[#got + 1] = l end
  for l in expected:gmatch("[^\n]+") do want[#want + 1] = l:gsub("^    ", "") end
  T.eq(#got, #want, out)
  for i = 1, math.min(#got, #want) do
    local w, g = want[i], got[i]
    if w:find("^final val loss:") then
      local ws, wx = w:match("SA ([%d.]+), XSA ([%d.]+)")
      local gs, gx = g:match("SA ([%d.]+), XSA ([%d.]+)")
      T.ok(gs and math.abs(gs - ws) <= 0.001 and math.abs(gx - wx) <= 0.001, "losses within 0.001: " .. g .. " vs " .. w)
    elseif w:find("^/%.%.%./") then
      T.eq(g, dir .. w:sub(5), "the figure's path alone (fig:save returns nothing else)")
    else
      T.eq(g, w, "line " .. i)
    end
  end
  for _, f in ipairs{"tour.png", "tour.dat", "tour.gp"} do T.ok(xsa.sys.exists(dir .. "/" .. f), f) end
  os.execute("rm -rf '" .. dir .. "'")
end)

T.done()
