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

--- steps(run, last, body): body(step) for each step after run.step through last, then the
--- run's records; the run is closed even when body raises, and the error raised again.
function M.steps(run, last, body)
  local ok, err = pcall(function()
    for step = run.step + 1, last do body(step) end
  end)
  local recs = run:metrics()
  run:close()
  if not ok then error(err, 0) end
  return recs
end

--- resumes_exactly(train, steps, keys) (DESIGN §6.7): train(dir, steps [, save_at [, resume]])
--- → hash, records runs straight through `steps`, then to steps/2 saving there and, resumed,
--- on to `steps`. The resumed run must have a record per step, each key of keys as the straight
--- run's, and its weights. Returns the straight run's records.
function M.resumes_exactly(train, steps, keys)
  local want_h, want = train(M.tmpdir(), steps)
  local dir = M.tmpdir()
  local half = math.floor(steps / 2)
  train(dir, half, half)
  local h, got = train(nil, steps, nil, dir)
  M.eq(#got, steps, "a record per step")
  for i, r in ipairs(want) do
    for _, k in ipairs(keys) do M.eq(got[i][k], r[k], k .. " at step " .. r.step) end
  end
  M.eq(h, want_h, "weights")
  return want
end

return M
