-- part2_geometry.lua: the picture of XSA's projection in two dimensions.
--
-- For one token with self value V and attention output Y:
--   Vn = V / |V|,  alpha = Y . Vn            (Y's component along V)
--   Z  = Y - lambda * alpha * Vn             (lambda = 0: SA, Z = Y)
-- At lambda = 1, Z is orthogonal to V (the right angle is marked). The
-- numbers and the drawing of one panel are geometry.lua's.
--
--   xsa scripts/part2_geometry.lua                  # SA next to XSA at lambda 1
--   xsa scripts/part2_geometry.lua --lambda 0.5
--   xsa scripts/part2_geometry.lua --animate        # + GIF sweeping lambda 0 -> 1
-- Needs no model and no data: only gnuplot.
local xsa = xsa or require "xsa"
local plot = xsa.plot
local geometry = dofile((debug.getinfo(1, "S").source:match("^@(.-)[^/]*$") or "./") .. "geometry.lua")

local P = {report = "report/part2.lua", run_all = {"--animate"},
  name = "part2", title = "Geometry of the projection",
  summary = "The 2-D geometry of the XSA projection: V, Y, the projection of Y on V, the removed\n" ..
    "lambda*alpha*Vn and Z_lambda; SA (lambda = 0) next to XSA (lambda = --lambda).",
  options = {
    {"lambda", "number", 1.0, "XSA strength of the right-hand panel"},
    {"v", "numbers", {3.0, 0.9}, "the self value vector V (x,y)",
      check = function(v) return #v == 2, "expects two numbers x,y" end},
    {"y", "numbers", {1.7, 2.3}, "the attention output Y (x,y)",
      check = function(v) return #v == 2, "expects two numbers x,y" end},
    {"animate", "bool", false, "also write an animated GIF sweeping lambda from 0 to 1"},
    {"frames", "int", 21, "frames of the animation", min = 2, max = 1000},
    {"delay", "int", 12, "hundredths of a second per frame", min = 0},
    {"out", "string", "cache", "results folder (the summary for the report)"},
    {"plots", "string", "plots", "figures folder"},
    {"format", "string", "png", "figure format: png or svg", one_of = {"png", "svg"}},
    {"quick", "bool", false, "fewer animation frames"},
  },
  quick = {frames = 5},
}

function P.main(ex)
  local opts = ex.opts
  local V, Y = opts.v, opts.y
  if #V ~= 2 or #Y ~= 2 then ex:fail("part2_geometry.lua: --v and --y take two numbers each, e.g. --v 3,0.9", 2) end
  if V[1] == 0 and V[2] == 0 then ex:fail("part2_geometry.lua: --v must not be the zero vector", 2) end
  local t0 = xsa.progress.now()
  local fig = plot.figure{cols = 2, width = 1400, height = 760,
    title = plot.markup "How XSA removes the self-value component: Z = Y - λ(Y·V_n)V_n"}
  local g_sa = geometry.panel(fig, V, Y, 0, "SA (λ = 0): Z = Y", plot.colors.sa, "Z_0")
  local g_x = geometry.panel(fig, V, Y, opts.lambda, string.format("XSA (λ = %g)", opts.lambda),
    plot.colors.xsa, string.format("Z_{%g}", opts.lambda))
  ex:save_figure(fig, "part2_geometry")

  if opts.animate then
    local frames, n = {}, math.max(2, opts.frames)
    for i = 0, n - 1 do
      local lam = i / (n - 1)
      frames[#frames + 1] = plot.figure{cols = 1, width = 760, height = 720, fontscale = 1.3, -- a GIF is seen at its own size
        title = string.format("XSA projection, λ = %.2f", lam)}
      geometry.panel(frames[#frames], V, Y, lam, "", lam == 0 and plot.colors.sa or plot.colors.xsa, "Z_λ")
    end
    local path, msg = plot.animate(frames, opts.plots .. "/part2_geometry_sweep.gif", {delay = opts.delay})
    if path then print("animation: " .. path) else io.stderr:write("animation not rendered: ", msg, "\n") end
  end

  print(string.format("V = (%g, %g), Y = (%g, %g): alpha = Y.Vn = %.4f, cos(Y,V) = %.4f", V[1], V[2], Y[1], Y[2],
    g_sa.alpha, g_sa.cos_yv))
  print(string.format("lambda = %g: Z = (%.4f, %.4f), cos(Z,V) = %.4f", opts.lambda, g_x.Z[1], g_x.Z[2], g_x.cos_zv))
  ex:summary{config = {lambda = opts.lambda, v = V, y = Y, animate = opts.animate}, wall_s = xsa.progress.now() - t0,
    result = {alpha = g_sa.alpha, cos_yv = g_sa.cos_yv, cos_zv = g_x.cos_zv, z = g_x.Z, lambda = opts.lambda}}
end

return xsa.experiment.part(P, ...)
