-- xsa.args: command-line flags for the experiment scripts.
--
-- A script declares its flags once (name, type, default, help); parse() turns
-- `arg` into a table of values, prints --help, rejects unknown flags and bad
-- values with a one-line message, and applies the script's `quick` values for
-- --quick to every flag the user did not give explicitly.
--
--   local opts = xsa.args.parse(arg, {
--     name = "mine.lua", summary = "paired SA vs XSA training",
--     options = {
--       {"steps", "int", 300, "training steps per model"},
--       {"lr", "number", 1e-3, "AdamW learning rate"},
--       {"seq-lens", "numbers", {64, 128}, "comma-separated list"},
--     },
--     quick = {steps = 10},
--   })
--   opts.steps, opts.seq_lens, opts.quick, opts.given.steps
--
-- Types: "int", "number", "string", "bool" (a bare --flag; --no-flag sets
-- it to false unless a flag of that name is declared), "numbers"
-- (comma-separated). "--name value" and "--name=value" both work. Flag names
-- use dashes; the table keys use underscores.
-- Ranges (the rule: a script's flags are checked here, before it loads any
-- data or writes any file): an option may declare min = and max = (for int,
-- number and each of numbers; numbers must also be finite), one_of = {...}
-- (string), check = function(v) -> ok, why, and after = function(opts) ->
-- ok, why for a rule between flags (run once all are parsed). An unknown
-- flag is an error with the nearest known name (xsa.options).
-- --help: "usage: xsa PATH [options]" with PATH as the script was run
-- (arg[0], when its file name is spec.name), the summary, "Writes: " and
-- spec.writes (what files the script writes), the flags, the epilog.
-- Non-goals: short options, positional arguments, sub-commands.
local finite = require("xsa.numbers").finite
local options = require "xsa.options"

local M = {}

local function key_of(name) return (name:gsub("-", "_")) end

local function fmt_default(t, v)
  if v == nil then return "none" end
  if t == "numbers" then
    local parts = {}
    for i, x in ipairs(v) do parts[i] = tostring(x) end
    return table.concat(parts, ",")
  end
  if t == "bool" then return v and "on" or "off" end
  return tostring(v)
end

local function convert(t, name, s)
  if t == "int" then
    local n = math.tointeger(tonumber(s))
    if not n then return nil, string.format("--%s expects an integer, got '%s'", name, s) end
    return n
  elseif t == "number" then
    local n = tonumber(s)
    if not finite(n) then
      return nil, string.format("--%s expects a number, got '%s'", name, s)
    end
    return n
  elseif t == "numbers" then
    local out = {}
    for item in tostring(s):gmatch("[^,]+") do
      local n = tonumber(item)
      if not finite(n) then return nil, string.format("--%s expects comma-separated numbers, got '%s'", name, s) end
      out[#out + 1] = n
    end
    if #out == 0 then return nil, string.format("--%s expects at least one number", name) end
    return out
  elseif t == "bool" then
    if s == "true" or s == "1" or s == "yes" or s == "on" then return true end
    if s == "false" or s == "0" or s == "no" or s == "off" then return false end
    return nil, string.format("--%s expects true or false, got '%s'", name, s)
  end
  return s
end

local function deep_copy(v)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = deep_copy(x) end
  return out
end

-- The range rules of option o for value v (see the header): nil, or why not.
local function out_of_range(o, v)
  local vs = type(v) == "table" and v or {v}
  for _, x in ipairs(vs) do
    if o.min and x < o.min then return string.format("must be at least %s (got %s)", o.min, x) end
    if o.max and x > o.max then return string.format("must be at most %s (got %s)", o.max, x) end
  end
  if o.one_of then
    for _, w in ipairs(o.one_of) do if v == w then return nil end end
    return string.format("expects one of %s (got '%s')", table.concat(o.one_of, ", "), tostring(v))
  end
  return nil
end

-- The help text of a spec (what --help prints).
function M.help(spec)
  local lines = {}
  -- the path as it was run (a user's own experiment lives anywhere), else scripts/NAME
  local file, rest = (spec.name or "script.lua"):match("^(%S*)(.*)$") -- "sample.lua CHECKPOINT": the file, its arguments
  local main = type(arg) == "table" and type(arg[0]) == "string" and arg[0]
  local path = main and main:match("[^/]*$") == file and main or ("scripts/" .. file)
  lines[#lines + 1] = string.format("usage: xsa %s%s [options]", path, rest)
  if spec.summary then lines[#lines + 1] = "\n" .. spec.summary end
  if spec.writes then lines[#lines + 1] = "\nWrites: " .. spec.writes end
  if spec.description then lines[#lines + 1] = "\n" .. spec.description end
  lines[#lines + 1] = "\noptions:"
  local width = 0
  local heads = {}
  for i, o in ipairs(spec.options) do
    local head = "--" .. o[1]
    if o[2] ~= "bool" then head = head .. " " .. (o[2] == "numbers" and "A,B,.." or o[2]:upper()) end
    if o[2] == "bool" and o[3] then head = head .. ", --no-" .. o[1] end
    heads[i] = head
    width = math.max(width, #head)
  end
  width = math.max(width, #"--help")
  for i, o in ipairs(spec.options) do
    local extra = ""
    if o[2] ~= "bool" or o[3] then extra = " (default " .. fmt_default(o[2], o[3]) .. ")" end
    local q = spec.quick and spec.quick[key_of(o[1])]
    if q ~= nil then extra = extra .. " [--quick: " .. fmt_default(o[2], q) .. "]" end
    lines[#lines + 1] = string.format("  %-" .. width .. "s  %s%s", heads[i], o[4] or "", extra)
  end
  lines[#lines + 1] = string.format("  %-" .. width .. "s  %s", "--help", "show this help and exit")
  if spec.epilog then lines[#lines + 1] = "\n" .. spec.epilog end
  return table.concat(lines, "\n") .. "\n"
end

-- Parses argv (a list of strings) against spec. Returns opts, or nil and a
-- message; opts.help is true when --help was given (nothing else checked).
function M.try_parse(argv, spec)
  local by_name = {}
  for _, o in ipairs(spec.options) do by_name[o[1]] = o end
  local opts, given = {}, {}
  local i = 1
  while i <= #argv do
    local a = argv[i]
    if a == "--help" or a == "-h" then
      return {help = true}
    end
    local name, value = a:match("^%-%-([%w%-_]+)=(.*)$")
    if not name then name = a:match("^%-%-([%w%-_]+)$") end
    if not name then
      return nil, string.format("unexpected argument '%s' (flags start with --; see --help)", a)
    end
    name = name:gsub("_", "-")
    local o = by_name[name]
    local negated = by_name[name:match("^no%-(.+)$") or ""]
    if not o and negated and negated[2] == "bool" and value == nil then
      o, name, value = negated, negated[1], "false"
    end
    if not o then
      local names = {}
      for _, oo in ipairs(spec.options) do names[#names + 1] = oo[1] end
      local near = options.suggest(name, names)
      return nil, string.format("unknown option '--%s' (%s)", name, near and ("did you mean '--" .. near .. "'?") or "see --help")
    end
    local t = o[2]
    if value == nil then
      if t == "bool" then
        value = "true"
      else
        i = i + 1
        value = argv[i]
        if value == nil then return nil, string.format("--%s needs a value", name) end
      end
    end
    local v, err = convert(t, name, value)
    if v == nil then return nil, err end
    local bad = out_of_range(o, v)
    if bad then return nil, string.format("--%s %s", name, bad) end
    if o.check then
      local ok, why = o.check(v)
      if not ok then return nil, string.format("--%s: %s", name, why or "bad value") end
    end
    opts[key_of(name)] = v
    given[key_of(name)] = true
    i = i + 1
  end
  for _, o in ipairs(spec.options) do
    local k = key_of(o[1])
    if opts[k] == nil then opts[k] = deep_copy(o[3]) end
  end
  if opts.quick and spec.quick then
    for k, v in pairs(spec.quick) do
      if not given[k] then opts[k] = deep_copy(v) end
    end
  end
  opts.given = given
  for _, o in ipairs(spec.options) do
    if o.after then
      local ok, why = o.after(opts)
      if not ok then return nil, string.format("--%s: %s", o[1], why or "bad value") end
    end
  end
  return opts
end

-- Like try_parse, but prints --help (exit 0) or the error (exit 2) itself.
function M.parse(argv, spec)
  local list = {}
  for i = 1, #(argv or {}) do list[i] = argv[i] end
  local opts, err = M.try_parse(list, spec)
  if not opts then
    io.stderr:write(string.format("%s: %s\n", spec.name or "xsa", err))
    os.exit(2)
  end
  if opts.help then
    io.stdout:write(M.help(spec))
    os.exit(0)
  end
  return opts
end

-- The flags back as an argv list (for run_all and for "rerun with" hints),
-- only those the user gave, in declaration order.
function M.to_argv(opts, spec, only_given)
  local out = {}
  for _, o in ipairs(spec.options) do
    local k = key_of(o[1])
    local v = opts[k]
    if v ~= nil and (not only_given or (opts.given and opts.given[k])) then
      if o[2] == "bool" then
        if v then out[#out + 1] = "--" .. o[1] elseif o[3] then out[#out + 1] = "--no-" .. o[1] end
      else
        out[#out + 1] = "--" .. o[1]
        out[#out + 1] = fmt_default(o[2], v)
      end
    end
  end
  return out
end

return M
