-- xsa.geometry: XSA's projection for one token in two dimensions, as
-- numbers and as a drawing (scripts/part2_geometry.lua).
--
-- For a self value V and an attention output Y:
--   Vn = V / |V|,  alpha = Y . Vn            (Y's component along V)
--   Z  = Y - lambda * alpha * Vn             (lambda = 0: SA, Z = Y)
-- At lambda = 1, Z is orthogonal to V.
--
--   local g = xsa.geometry.project({3, 0.9}, {1.7, 2.3}, 1)   -- g.alpha, g.Z, g.cos_zv, ...
--   xsa.geometry.panel(fig, V, Y, 1, {title = "XSA", color = xsa.plot.colors.xsa, zname = "Z_1"})
-- Non-goals: more than two dimensions (xsa.nn.attention does the real thing).
local M = {}

-- Colours of the drawing: V, Y, the projection of Y on V, the removed part.
M.colors = {v = "#2C3E50", y = "#E67E22", proj = "#707D3C98", removed = "#C0392B"}

-- The projection of Y for lambda: {vn, alpha, proj = alpha Vn, Z, cos_yv, cos_zv}.
function M.project(V, Y, lambda)
  local nv = math.sqrt(V[1] ^ 2 + V[2] ^ 2)
  local vn = {V[1] / nv, V[2] / nv}
  local alpha = Y[1] * vn[1] + Y[2] * vn[2]
  local Z = {Y[1] - lambda * alpha * vn[1], Y[2] - lambda * alpha * vn[2]}
  local nz = math.sqrt(Z[1] ^ 2 + Z[2] ^ 2)
  local ny = math.sqrt(Y[1] ^ 2 + Y[2] ^ 2)
  return {vn = vn, alpha = alpha, Z = Z, cos_zv = nz > 0 and (Z[1] * vn[1] + Z[2] * vn[2]) / nz or 0,
    cos_yv = (Y[1] * vn[1] + Y[2] * vn[2]) / ny, proj = {alpha * vn[1], alpha * vn[2]}}
end

-- x and y ranges that hold the origin, V, Y and Z at lambda = 1, padded.
function M.bounds(V, Y)
  local Z = M.project(V, Y, 1).Z
  local xs, ys = {0, V[1], Y[1], Z[1]}, {0, V[2], Y[2], Z[2]}
  local pad = 0.6
  return {math.min(table.unpack(xs)) - pad, math.max(table.unpack(xs)) + pad},
    {math.min(table.unpack(ys)) - pad, math.max(table.unpack(ys)) + pad + 0.5}
end

-- Draws V, Y, the projection of Y on V, the removed lambda alpha Vn and Z
-- into panel p (Z in zcolor, named zname); a right angle at lambda = 1.
-- Returns project(V, Y, lambda).
function M.draw(p, V, Y, lambda, zcolor, zname)
  local C = M.colors
  local g = M.project(V, Y, lambda)
  -- the projection lies on V: drawn first, wide and translucent, under V
  p:vector(0, 0, g.proj[1], g.proj[2], {color = C.proj, width = 9, head = false,
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
  local nz = math.sqrt(g.Z[1] ^ 2 + g.Z[2] ^ 2)
  if math.abs(lambda - 1) < 1e-9 and nz > 1e-9 then
    -- right angle between Z and V at the origin
    local s = 0.22
    local zn = {g.Z[1] / nz, g.Z[2] / nz}
    local a, b = {s * g.vn[1], s * g.vn[2]}, {s * zn[1], s * zn[2]}
    p:line({a[1], a[1] + b[1], b[1]}, {a[2], a[2] + b[2], b[2]}, {color = "#000000", width = 1.5})
    p:text(a[1] + b[1] + 0.05, a[2] + b[2] + 0.05, "90°", {fontsize = 10})
  end
  p:text(0.02, 0.04, string.format("α = Y·V_n = %.3f     cos(Y,V) = %.3f     cos(Z,V) = %.3f",
    g.alpha, g.cos_yv, g.cos_zv), {graph = true, fontsize = 10})
  return g
end

-- A new panel of fig with the whole drawing (equal axes, bounds(V, Y)).
function M.panel(fig, V, Y, lambda, title, zcolor, zname)
  local xr, yr = M.bounds(V, Y)
  local p = fig:panel{title = title, xrange = xr, yrange = yr, equal = true, key = "top left", xlabel = "", ylabel = ""}
  return M.draw(p, V, Y, lambda, zcolor, zname)
end

return M
