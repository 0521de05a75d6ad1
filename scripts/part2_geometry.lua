-- part2_geometry.lua: the picture of XSA's projection in two dimensions.
--
-- For one token with self value V and attention output Y:
--   Vn = V / |V|,  alpha = Y . Vn            (Y's component along V)
--   Z  = Y - lambda * alpha * Vn             (lambda = 0: SA, Z = Y)
-- At lambda = 1, Z is orthogonal to V (the right angle is marked).
--
--   xsa scripts/part2_geometry.lua                  # SA next to XSA at lambda 1
--   xsa scripts/part2_geometry.lua --lambda 0.5
--   xsa scripts/part2_geometry.lua --animate        # + GIF sweeping lambda 0 -> 1
-- Needs no model and no data: only gnuplot.
local xsa = xsa or require "xsa"
local study = xsa.study
local plot = xsa.plot

local spec = {
  name = "part2_geometry.lua",
  summary = "The 2-D geometry of the XSA projection: V, Y, the projection of Y on V, the removed\n" ..
    "lambda*alpha*Vn and Z_lambda; SA (lambda = 0) next to XSA (lambda = --lambda).",
  options = {
    {"lambda", "number", 1.0, "XSA strength of the right-hand panel"},
    {"v", "numbers", {3.0, 0.9}, "the self value vector V (x,y)"},
    {"y", "numbers", {1.7, 2.3}, "the attention output Y (x,y)"},
    {"animate", "bool", false, "also write an animated GIF sweeping lambda from 0 to 1"},
    {"frames", "int", 21, "frames of the animation"},
    {"delay", "int", 12, "hundredths of a second per frame"},
    {"out", "string", "cache", "results folder (the summary for the report)"},
    {"plots", "string", "plots", "figures folder"},
    {"format", "string", "png", "figure format: png or svg"},
    {"threads", "int", 0, "unused (accepted for uniformity)"},
    {"seed", "int", 0, "unused (accepted for uniformity)"},
    {"no-cache", "bool", false, "unused: nothing here is cached"},
    {"quick", "bool", false, "fewer animation frames"},
  },
  quick = {frames = 5},
}

local C = {
  v = "#2C3E50", y = "#E67E22", proj = "#7D3C98", removed = "#C0392B", foot = "#AAAAAA",
}

local function geometry(V, Y, lambda)
  local nv = math.sqrt(V[1] ^ 2 + V[2] ^ 2)
  local vn = {V[1] / nv, V[2] / nv}
  local alpha = Y[1] * vn[1] + Y[2] * vn[2]
  local Z = {Y[1] - lambda * alpha * vn[1], Y[2] - lambda * alpha * vn[2]}
  local nz = math.sqrt(Z[1] ^ 2 + Z[2] ^ 2)
  local ny = math.sqrt(Y[1] ^ 2 + Y[2] ^ 2)
  return {vn = vn, alpha = alpha, Z = Z, cos_zv = nz > 0 and (Z[1] * vn[1] + Z[2] * vn[2]) / nz or 0,
    cos_yv = (Y[1] * vn[1] + Y[2] * vn[2]) / ny, proj = {alpha * vn[1], alpha * vn[2]}}
end

local function bounds(V, Y)
  local xs, ys = {0, V[1], Y[1]}, {0, V[2], Y[2]}
  local lo_x, hi_x = math.min(table.unpack(xs)), math.max(table.unpack(xs))
  local lo_y, hi_y = math.min(table.unpack(ys)), math.max(table.unpack(ys))
  -- Z at lambda = 1 is Y minus its projection: include it
  local g = geometry(V, Y, 1)
  lo_x, hi_x = math.min(lo_x, g.Z[1]), math.max(hi_x, g.Z[1])
  lo_y, hi_y = math.min(lo_y, g.Z[2]), math.max(hi_y, g.Z[2])
  local pad = 0.6
  return {lo_x - pad, hi_x + pad}, {lo_y - pad, hi_y + pad + 0.5}
end

local function draw(p, V, Y, lambda, zcolor, zname)
  local g = geometry(V, Y, lambda)
  -- the projection lies on V: drawn first, wide and translucent, under V
  p:vector(0, 0, g.proj[1], g.proj[2], {color = "#707D3C98", width = 9, head = false,
    label = "projection of Y on V: αV_n"})
  p:vector(0, 0, V[1], V[2], {color = C.v, width = 2.5, label = "V (self value)"})
  p:vector(0, 0, Y[1], Y[2], {color = C.y, width = lambda == 0 and 6 or 3, label = "Y (attention output)"})
  -- the perpendicular from Y to its projection
  p:line({Y[1], g.proj[1]}, {Y[2], g.proj[2]}, {color = "#777777", width = 1.5, dash = 3})
  if lambda ~= 0 then
    p:vector(Y[1], Y[2], -lambda * g.alpha * g.vn[1], -lambda * g.alpha * g.vn[2],
      {color = C.removed, width = 2, dash = 4, label = string.format("removed: λαV_n (λ = %g)", lambda)})
  end
  p:vector(0, 0, g.Z[1], g.Z[2], {color = zcolor, width = lambda == 0 and 2 or 3.5,
    label = lambda == 0 and string.format("%s = Y (nothing removed)", zname)
      or string.format("%s = Y - λαV_n", zname)})
  if math.abs(lambda - 1) < 1e-9 then
    -- right angle between Z and V at the origin
    local nz = math.sqrt(g.Z[1] ^ 2 + g.Z[2] ^ 2)
    if nz > 1e-9 then
      local s = 0.22
      local zn = {g.Z[1] / nz, g.Z[2] / nz}
      local a = {s * g.vn[1], s * g.vn[2]}
      local b = {s * zn[1], s * zn[2]}
      p:line({a[1], a[1] + b[1], b[1]}, {a[2], a[2] + b[2], b[2]}, {color = "#000000", width = 1.5})
      p:text(a[1] + b[1] + 0.05, a[2] + b[2] + 0.05, "90°", {fontsize = 10})
    end
  end
  p:text(0.02, 0.04, string.format("α = Y·V_n = %.3f     cos(Y,V) = %.3f     cos(Z,V) = %.3f",
    g.alpha, g.cos_yv, g.cos_zv), {graph = true, fontsize = 10})
  return g
end

local function panel(fig, V, Y, lambda, title, zcolor, zname)
  local xr, yr = bounds(V, Y)
  local p = fig:panel{title = title, xrange = xr, yrange = yr, equal = true, key = "top left", xlabel = "", ylabel = ""}
  return draw(p, V, Y, lambda, zcolor, zname)
end

local function main()
  local opts = study.setup(xsa.args.parse(arg, spec))
  local V, Y = opts.v, opts.y
  if #V ~= 2 or #Y ~= 2 then
    io.stderr:write("part2_geometry.lua: --v and --y take two numbers each, e.g. --v 3,0.9\n")
    os.exit(2)
  end
  if V[1] == 0 and V[2] == 0 then
    io.stderr:write("part2_geometry.lua: --v must not be the zero vector\n")
    os.exit(2)
  end
  local t0 = xsa.progress.now()
  local fig = plot.figure{cols = 2, width = 1400, height = 640,
    title = "How XSA removes the self-value component: Z = Y - λ(Y·V_n)V_n"}
  local g_sa = panel(fig, V, Y, 0, "SA (λ = 0): Z = Y", plot.colors.sa, "Z_0")
  local g_x = panel(fig, V, Y, opts.lambda, string.format("XSA (λ = %g)", opts.lambda),
    plot.colors.xsa, string.format("Z_{%g}", opts.lambda))
  local figs = {study.save_figure(fig, opts, "part2_geometry")}

  if opts.animate then
    local frames = {}
    local n = math.max(2, opts.frames)
    for i = 0, n - 1 do
      local lam = i / (n - 1)
      local f = plot.figure{cols = 1, width = 760, height = 640,
        title = string.format("XSA projection, λ = %.2f", lam)}
      panel(f, V, Y, lam, "", lam == 0 and plot.colors.sa or plot.colors.xsa, "Z_λ")
      frames[#frames + 1] = f
    end
    local path, msg = plot.animate(frames, opts.plots .. "/part2_geometry_sweep.gif", {delay = opts.delay})
    if path then print("animation: " .. path) else io.stderr:write("animation not rendered: ", msg, "\n") end
  end

  print(string.format("V = (%g, %g), Y = (%g, %g): alpha = Y.Vn = %.4f, cos(Y,V) = %.4f", V[1], V[2], Y[1], Y[2],
    g_sa.alpha, g_sa.cos_yv))
  print(string.format("lambda = %g: Z = (%.4f, %.4f), cos(Z,V) = %.4f", opts.lambda, g_x.Z[1], g_x.Z[2], g_x.cos_zv))
  study.write_summary(opts, "part2", {title = "Geometry of the projection",
    config = {lambda = opts.lambda, v = V, y = Y, animate = opts.animate},
    wall_s = xsa.progress.now() - t0, figures = figs,
    result = {alpha = g_sa.alpha, cos_yv = g_sa.cos_yv, cos_zv = g_x.cos_zv, z = g_x.Z, lambda = opts.lambda}})
end

study.main(main)
