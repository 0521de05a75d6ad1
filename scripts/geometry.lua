-- geometry.lua: XSA's projection for one token in two dimensions, as
-- numbers and as a drawing (part2_geometry.lua; the study's, not installed).
--
-- For a self value V and an attention output Y:
--   Vn = V / |V|,  alpha = Y . Vn            (Y's component along V)
--   Z  = Y - lambda * alpha * Vn             (lambda = 0: SA, Z = Y)
-- At lambda = 1, Z is orthogonal to V.
--
--   local geometry = dofile(dir .. "geometry.lua")
--   local g = geometry.project({3, 0.9}, {1.7, 2.3}, 1)   -- g.alpha, g.Z, g.cos_zv, ...
--   geometry.panel(fig, V, Y, 1, "XSA", xsa.plot.colors.xsa, "Z_1")   -- zname: gnuplot enhanced text
-- Non-goals: more than two dimensions (xsa.nn.attention does the real thing).
require("xsa.sys").library_file()
local finite = require("xsa.numbers").finite
local mk = require("xsa.plot").markup -- V_n: the drawing's subscripts are asked for

local M = {}

-- Colours of the drawing: V, Y, the projection of Y on V, the removed part.
-- Opaque colours only: the GIF terminal has no transparency (the projection's
-- light purple is #7D3C98 at 56% over white, as the PNG showed it).
M.colors = {v = "#2C3E50", y = "#E67E22", proj = "#B692C5", removed = "#C0392B"}

-- Numbers (the rule): V and Y are two finite numbers each, lambda finite;
-- norms are computed on the vector divided by its largest component, so
-- vectors of 1e-300 or 1e300 give the same directions and cosines as
-- (1, 0); V = 0 (no direction to remove) and a Z that overflows are errors.
-- A cosine with a zero vector (Y = 0, or Z = 0 at lambda = 1 for Y along V)
-- is reported as 0.
local function check_vec(what, v)
  if type(v) ~= "table" or not (finite(v[1]) and finite(v[2])) then
    error(string.format("geometry: %s must be two finite numbers {x, y}", what), 3)
  end
end

-- |v| without overflow or underflow of the squares.
local function norm(x, y)
  local m = math.max(math.abs(x), math.abs(y))
  if m == 0 then return 0 end
  local a, b = x / m, y / m
  return m * math.sqrt(a * a + b * b)
end

-- cos of the angle between (x, y) and the unit vector u; 0 for a zero vector.
local function cos_with(x, y, u)
  local m = math.max(math.abs(x), math.abs(y))
  if m == 0 then return 0 end
  local a, b = x / m, y / m
  return (a * u[1] + b * u[2]) / math.sqrt(a * a + b * b)
end

-- The projection of Y for lambda: {vn, alpha, proj = alpha Vn, Z, cos_yv, cos_zv}.
function M.project(V, Y, lambda)
  check_vec("V", V)
  check_vec("Y", Y)
  if not finite(lambda) then error("geometry: lambda must be a finite number", 2) end
  local nv = norm(V[1], V[2])
  if nv == 0 then error("geometry: V is the zero vector: it has no direction to remove", 2) end
  local m = math.max(math.abs(V[1]), math.abs(V[2]))
  local a, b = V[1] / m, V[2] / m
  local s = math.sqrt(a * a + b * b)
  local vn = {a / s, b / s}
  local alpha = Y[1] * vn[1] + Y[2] * vn[2]
  local Z = {Y[1] - lambda * alpha * vn[1], Y[2] - lambda * alpha * vn[2]}
  if not (finite(alpha) and finite(Z[1]) and finite(Z[2])) then
    error("geometry: Z = Y - lambda (Y.Vn) Vn overflows a double for these values", 2)
  end
  return {vn = vn, alpha = alpha, Z = Z, cos_zv = cos_with(Z[1], Z[2], vn),
    cos_yv = cos_with(Y[1], Y[2], vn), proj = {alpha * vn[1], alpha * vn[2]}}
end

-- x and y ranges that hold the origin, V, Y and Z at lambda = 1, padded.
function M.bounds(V, Y)
  local Z = M.project(V, Y, 1).Z
  local xs, ys = {0, V[1], Y[1], Z[1]}, {0, V[2], Y[2], Z[2]}
  local pad = 0.6
  return {math.min(table.unpack(xs)) - pad, math.max(table.unpack(xs)) + pad},
    {math.min(table.unpack(ys)) - pad, math.max(table.unpack(ys)) + pad}
end

-- The right angle between V and Z at the origin (lambda = 1): a small square
-- between them, and "90°" opposite Z, leaning away from the projection
-- (which lies on sign(alpha) Vn): no arrow comes near there (Y = alpha Vn +
-- Z leaves the origin on Z's side), so the label never sits on an arrow.
local function right_angle(p, V, Y, g)
  local nz = math.sqrt(g.Z[1] ^ 2 + g.Z[2] ^ 2)
  local s = 0.07 * math.max(norm(V[1], V[2]), norm(Y[1], Y[2]))
  local zn, sa = {g.Z[1] / nz, g.Z[2] / nz}, g.alpha < 0 and -1 or 1
  local a, b = {s * g.vn[1], s * g.vn[2]}, {s * zn[1], s * zn[2]}
  p:line({a[1], a[1] + b[1], b[1]}, {a[2], a[2] + b[2], b[2]}, {color = "#000000", width = 1.5})
  -- the label's centre: 1.4 sides of the square along -Zn, 0.6 along -sign(alpha) Vn
  p:text(-1.4 * b[1] - 0.6 * sa * a[1], -1.4 * b[2] - 0.6 * sa * a[2], "90°", {fontsize = 10, align = "center"})
end

-- Draws V, Y, the projection of Y on V, the removed lambda alpha Vn and Z
-- into panel p (Z in zcolor, named zname, gnuplot enhanced text); a right
-- angle at lambda = 1. Returns project(V, Y, lambda).
function M.draw(p, V, Y, lambda, zcolor, zname)
  local C = M.colors
  local g = M.project(V, Y, lambda)
  -- the projection lies on V: drawn first, wide and light, under V
  p:vector(0, 0, g.proj[1], g.proj[2], {color = C.proj, width = 9, head = false,
    label = mk "projection of Y on V: αV_n"})
  p:vector(0, 0, V[1], V[2], {color = C.v, width = 2.5, label = "V (self value)"})
  p:vector(0, 0, Y[1], Y[2], {color = C.y, width = lambda == 0 and 6 or 3, label = "Y (attention output)"})
  -- the perpendicular from Y to its projection
  p:line({Y[1], g.proj[1]}, {Y[2], g.proj[2]}, {color = "#777777", width = 1.5, dash = 3})
  if lambda ~= 0 then
    p:vector(Y[1], Y[2], -lambda * g.alpha * g.vn[1], -lambda * g.alpha * g.vn[2],
      {color = C.removed, width = 2, dash = 4, label = mk(string.format("removed: λαV_n (λ = %g)", lambda))})
  end
  p:vector(0, 0, g.Z[1], g.Z[2], {color = zcolor, width = lambda == 0 and 2 or 3.5,
    label = lambda == 0 and mk(string.format("%s = Y (nothing removed)", zname))
      or mk(string.format("%s = Y - λαV_n", zname))})
  if math.abs(lambda - 1) < 1e-9 and (g.Z[1] ~= 0 or g.Z[2] ~= 0) then right_angle(p, V, Y, g) end
  return g
end

-- "α = Y·V_n = 2.289" over "cos(Y,V) = 0.800,   cos(Z,V) = 0.555" (markup), of project().
function M.numbers_text(g)
  local t = require("xsa.numbers").text
  return mk(string.format("α = Y·V_n = %s\ncos(Y,V) = %s,   cos(Z,V) = %s",
    t("%.3f", g.alpha), t("%.3f", g.cos_yv), t("%.3f", g.cos_zv)))
end

-- A new panel of fig with the whole drawing (equal axes, bounds(V, Y)), the
-- numbers under it and the legend below them, off the arrows.
function M.panel(fig, V, Y, lambda, title, zcolor, zname)
  local xr, yr = M.bounds(V, Y)
  local p = fig:panel{title = title, xrange = xr, yrange = yr, equal = true, key = "below left vertical maxrows 5",
    xlabel = M.numbers_text(M.project(V, Y, lambda)), ylabel = ""}
  -- room for five legend lines under every panel: panels side by side stay level
  p:command("set bmargin 10")
  return M.draw(p, V, Y, lambda, zcolor, zname)
end

return M
