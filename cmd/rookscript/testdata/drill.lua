-- A fault drill: runs a recipe unchanged (DRILL_RECIPE) with faults injected through the
-- rook functions it calls, so the recipe's own recovery, save and exit-code paths are what
-- is tested.
--
--   DRILL_NAN_AT=3,4         a NaN gradient in the 3rd and 4th rook.grpo.step calls
--   DRILL_BREAK_SAVE_AT=2    before the 2nd rook.grpo.step call, a file takes the place of
--                            DRILL_RUN_DIR/checkpoints (CI runs as root, which ignores modes)
local rook = require("rook")

local nan_at = {}
for n in string.gmatch(os.getenv("DRILL_NAN_AT") or "", "%d+") do nan_at[tonumber(n)] = true end
local break_at = tonumber(os.getenv("DRILL_BREAK_SAVE_AT") or "")

local step, calls = rook.grpo.step, 0
rook.grpo.step = function(policy, ...)
  calls = calls + 1
  if nan_at[calls] then rook.debug.inject_nan(policy) end
  if calls == break_at then
    local dir = assert(os.getenv("DRILL_RUN_DIR"), "DRILL_RUN_DIR")
    assert(os.rename(dir .. "/checkpoints", dir .. "/checkpoints.moved"))
    assert(io.open(dir .. "/checkpoints", "w")):close()
  end
  return step(policy, ...)
end

return dofile(assert(os.getenv("DRILL_RECIPE"), "DRILL_RECIPE"))
