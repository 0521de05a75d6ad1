-- The module loads in a stock lua5.4 through require, without the xsa executable.
local T = require "testing"
local xsa = require "xsa"
T.case("require xsa in stock lua", function()
  T.eq(type(xsa), "table")
  T.eq(type(xsa.version()), "string")
  T.eq(type(xsa.blas().core), "string")
end)
T.done()
