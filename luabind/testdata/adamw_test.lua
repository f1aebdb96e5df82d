local check = require("check")
local rook = require("rook")

local T = {}

local tmpdir = check.tmpdir

-- One GRPO step with signal: exactly one optimizer update.
local function train_step(policy, opt, seed)
  local b = policy:rollout({ "a", "b" }, { group = 4, max_new_tokens = 4, seed = seed })
  b:set_rewards({ 1, 0, 0.5, 0.25, 0, 1, 1, 0.5 })
  return rook.grpo.step(policy, nil, opt, b)
end

local SCHEDULE = { lr = 1e-2, lr_warmup = 2, lr_schedule = "cosine", total_updates = 6, lr_min_ratio = 0.1 }

-- The optimizer owns the learning rate: warm-up then cosine, per update; the step reports
-- the rate it used; scale_lr moves the whole schedule (a recovery policy's lever).
function T.test_schedule_is_the_optimizers()
  local policy = rook.load("random:tiny")
  local opt = rook.adamw(policy, SCHEDULE)
  check.near(opt:lr(), 5e-3, 1e-15, "first warm-up update")
  local m = train_step(policy, opt, 1)
  check.near(m.lr, 5e-3, 1e-15, "the step ran at the scheduled rate")
  check.eq(opt:steps(), 1)
  check.near(opt:lr(), 1e-2, 1e-15, "peak after the warm-up")
  train_step(policy, opt, 2)
  check.near(opt:lr(), 1e-3 + 0.5 * 9e-3 * (1 + math.cos(math.pi / 4)), 1e-15, "cosine, a quarter of the way")
  opt:scale_lr(0.5)
  check.near(opt:lr(), 0.5 * (1e-3 + 0.5 * 9e-3 * (1 + math.cos(math.pi / 4))), 1e-15, "scaled")
  check.near(opt:options().lr, 5e-3, 1e-15, "the peak is scaled too")
  opt:set_lr(2e-2)
  check.near(opt:options().lr, 2e-2, 1e-15, "set_lr sets the peak")
  check.eq(opt:options().lr_schedule, "cosine")
  check.errors(function() opt:scale_lr(0) end, "factor must be a finite number > 0")
  check.errors(function() opt:set_lr(-1) end, "lr must be a finite number ≥ 0")
end

function T.test_options_are_checked()
  local policy = rook.load("random:tiny")
  check.errors(function() rook.adamw(policy, { lr_schedule = "cosinee" }) end, 'lr_schedule "cosinee" is not one of')
  check.errors(function() rook.adamw(policy, { lr_schedule = "cosine", lr_warmup = 5 }) end, "a cosine schedule needs total_updates")
  check.errors(function() rook.adamw(policy, { lr_schedule = "cosine", total_updates = -1 }) end, "total_updates must be ≥ 0")
  check.errors(function() rook.adamw(policy, { betas = { 0.9 } }) end, "betas")
  check.errors(function() rook.adamw(policy, { lr = 0 / 0 }) end, "lr must be a finite number")
  check.errors(function() rook.adamw(policy, { warmup = 3 }) end, 'unknown option "warmup"')
  local opt = rook.adamw(policy, { betas = { 0.8, 0.9 }, eps = 1e-6 })
  check.eq(opt:options().beta1, 0.8)
  check.eq(opt:options().lr_schedule, "constant")
end

-- A checkpoint carries what the schedule needs (the peak rate, scaled by recovery, and the
-- update count): a resumed run continues at the rate the original would have used.
function T.test_schedule_survives_resume()
  local dir = tmpdir()
  local policy = rook.load("random:tiny")
  local opt = rook.adamw(policy, SCHEDULE)
  local run = assert(rook.run{ dir = dir, policy = policy, opt = opt })
  train_step(policy, opt, 1)
  train_step(policy, opt, 2)
  opt:scale_lr(0.5)
  run:save(2)
  run:close() -- a run directory has one writer at a time
  local want = opt:lr()

  local p2 = rook.load("random:tiny")
  local o2 = rook.adamw(p2, SCHEDULE) -- the recipe builds it from the same config
  local r2 = assert(rook.run{ dir = dir, resume = dir, policy = p2, opt = o2 })
  check.eq(r2.step, 2)
  check.eq(o2:steps(), 2, "update count restored")
  check.eq(o2:lr(), want, "the rate continues where it was, recovery's factor included")
  check.eq(train_step(p2, o2, 3).lr, train_step(policy, opt, 3).lr, "next step at the same rate")
  check.eq(p2:hash(), policy:hash(), "same weights")
end

return T
