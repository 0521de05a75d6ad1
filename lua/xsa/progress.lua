-- xsa.progress: progress of a long run on stderr.
--
-- On a terminal, one line redrawn in place (at most ~8 times a second):
--   mine  [#########.......]  120/300  SA 6.412  XSA 6.398  21.3k tok/s  ETA 1m04s
-- Not on a terminal (a log file, a pipe, the tests): no bar, only the lines
-- given to :log (one per evaluation in the training loops).
-- XSA_PROGRESS=bar|log|off forces a mode.
--
--   local bar = xsa.progress.new{label = "mine", total = 300}
--   bar:update(step, "SA 6.41  XSA 6.40", tokens_per_s)
--   bar:log("step 20: val SA 6.9 XSA 6.8")
--   bar:finish()
--
-- Also the wall clock used by the training loops (progress.now(), seconds
-- with sub-second resolution where the system gives it).
-- Non-goals: several bars at once, colours.
local finite = require("xsa.numbers").finite

local M = {}

local uptime_ok = true
-- Seconds since some fixed point, with ~10 ms resolution on Linux
-- (/proc/uptime), else whole seconds (os.time).
function M.now()
  local core = package.loaded["xsa.core"] -- absent in a bare Lua: /proc/uptime then
  local clock = type(core) == "table" and rawget(core, "clock")
  if type(clock) == "function" then return clock() end
  if uptime_ok then
    local f = io.open("/proc/uptime", "r")
    if f then
      local t = f:read("n")
      f:close()
      if t then return t end
    end
    uptime_ok = false
  end
  return os.time()
end

local tty_cache
-- Whether stderr is a terminal.
function M.isatty()
  if tty_cache == nil then
    local core = package.loaded["xsa.core"]
    local f = type(core) == "table" and rawget(core, "isatty")
    if type(f) == "function" then
      tty_cache = f(2) and true or false
    else
      -- the shell inherits our stderr, so it tests the same descriptor
      tty_cache = os.execute("test -t 2") and true or false
    end
  end
  return tty_cache
end

-- M.live(bar, line, last), when set (xsa.notebook sets it), shows the bar as
-- one line updated in place: mode "live".
function M.mode()
  local m = os.getenv("XSA_PROGRESS")
  if m == "bar" or m == "log" or m == "off" then return m end
  if M.live then return "live" end
  return M.isatty() and "bar" or "log"
end

-- "1h02m", "3m04s", "12s"
function M.duration(s)
  if not finite(s) or s < 0 then return "?" end
  s = math.floor(s + 0.5)
  if s >= 3600 then return string.format("%dh%02dm", s // 3600, (s % 3600) // 60) end
  if s >= 60 then return string.format("%dm%02ds", s // 60, s % 60) end
  return string.format("%ds", s)
end

-- "850", "21.3k", "1.20M"
function M.rate(x)
  if x == nil or x ~= x then return "?" end
  if x >= 1e6 then return string.format("%.2fM", x / 1e6) end
  if x >= 1e4 then return string.format("%.1fk", x / 1e3) end
  return string.format("%.0f", x)
end

local Bar = {}
Bar.__index = Bar

-- progress.new{label=, total=, stream=io.stderr, mode=, width=24}
function M.new(o)
  o = require("xsa.options").check("progress.new", o, {"label", "total", "stream", "mode", "width"})
  local self = setmetatable({
    label = o.label or "", total = o.total or 0, stream = o.stream or io.stderr,
    mode = o.mode or M.mode(), width = o.width or 24, start = M.now(), last_draw = -1,
    drawn = false, step = 0,
  }, Bar)
  return self
end

function Bar:eta(step)
  local elapsed = M.now() - self.start
  if step <= 0 or self.total <= 0 then return nil end
  return elapsed / step * (self.total - step)
end

-- Redraws the bar (terminal only). `text` is free text (losses), `rate` tokens/s.
function Bar:update(step, text, rate)
  self.step = step
  if self.mode ~= "bar" and self.mode ~= "live" then return end
  local t = M.now()
  if t - self.last_draw < 0.12 and step < self.total then return end
  self.last_draw = t
  local frac = self.total > 0 and math.min(1, step / self.total) or 0
  local filled = math.floor(frac * self.width + 0.5)
  local line = string.format("%s [%s%s] %" .. #tostring(self.total) .. "d/%d  %s  %s tok/s  ETA %s", self.label,
    string.rep("#", filled), string.rep(".", self.width - filled), step, self.total,
    text or "", M.rate(rate), M.duration(self:eta(step)))
  if self.mode == "live" then return M.live(self, line, step >= self.total) end
  self.stream:write("\r", line, "\27[K")
  self.stream:flush()
  self.drawn = true
end

-- A log line: printed in both modes (in bar mode above the bar).
function Bar:log(line)
  if self.mode == "off" then return end
  if self.drawn then self.stream:write("\r\27[K") end
  self.stream:write(line, "\n")
  self.stream:flush()
  if self.drawn then
    self.last_draw = -1
    self.drawn = false
  end
end

-- Ends the bar line (terminal) so later output starts on a fresh line.
function Bar:finish(line)
  if self.mode == "bar" and self.drawn then
    self.stream:write("\n")
    self.drawn = false
  end
  if line then self:log(line) end
  self.stream:flush()
end

M.Bar = Bar
return M
