-- The module loads in a stock lua5.4 through require, without the xsa executable.
local T = require "testing"
local xsa = require "xsa"
T.case("require xsa in stock lua", function()
  T.eq(type(xsa), "table")
  T.eq(type(xsa.version()), "string")
  T.eq(type(xsa.blas().core), "string")
end)
T.case("tensors and autograd in stock lua", function()
  local w = xsa.tensor({{1, 2}, {3, 4}}, {requires_grad = true})
  local loss = (w * w):sum()
  loss:backward()
  T.ok(w.grad:allclose(w:detach() * 2))
  T.eq(tostring(xsa.tensor{1, 2}), "tensor([1., 2.])")
end)
T.done()
