local check = require("check")
local recovery = require("recovery")

local T = {}

-- Stand-ins with the methods recovery calls, recording what it did.
local function fakes()
  local opt = { value = 1e-3 }
  function opt:lr() return self.value end
  function opt:set_lr(v) self.value = v end
  function opt:scale_lr(f) self.value = self.value * f end
  local run = { rollbacks = 0 }
  function run:rollback() self.rollbacks = self.rollbacks + 1; return 40 end
  return opt, run
end

function T.test_skip_reduce_rollback_stop()
  local opt, run = fakes()
  local rec = recovery.new{ lr_factor = 0.5, rollback_after = 2, stop_after = 3 }
  local bad = { finite = false }
  check.eq(rec:check(1, { finite = true }, { opt = opt, run = run }), "ok")
  check.eq(rec:check(2, bad, { opt = opt, run = run }), "skip")
  check.near(opt:lr(), 5e-4, 1e-15, "lr halved")
  check.eq(rec:check(3, bad, { opt = opt, run = run }), "rollback")
  check.eq(run.rollbacks, 1)
  check.eq(rec:check(4, bad, { opt = opt, run = run }), "stop")
  local report = rec:report()
  check.truthy(string.find(report, "step 3: rollback to step 40", 1, true), report)
  check.truthy(string.find(report, "after 3 unhealthy steps in a row", 1, true), report)
end

-- A rollback that cannot be done (no checkpoint yet: run:rollback raises) stops the run with
-- the reason in the report, instead of reporting "rollback to step nil" and going on.
function T.test_failed_rollback_stops()
  local opt = fakes()
  local run = {}
  function run:rollback() error("run:rollback: no checkpoint saved yet in runs/x: nothing to go back to") end
  local rec = recovery.new{ lr_factor = 0.5, rollback_after = 1, stop_after = 3 }
  check.eq(rec:check(1, { finite = false }, { opt = opt, run = run }), "stop")
  local report = rec:report()
  check.truthy(string.find(report, "a rollback was due but failed", 1, true), report)
  check.truthy(string.find(report, "no checkpoint saved yet in runs/x", 1, true), report)
  check.truthy(not string.find(report, "nil", 1, true), report)
end

function T.test_healthy_step_resets_and_limits()
  local opt, run = fakes()
  local rec = recovery.new{ kl_max = 0.5, grad_norm_max = 10, rollback_after = 0, stop_after = 2 }
  check.eq(rec:check(1, { finite = true, kl = 0.9 }, { opt = opt }), "skip")
  check.eq(rec:check(2, { finite = true, kl = 0.1 }, { opt = opt }), "ok")
  check.eq(rec.consecutive, 0, "reset by a healthy step")
  check.eq(rec:check(3, { finite = true, grad_norm = 50 }, { opt = opt }), "skip")
  check.eq(rec:check(4, { finite = true, grad_norm = 50 }, { opt = opt }), "stop")
  check.eq(run.rollbacks, 0, "rollback disabled")
end

function T.test_kl_early_stop_and_state()
  local rec = recovery.new{ kl_stop = 1 }
  check.eq(rec:check(7, { finite = true, kl = 2 }), "stop")
  check.truthy(string.find(rec:report(), "early stop at step 7", 1, true))
  local other = recovery.new{}
  other:restore(rec:state())
  check.eq(#other.events, 1)
  check.errors(function() recovery.new{ lr_factr = 1 } end, "unknown option 'lr_factr'")
end

return T
