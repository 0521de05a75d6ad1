-- The report's section of part 2 (scripts/part2_geometry.lua declares it): what the part
-- measures, why, and sentences computed from the numbers of its summary.
local xsa = xsa or require "xsa"
xsa.sys.library_file()
local R = xsa.report
local f4 = R.f4

return {
  title = "Part 2: the geometry of the projection",
  command = "xsa scripts/part2_geometry.lua --animate",
  paper = "the change itself, the paper's Algorithm 1",
  about = "XSA takes each token's attention output Y, finds its component along the token's own value " ..
    "vector V (α = Y·V/|V|) and subtracts λ times it: Z = Y − λ α V/|V|. With λ = 0 this is standard " ..
    "attention (Z = Y); with λ = 1 nothing of Z points along V (Z ⟂ V). The picture draws one such token " ..
    "in two dimensions.",
  explain = {"The change to the code is two lines between the attention and the output projection, per head:",
    {code = "Y  = attention(Q, K, V)            -- as in SA\n" ..
      "Vn = V / |V|                       -- line 1: each token's own value, unit length\n" ..
      "Z  = Y - lambda * (Y . Vn) * Vn    -- line 2: drop Y's component along it\n" ..
      "out = Z W_o                        -- SA projects Y instead"},
    "At λ = 1, Z is orthogonal to V for every token and head exactly, by construction, not approximately; " ..
    "a λ between 0 and 1 removes that fraction of the component. The token's own information is not lost: the " ..
    "residual connection still carries it forward; only the attention output stops repeating it. XSA adds no " ..
    "parameter, and its cost is one dot product and one subtraction per token and head."},
  words = function(s)
    local r = s.result or {}
    return {string.format("For the vectors drawn, cos(Y, V) = %s; at λ = %s, cos(Z, V) = %s.", f4(r.cos_yv),
      tostring(r.lambda), f4(r.cos_zv))}
  end,
}
