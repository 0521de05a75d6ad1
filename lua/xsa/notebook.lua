-- xsa.notebook: what a cell means in the Jupyter kernel (`xsa --kernel`,
-- lua/kernel.c moves the messages). One Lua state for the kernel's life.
--
--   A cell runs as one chunk named In[N]. Tried in order: the cell as one
--   expression (`return <cell>`); the cell with its last line as the value
--   shown; the cell as statements. Its top-level locals become globals when
--   it ends (each cell is its own chunk, as a REPL line is, and a notebook
--   reads top to bottom), taken with debug.getlocal at the end of the chunk.
--   print, io.write, io.stdout:write and io.stderr:write send stream
--   messages; a final value shows as the REPL prints it, a figure as its
--   image. fig:show() and xsa.plot.show() send image/png display data (and
--   so does fig:save when xsa.plot.show_saved is true; no SVG: see below);
--   a training progress bar is one display updated in place. Invalid UTF-8
--   and NUL bytes in any text sent are escaped (clean), never a failed cell.
--   Completion is xsa.help.complete's, inspection xsa.help.text's.
--   io.read() and io.stdin:read() ask the front end for a line (Jupyter's
--   input box); each format is one line typed: "l" the line, "L" with its
--   newline, "n" its number (nil when it is none), "a" the line, a count
--   its first bytes. io.lines() and io.stdin:lines() have no end of input
--   in a notebook and raise instead of waiting forever.
--
-- Non-goals: rich output for tables; widgets.
local help = require "xsa.help"
local M = {}

local K -- the kernel's C functions: publish(type, json_text), base64(bytes)
local json -- xsa.json

-- Text as a front end can take it: JSON carries only valid UTF-8, and the
-- kernel's C side no NUL. Each maximal invalid subpart (Unicode's, Python's
-- errors="replace") becomes U+FFFD, as a terminal shows it; a NUL byte "\\0",
-- as Lua's %q writes it.
local second = {[0xE0] = {0xA0, 0xBF}, [0xED] = {0x80, 0x9F}, [0xF0] = {0x90, 0xBF}, [0xF4] = {0x80, 0x8F}}

-- the length of the maximal subpart at s[i], where UTF-8 is invalid
local function subpart(s, i)
  local b = s:byte(i)
  local need = b >= 0xC2 and b <= 0xDF and 1 or b >= 0xE0 and b <= 0xEF and 2 or b >= 0xF0 and b <= 0xF4 and 3 or 0
  local n, range = 1, second[b] or {0x80, 0xBF}
  while n <= need do
    local c = s:byte(i + n)
    if not c or c < range[1] or c > range[2] then break end
    n, range = n + 1, {0x80, 0xBF}
  end
  return n
end

local function clean(s)
  if not s:find("\0", 1, true) and utf8.len(s) then return s end
  local out, i = {}, 1
  while i <= #s do
    local ok, bad = utf8.len(s, i)
    out[#out + 1] = s:sub(i, ok and #s or bad - 1):gsub("%z", "\\0")
    if ok then break end
    out[#out + 1] = "\u{FFFD}"
    i = bad + subpart(s, bad)
  end
  return table.concat(out)
end

local function cleaned(v)
  if type(v) == "string" then return clean(v) end
  if type(v) ~= "table" then return v end
  local t = {}
  for k, x in pairs(v) do t[k] = cleaned(x) end
  return setmetatable(t, getmetatable(v))
end

local function send(msg_type, content) K.publish(msg_type, json.encode(cleaned(content))) end

local function stream(name, text)
  if text ~= "" then send("stream", {name = name, text = text}) end
end

-- ---- output ----------------------------------------------------------------

-- io.write's formatting: integers as %d, floats as %.14g, strings as they are
local function written(fn, ...)
  local out = {}
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if math.type(v) == "float" then
      out[i] = string.format("%.14g", v)
    elseif type(v) == "number" or type(v) == "string" then
      out[i] = tostring(v)
    else
      error(string.format("bad argument #%d to '%s' (string expected, got %s)", i, fn, type(v)), 3)
    end
  end
  return table.concat(out)
end

local function install_output()
  _G.print = function(...)
    local parts = {}
    for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
    stream("stdout", table.concat(parts, "\t") .. "\n")
  end
  local io_write, stdout, stderr = io.write, io.stdout, io.stderr
  io.write = function(...)
    if io.output() ~= stdout then return io_write(...) end
    stream("stdout", written("write", ...))
    return stdout
  end
  local methods = getmetatable(stdout).__index
  local file_write = methods.write
  methods.write = function(f, ...)
    if f == stdout or f == stderr then
      stream(f == stdout and "stdout" or "stderr", written("write", ...))
      return f
    end
    return file_write(f, ...)
  end
end

-- one value per format, each from one line the front end's user types
local function input_read(...)
  local fmts, out = table.pack(...), {}
  if fmts.n == 0 then fmts = {n = 1, "l"} end
  for i = 1, fmts.n do
    local f = fmts[i]
    if type(f) == "string" then f = f:gsub("^%*", ""):sub(1, 1) end
    local ok = f == "l" or f == "L" or f == "n" or f == "a" or math.type(f) == "integer"
    if not ok then error(string.format("bad argument #%d to 'read' (invalid format)", i), 3) end
    local line = K.input("", false)
    if f == "L" then out[i] = line .. "\n"
    elseif f == "n" then out[i] = tonumber(line)
    elseif math.type(f) == "integer" then out[i] = line:sub(1, math.max(f, 0))
    else out[i] = line end
  end
  return table.unpack(out, 1, fmts.n)
end

local function no_lines()
  error("io.lines() reads until the end of input, which a notebook never gives: read each line with io.read()", 3)
end

local function install_input()
  local stdin, io_read, io_lines = io.stdin, io.read, io.lines
  io.read = function(...)
    if io.input() ~= stdin then return io_read(...) end
    return input_read(...)
  end
  io.lines = function(name, ...)
    if name == nil and io.input() == stdin then no_lines() end
    return io_lines(name, ...)
  end
  local methods = getmetatable(stdin).__index
  local file_read, file_lines = methods.read, methods.lines
  methods.read = function(f, ...)
    if f == stdin then return input_read(...) end
    return file_read(f, ...)
  end
  methods.lines = function(f, ...)
    if f == stdin then no_lines() end
    return file_lines(f, ...)
  end
end

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- {image/png=, text/plain=} of a figure. No image/svg+xml: nbconvert's HTML
-- export prefers it and, for a notebook that is not trusted (any executed by
-- nbconvert), strips its tags, leaving blank space where the figure was.
local function figure_data(fig)
  local dir = require("xsa.sys").mkdtemp("xsa-figure")
  local data = {["text/plain"] = tostring(fig)}
  local path, err = fig:save(dir .. "/figure.png", {quiet = true})
  if path then data["image/png"] = K.base64(read_file(path)) end
  for _, f in ipairs{"figure.png", "figure.dat", "figure.gp"} do os.remove(dir .. "/" .. f) end
  os.remove(dir)
  if err then stream("stderr", err .. "\n") end
  return data
end

local function show_figure(fig)
  send("display_data", {data = figure_data(fig), metadata = {}})
end

-- one display per bar, updated in place, at most twice a second
local displays = 0
local function live_progress(bar, line, last)
  local t = os.clock()
  if not last and bar.live_at and t - bar.live_at < 0.5 then return end
  bar.live_at = t
  local msg = {data = {["text/plain"] = line}, metadata = {}, transient = {}}
  if bar.live_id then
    msg.transient.display_id = bar.live_id
    send("update_display_data", msg)
  else
    displays = displays + 1
    bar.live_id = string.format("xsa-progress-%d-%d", displays, os.time())
    msg.transient.display_id = bar.live_id
    send("display_data", msg)
  end
end

-- ---- cells -----------------------------------------------------------------

-- Called at the end of a cell's chunk: its top-level locals become globals.
local function keep_locals()
  local i = 1
  while true do
    local name, value = debug.getlocal(2, i)
    if not name then return end
    if name:sub(1, 1) ~= "(" then rawset(_G, name, value) end
    i = i + 1
  end
end

-- The cell as a function, in the first form that compiles (see the header).
local function compile(code, name)
  local f = load("return " .. code, name)
  if f then return f end
  local head, last = code:match("^(.*)\n([^\n]*%S[^\n]*)%s*$")
  -- "return end" would compile: an empty return closing the block above
  local closes = { ["end"] = true, ["else"] = true, ["elseif"] = true, ["until"] = true }
  if head and not closes[last:match("^%s*(%a+)") or ""] then
    f = load(head .. "\n;(...)() return " .. last, name)
    if f then return f end
  end
  f = load(code .. "\n;(...)()", name)
  if f then return f end
  return assert(load(code, name))
end

local function show_values(n, count, ...)
  if n == 0 then return end
  local first = ...
  local data
  if n == 1 and getmetatable(first) == require("xsa.plot").Figure then
    data = figure_data(first)
  else
    data = {["text/plain"] = require("xsa.show").line(...)} -- a result table as its summary
  end
  send("execute_result", {execution_count = count, data = data, metadata = {}})
end

local function execute(code, count, silent)
  local f = compile(code, "=In[" .. count .. "]")
  local function shown(...)
    if not silent then show_values(select("#", ...), count, ...) end
  end
  shown(f(keep_locals))
end

-- byte offset of code point `pos` (Jupyter counts code points)
local function byte_at(code, pos)
  if pos < 0 then return #code end
  return (utf8.offset(code, pos + 1) or (#code + 1)) - 1
end

local function complete(code, pos)
  local before = code:sub(1, byte_at(code, pos))
  local word = before:match("[%a_][%w_%.:]*$") or ""
  local matches = cleaned(help.complete(word))
  local cursor = utf8.len(before) or #before
  return matches, cursor - (utf8.len(word) or #word), cursor
end

-- the identifier path around the cursor, resolved without metamethods
local function inspect(code, pos)
  local at = byte_at(code, pos)
  local left = code:sub(1, at):match("[%a_][%w_%.:]*$") or ""
  local right = code:sub(at + 1):match("^[%w_]*") or ""
  local path = (left .. right):gsub("[.:]$", "")
  if path == "" then return nil end
  local v = _G
  for part in path:gmatch("[^.:]+") do
    v = type(v) == "table" and rawget(v, part) or nil
    if v == nil then break end
  end
  local text = help.text(v ~= nil and v or path)
  if text:find("^no help for") then return nil end
  return clean(text)
end

local function is_complete(code)
  local f, err = load(code, "=cell")
  if f then return "complete" end
  if err:find("<eof>$") then return "incomplete" end
  return "invalid"
end

-- Called once by the kernel with its C functions; returns the handlers.
function M.start(kernel)
  K = kernel
  local xsa = require "xsa"
  json = xsa.json
  install_output()
  install_input()
  rawset(_G, "help", xsa.help)
  require("xsa.plot").inline = show_figure
  require("xsa.progress").live = live_progress
  return {execute = execute, complete = complete, inspect = inspect, is_complete = is_complete, clean = clean}
end

return M
