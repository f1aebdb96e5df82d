local check = require("check")
local sched = require("schedules")

local T = {}

function T.test_kl_warmup_kinds()
  check.near(sched.kl_warmup(5, 0.1, 10), 0.05, 1e-12, "linear halfway (the default kind)")
  check.near(sched.kl_warmup(5, 0.1, 10, "linear"), 0.05, 1e-12, "linear halfway")
  check.near(sched.kl_warmup(20, 0.1, 10, "linear"), 0.1, 1e-12, "linear after warm-up")
  check.eq(sched.kl_warmup(9, 0.1, 10, "step"), 0, "step before")
  check.eq(sched.kl_warmup(10, 0.1, 10, "step"), 0.1, "step at")
  check.eq(sched.kl_warmup(1, 0.1, 10, "constant"), 0.1, "constant")
  check.eq(sched.kl_warmup(1, 0.1, 0, "linear"), 0.1, "no warm-up")
  check.errors(function() sched.kl_warmup(1, 0.1, 10, "sigmoid") end, "unknown kind 'sigmoid'")
end

function T.test_adaptive_kl_moves_toward_target()
  local ctl = sched.adaptive_kl{ target = 0.02, init = 0.1, horizon = 10 }
  local b0 = ctl.beta
  ctl:update(0.2) -- KL far above target: β grows (by at most 20% · batch/horizon)
  check.near(ctl.beta, b0 * 1.02, 1e-12, "grow")
  ctl:update(0.0) -- below target: β shrinks
  check.truthy(ctl.beta < b0 * 1.02, "shrinks")
  local before = ctl.beta
  ctl:update(0 / 0) -- NaN measurement: unchanged
  check.eq(ctl.beta, before, "NaN ignored")
  local other = sched.adaptive_kl{ target = 0.02 }
  other:restore(ctl:state())
  check.eq(other.beta, ctl.beta, "state round trip")
end

return T
