-- xsa.sys: what the Lua modules need from the process and the operating
-- system: environment variables, the checkout root, absolute paths, shell
-- quoting, folders and files, and telling Ctrl-C apart from other errors.
--
--   local sys = require "xsa.sys"
--   sys.root()                  -- "/home/me/xsa" (see below)
--   sys.abspath("plots")        -- "/home/me/xsa/plots" when run from there
--   os.execute("ls " .. sys.shell_quote(path))
--   sys.mkdir(dir); sys.exists(path); sys.env("XSA_DATA")
--   local ok, err = xpcall(fn, sys.traceback_unless_interrupted)
--   if not ok and sys.interrupted(err) then ... end
--   sys.library_file()          -- first line of a library kept beside scripts
--
-- The root of the checkout, root(): $XSA_ROOT when set and not empty (the
-- xsa executable sets it to the checkout it runs from), else the checkout
-- that holds this module (ROOT/lua/xsa/sys.lua, as it was loaded), else ".". Data files
-- (xsa.data), token caches and the study's default output folders are found
-- relative to it. It is returned as given (relative when $XSA_ROOT or the
-- module's path is); callers that store paths take abspath() of it.
-- Rule: no os.execute (or mkdir here) inside a training loop. It is C's
-- system(), which ignores SIGINT while the shell runs: a Ctrl-C or kill -INT
-- that comes then is lost (tests/test_experiment.lua counts the calls).
-- Non-goals: Windows paths and shells, changing the working directory.
local M = {}

-- The value of an environment variable, or nil when it is unset or empty.
function M.env(name)
  local v = os.getenv(name)
  if v == nil or v == "" then return nil end
  return v
end

-- The repository root (see the header).
function M.root()
  local r = M.env("XSA_ROOT")
  if r then return r end
  -- where this file was loaded from: package.path need not name it
  local here = debug.getinfo(1, "S").source:match("^@(.*)$")
  if here then
    if here == "lua/xsa/sys.lua" then return "." end
    local root = here:match("^(.*)/lua/xsa/sys%.lua$")
    if root then return root == "" and "/" or root end
  end
  return "."
end

-- Whether this xsa runs from an install (make install, a rock) rather than
-- a checkout: the root holds no lua/xsa/ of the engine's modules.
function M.installed()
  local f = io.open(M.root() .. "/lua/xsa/sys.lua", "rb")
  if f then f:close() end
  return f == nil
end

-- The working directory as the kernel knows it (xsa.cwd: getcwd), never
-- $PWD, which a parent that changed folder without updating it leaves
-- stale; without the engine (a bare Lua), what `pwd -P` prints.
local function cwd()
  local x = package.loaded["xsa.core"]
  local here = type(x) == "table" and x.cwd and x.cwd()
  if here then return here end
  local p = io.popen("pwd -P")
  if p then
    here = p:read("l")
    p:close()
  end
  return here or "."
end

-- p made absolute against the working directory ("." is the directory itself,
-- a leading "./" is dropped); an absolute p is returned unchanged.
function M.abspath(p)
  if p:sub(1, 1) == "/" then return p end
  local pwd = cwd()
  if p == "." then return pwd end
  return pwd .. "/" .. (p:gsub("^%./", ""))
end

-- s (a string or number) as one word for sh: single-quoted, with ' written
-- as '\''. Inside single quotes sh expands nothing ($, `, \, newlines and
-- every other byte stand for themselves), so the command receives exactly s.
-- The rule: every piece of text that goes into a shell command line goes
-- through this function (tests/test_plot.lua runs it on every byte). A NUL
-- byte is refused: the command line is a C string and would end there, with
-- the quote still open. A word that starts with "-" is still an option to
-- the program that gets it: callers put "--" before a path operand or pass
-- an absolute path.
function M.shell_quote(s)
  local t = type(s)
  if t == "number" then s = tostring(s)
  elseif t ~= "string" then error("shell_quote: expects a string (got " .. t .. ")", 2) end
  if s:find("\0", 1, true) then error("shell_quote: a NUL byte cannot be passed to a shell command", 2) end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- Creates dir and its parents (mkdir -p); raises when that fails. Returns dir.
function M.mkdir(dir)
  local core = package.loaded["xsa.core"]
  local mk = type(core) == "table" and core._proc and core._proc.mkdir
  if mk then -- no shell: os.execute (C's system) would ignore a Ctrl-C meanwhile, and it would be lost
    local ok, why = mk(dir)
    if not ok then error("cannot create folder " .. dir .. " (" .. tostring(why) .. ")", 2) end
  elseif not os.execute("mkdir -p -- " .. M.shell_quote(dir)) then
    error("cannot create folder " .. dir, 2)
  end
  return dir
end

-- os.execute(cmd) for a command that reads no terminal, except that a
-- SIGINT or SIGTERM that comes while it runs is not lost (xsa._proc.run:
-- passed to the command, then to this process); os.execute without the engine.
function M.execute(cmd)
  local core = package.loaded["xsa.core"]
  local run = type(core) == "table" and core._proc and core._proc.run
  if run then return run(cmd) end
  return os.execute(cmd)
end

-- A new private folder under $TMPDIR (else /tmp), made by mktemp -d
-- (mkdtemp(3), mode 0700): never a name removed and made again, which
-- another user could take in between. prefix: plain letters.
function M.mkdtemp(prefix)
  prefix = prefix or "xsa"
  assert(prefix:match("^[%w%-_]+$"), "xsa.sys.mkdtemp: the prefix must be plain letters, digits, - and _")
  local p = io.popen("mktemp -d -t " .. prefix .. ".XXXXXXXX 2>&1")
  local out = p:read("a")
  local ok = p:close()
  out = out:gsub("\n$", "")
  if not ok or not out:find("^/") then error("cannot make a temporary folder: " .. out, 2) end
  return out
end

-- Whether path can be opened for reading.
-- A readable regular file. The engine's check is used once it is loaded: io.open
-- would block forever on a FIFO and succeeds on a directory.
function M.exists(path)
  local core = package.loaded["xsa.core"]
  local is_file = type(core) == "table" and core._data and core._data.is_file
  if is_file then return is_file(path) == true end
  local f = io.open(path, "rb")
  if f then
    f:close()
    return true
  end
  return false
end

-- Whether err is the error the xsa executable raises on Ctrl-C (a message
-- containing "interrupted!", see lua/main.c).
function M.interrupted(err)
  return type(err) == "string" and err:find("interrupted!", 1, true) ~= nil
end

-- An xpcall handler: an interrupt passes through unchanged (callers recognise
-- it with interrupted() and print no traceback), any other error gets one.
function M.traceback_unless_interrupted(err)
  if M.interrupted(err) then return err end
  return debug.traceback(err, 2)
end

-- Called at the top of a Lua file that other scripts load (dofile) but that
-- sits among scripts: run itself (`xsa scripts/claims.lua`), it says what it
-- is instead of silently doing nothing. Its leading comment goes to stdout;
-- with --help the exit status is 0, else 2 (nothing ran). Loaded by another
-- file, it returns at once.
function M.library_file()
  local src = debug.getinfo(2, "S").source
  local main = type(arg) == "table" and type(arg[0]) == "string" and arg[0]
  if not (main and src:sub(1, 1) == "@" and M.abspath(src:sub(2)) == M.abspath(main)) then return end
  local f = io.open(src:sub(2), "r")
  local lines = {}
  for l in (f and f:read("a") or ""):gmatch("[^\n]*") do
    local text = l:match("^%-%-%s?(.*)$")
    if not text then break end
    lines[#lines + 1] = text
  end
  if f then f:close() end
  io.stdout:write(table.concat(lines, "\n"), "\n\n", main, " is loaded by other scripts; run alone it does nothing.\n")
  io.stdout:flush()
  for _, a in ipairs(arg) do if a == "--help" or a == "-h" then os.exit(0) end end
  os.exit(2)
end

return M
