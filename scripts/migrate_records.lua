-- migrate_records.lua: the one-time conversion of the study's records of
-- groups of runs (a pair's, a lambda run's, the pilot's and the grid's)
-- from format 1 (one result under the whole configuration's key, the part's
-- name in it) to format 2 (xsa.group: each run under its own key, what the
-- group shares beside them). Every number stays as it was written: the new
-- record is built from the old file's own JSON, must give back the old
-- result to the bit (raw, and as xsa.record reads both) before it is
-- written, and the old file is removed only after. Records of one result
-- that is no group (part 1's probes, part 5's) stay as they are, and so does
-- a format 2 record: a second run changes nothing. A record that is refused
-- (also one not where xsa.record.find reads it: its part's folder, its name
-- and key in its file name) stops the conversion, naming its file.
--
--   xsa scripts/migrate_records.lua [--results results] [--check]
--   local mig = dofile("scripts/migrate_records.lua")   -- mig.convert(text) -> record | nil, why
local xsa = xsa or require "xsa"
local record, group, json = xsa.record, xsa.group, xsa.json

local M = {}

M.same = xsa.numbers.same -- the same data to the bit

-- The format 2 record of the format 1 record in `text`, or nil and why it
-- stays as it is ("format 2 already", "not a group"). Raises when the old
-- record is refused (xsa.record.parse against the key its own configuration
-- and data give) or the new one would not give back its result.
function M.convert(text, what)
  what = what or "record"
  local ok, raw = pcall(json.decode, text)
  if not ok or type(raw) ~= "table" then error(what .. " is refused: not a JSON object", 0) end
  if raw.format == record.GROUP_FORMAT then return nil, "format 2 already" end
  if type(raw.config) ~= "table" or type(raw.data) ~= "table" then error(what .. " is refused: no configuration or data", 0) end
  local legacy = record.legacy_key(raw.config, raw.data)
  local old, why = record.parse(text, legacy)
  if not old then error(what .. " is refused: " .. why, 0) end
  -- where xsa.record.find reads it: under its part's folder, its name and key (else it was never read)
  local file, folder = what:match("([^/]+)$"), what:match("([^/]+)/[^/]+$")
  if folder and (raw.part ~= folder or type(raw.name) ~= "string" or
    file:sub(1, #raw.name + 14) ~= raw.name .. "-" .. xsa.cache.hash(legacy):sub(1, 12) .. "-") then
    error(what .. " is refused: its folder and file name are not its part's, name's and key's", 0)
  end
  local rec = record.build(raw.part, raw.name, raw.config, raw.result, raw.provenance, raw.data)
  if rec.format ~= record.GROUP_FORMAT then return nil, "not a group" end
  local new_text = json.encode(rec, {indent = true})
  local back = json.decode(new_text)
  local joined, w = group.join(back)
  local new, why2 = record.parse(new_text, rec.key)
  if not (joined and new) then error(what .. ": the converted record is refused: " .. tostring(w or why2), 0) end
  if not (M.same(joined, raw.result) and M.same(new.result, old.result)) then
    error(what .. ": the converted record does not give back every number of the old one", 0)
  end
  return rec, new_text
end

-- Converts the records of the folders of `dir` (the study's parts and the
-- grid's folders); check: convert nothing, say what would be. Returns the
-- list of {from =, to =} paths.
function M.run(dir, folders, check)
  local done = {}
  for _, folder in ipairs(folders) do
    local files = xsa.list_files(dir .. "/" .. folder) or {}
    for _, f in ipairs(files) do
      local path = dir .. "/" .. folder .. "/" .. f
      if f:match("%.json$") then
        local rec, text = M.convert(assert(xsa.read_file(path)), path)
        if rec then
          local to = record.path(dir, rec)
          if not check then
            xsa.write_file_atomic(to, text)
            if to ~= path then assert(os.remove(path)) end
          end
          done[#done + 1] = {from = path, to = to}
        end
      end
    end
  end
  return done
end

-- The folders records are kept in: every part's, and those of the grid's
-- groups (grid.lua's configurations name them: the pilot's, the grid's,
-- part 10's other lrs, off-plan runs).
M.GRID_FOLDERS = {"pilot", "grid", "sensitivity", "explore"}
function M.folders()
  local root = xsa.sys.root()
  local out = {}
  for _, d in ipairs(dofile(root .. "/scripts/parts.lua").load()) do out[#out + 1] = d.name end
  for _, f in ipairs(M.GRID_FOLDERS) do out[#out + 1] = f end
  return out
end

local main = type(arg) == "table" and arg[0] and xsa.sys.abspath(arg[0]) ==
  xsa.sys.abspath((debug.getinfo(1, "S").source:gsub("^@", "")))
if not main then return M end

local spec = {name = "migrate_records.lua", summary = "Converts the records of groups of runs in results/ from " ..
  "format 1 to format 2 (each run under its own key); every number kept.",
  writes = "in --results, each converted record's new file (its old one removed); with --check, nothing.",
  options = {{"check", "bool", false, "convert nothing; exit 1 when a record would be converted"},
    {"results", "string", "results", "the records folder"}}}
xsa.study.main(function()
  local opts = xsa.args.parse(arg, spec)
  local done = M.run(opts.results, M.folders(), opts.check)
  for _, d in ipairs(done) do print(string.format("%s%s -> %s", opts.check and "would convert " or "", d.from, d.to)) end
  print(string.format("%d record%s %s", #done, #done == 1 and "" or "s", opts.check and "to convert" or "converted"))
  if opts.check and #done > 0 then os.exit(1) end
end)
