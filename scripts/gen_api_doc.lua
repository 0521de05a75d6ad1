-- gen_api_doc.lua: writes doc/api-index.md from the help entries
-- (lua/xsa/help_db.lua), the one source of the REPL's help() and of the index.
--
--   xsa scripts/gen_api_doc.lua              # writes doc/api-index.md
--   xsa scripts/gen_api_doc.lua --output -   # prints it
local xsa = xsa or require "xsa"

local opts = xsa.args.parse(arg, {
  name = "gen_api_doc.lua",
  summary = "Writes the API index (doc/api-index.md) from lua/xsa/help_db.lua.",
  options = {{"output", "string", "", "where to write (default: ROOT/doc/api-index.md; - for stdout)"}},
})
local text = xsa.help.api_index()
if opts.output == "-" then
  io.write(text)
else
  local path = opts.output ~= "" and opts.output or (xsa.sys.root() .. "/doc/api-index.md")
  xsa.write_file_atomic(path, text)
  print("wrote " .. path)
end
