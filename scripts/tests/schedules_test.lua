local check = require("check")
local sched = require("schedules")

local T = {}

function T.test_kl_warmup_kinds()
  local cfg = { beta = 0.1, kl_warmup = 10 }
  check.near(sched.kl_warmup(5, cfg), 0.05, 1e-12, "linear halfway")
  check.near(sched.kl_warmup(5, { kl_coef = 0.1, kl_warmup = 10 }), 0.05, 1e-12, "kl_coef, the older name")
  check.near(sched.kl_warmup(20, cfg), 0.1, 1e-12, "linear after warm-up")
  cfg.kl_schedule = "step"
  check.eq(sched.kl_warmup(9, cfg), 0, "step before")
  check.eq(sched.kl_warmup(10, cfg), 0.1, "step at")
  cfg.kl_schedule = "constant"
  check.eq(sched.kl_warmup(1, cfg), 0.1, "constant")
  cfg.kl_schedule = "sigmoid"
  check.errors(function() sched.kl_warmup(1, cfg) end, "unknown kl_schedule 'sigmoid'")
end

function T.test_lr_schedules()
  local cfg = { lr = 1e-4, lr_warmup = 4, steps = 104, lr_schedule = "cosine", lr_min = 1e-5 }
  check.near(sched.lr(2, cfg), 5e-5, 1e-15, "warm-up")
  check.near(sched.lr(4, cfg), 1e-4, 1e-15, "peak")
  check.near(sched.lr(54, cfg), 5.5e-5, 1e-12, "cosine midpoint")
  check.near(sched.lr(104, cfg), 1e-5, 1e-15, "end")
  cfg.lr_schedule = "constant"
  check.eq(sched.lr(50, cfg), 1e-4, "constant")
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
