--- check: assertion helpers for *_test.lua files. luatest.Run defines TESTDIR before this
--- file's first line.
local M = {}

local function fail(msg, level)
  error(msg, (level or 1) + 3)
end

function M.eq(got, want, what)
  if got ~= want then
    fail(string.format("%s: got %s, want %s", what or "value", tostring(got), tostring(want)))
  end
end

function M.near(got, want, tol, what)
  if type(got) ~= "number" or math.abs(got - want) > (tol or 1e-9) then
    fail(string.format("%s: got %s, want %s ± %g", what or "value", tostring(got), tostring(want), tol or 1e-9))
  end
end

function M.truthy(v, what)
  if not v then fail((what or "value") .. " is " .. tostring(v)) end
end

--- errors(fn, pattern): fn must raise an error whose message matches pattern (plain text).
function M.errors(fn, pattern)
  local ok, err = pcall(fn)
  if ok then fail("expected an error matching '" .. pattern .. "', got none") end
  if not string.find(tostring(err), pattern, 1, true) then
    fail("error '" .. tostring(err) .. "' does not contain '" .. pattern .. "'")
  end
  return err
end

--- tmpdir(): a path, not yet created, in the test's own temporary directory, which the Go
--- test removes when the test ends (os.tmpname's files stay in /tmp).
local made = 0
function M.tmpdir()
  made = made + 1
  return TESTDIR .. "/" .. made
end

return M
