local check = require("check")
local rook = require("rook")

local T = {}

-- A recipe's config with sections: each is resolved over its call's defaults, once.
local function config()
  return rook.config{
    steps = 30, seed = 7, depth = 3,
    rollout = { group = 4, max_new_tokens = 16, temperature = 0.8, top_k = 5 },
    grpo = { beta = 0.05, loss_type = "dapo" },
    adamw = { lr = 1e-4, lr_warmup = 3, betas = { 0.9, 0.99 } },
    reward = { malformed = -0.5, policy = { best_rank = 0.6 }, rank_credit = { 1, 0.5 } },
    stockfish = { depth = 6, workers = 2 },
  }
end

function T.test_sections_resolve_over_the_calls_defaults()
  local cfg = config()
  check.eq(cfg.steps, 30, "the recipe's own values stay plain")
  check.eq(cfg.depth, 3, "the recipe's depth is not the pool's")
  check.eq(cfg.grpo.beta, 0.05, "a setting the recipe gave")
  check.eq(cfg.grpo.epsilon, 0.2, "a setting the recipe left: the call's default")
  check.eq(cfg.rollout.seed, 0, "no seed given: each call draws one")
  check.near(cfg.rollout.temperature, 0.8, 1e-6)
  check.eq(cfg.adamw.beta2, 0.99, "betas = {beta1, beta2}")
  check.eq(cfg.reward.policy.best_rank, 0.6, "a nested table over its defaults")
  check.eq(cfg.reward.policy.candidates, 0.2, "its other weights kept")
  check.eq(cfg.stockfish.depth, 6)
  check.eq(cfg.stockfish.hash_mb, 16, "the pool's default")
  check.eq(type(cfg.grpo), "table", "a section is a plain table")
end

-- A value changed between calls is the recipe's to set; the call that reads the section
-- checks it with the same check as the config did.
function T.test_calls_check_what_the_recipe_set()
  local cfg = config()
  cfg.grpo.beta = 0.1
  check.eq(rook.grpo.defaults(cfg.grpo).beta, 0.1, "a call reads the section as it is now")
  cfg.grpo.beta = -1
  check.errors(function() rook.grpo.defaults(cfg.grpo) end, "grpo: beta must be a finite number ≥ 0, got -1")
  cfg.grpo.beta, cfg.grpo.loss_type = 0.1, "sum"
  check.errors(function() rook.grpo.defaults(cfg.grpo) end, 'loss_type "sum"')
  cfg.grpo.loss_type, cfg.grpo.bta = "dapo", 1
  check.errors(function() rook.grpo.defaults(cfg.grpo) end, 'unknown option "bta" (did you mean "beta"?)')
  cfg.adamw.lr_schedule = "cosinee"
  check.errors(function() rook.adamw(rook.load("random:tiny"), cfg.adamw) end, 'lr_schedule "cosinee" is not one of')
  cfg.adamw.lr_schedule = "cosine" -- total_updates may come later: the optimizer needs it
  check.errors(function() rook.adamw(rook.load("random:tiny"), cfg.adamw) end, "a cosine schedule needs total_updates")
  cfg.adamw.total_updates = 10
  local opt = rook.adamw(rook.load("random:tiny"), cfg.adamw)
  check.eq(opt:options().beta2, 0.99)
  check.eq(opt:options().total_updates, 10)
  check.errors(function() rook.adamw(rook.load("random:tiny"), cfg.grpo) end, 'rook.adamw: unknown option "')
end

-- A rollout draws a seed per call unless the recipe gives one; a section's seed, once set,
-- is the call's.
function T.test_rollout_seed()
  local cfg = config()
  local policy = rook.load("random:tiny")
  cfg.rollout.max_new_tokens = 6
  local a = policy:rollout({ "a" }, cfg.rollout)
  local b = policy:rollout({ "a" }, cfg.rollout)
  check.truthy(a[1].text ~= b[1].text or a[2].text ~= b[2].text, "seeds drawn per call differ")
  cfg.rollout.seed = 11
  local c = policy:rollout({ "a" }, cfg.rollout)
  local d = policy:rollout({ "a" }, { group = 4, max_new_tokens = 6, temperature = 0.8, top_k = 5, seed = 11 })
  for i = 1, 4 do check.eq(c[i].text, d[i].text, "the section's seed is the call's") end
end

function T.test_config_errors_name_their_key()
  check.errors(function() rook.config{ grpo = { beta = -1 } } end, "grpo: beta must be a finite number ≥ 0, got -1")
  check.errors(function() rook.config{ grpo = { bta = 1 } } end, 'unknown option "grpo.bta" (did you mean "beta"?)')
  check.errors(function() rook.config{ grpo = { lr = 1e-4 } } end, 'grpo.lr: the learning rate is the optimizer\'s: adamw.lr')
  check.errors(function() rook.config{ grpo = 3 } end, "recipe defaults: grpo must be a table of rook.grpo.step's settings, got a number")
  check.errors(function() rook.config{ reward = { malformed = 20 } } end, "reward: malformed must be in [-10, 10], got 20")
  check.errors(function() rook.config{ reward = { policy = { best_rnk = 1 } } } end,
    'unknown option "reward.policy.best_rnk" (did you mean "best_rank"?)')
  check.errors(function() rook.config{ eval = { temperature = 0 } } end, "eval: rollout: temperature must be > 0")
  check.errors(function() rook.config{ adamw = { betas = { 0.9 } } } end, "adamw.betas must be {beta1, beta2}")
end

return T
