local check = require("check")
local rook = require("rook")

local T = {}

local REWARDS = { 1, 0, 0.5, 0.25, 0, 1, 1, 0.5 }

-- A fresh policy (random:tiny is always the same weights) with a scored rollout.
local function fresh(sampling)
  local policy = rook.load("random:tiny")
  local b = policy:rollout({ "a", "b" }, sampling or { group = 4, max_new_tokens = 4, seed = 3 })
  b:set_rewards(REWARDS)
  return policy, policy:reference(), rook.adamw(policy, { lr = 1e-3 }), b
end

-- Each setting has one canonical name (TRL's where TRL has it); the names used before stay
-- accepted and mean the same.
function T.test_trl_names_and_aliases()
  local p1, r1, o1, b1 = fresh()
  local m1 = rook.grpo.step(p1, r1, o1, b1, { beta = 0.05, epsilon = 0.1, epsilon_high = 0.3, loss_type = "dapo",
    scale_rewards = "batch", importance_sampling_level = "token", num_iterations = 2 })
  local p2, r2, o2, b2 = fresh()
  local m2 = rook.grpo.step(p2, r2, o2, b2, { kl_coef = 0.05, clip_low = 0.1, clip_high = 0.3, aggregation = "dapo",
    scale = "batch", ratio_level = "token", epochs = 2 })
  check.eq(m2.loss, m1.loss, "same loss under the older names")
  check.eq(m2.updates, 2, "epochs is num_iterations")
  check.eq(p2:hash(), p1:hash(), "same weights after the step")
  check.eq(rook.grpo.defaults{ mask_truncated = true }.mask_truncated_completions, true, "mask_truncated")
  check.errors(function() rook.grpo.step(p1, r1, o1, b1, { beta = 0.1, kl_coef = 0.1 }) end, 'option "beta" is given twice, as "beta", "kl_coef"')
  check.errors(function() rook.grpo.step(p1, r1, o1, b1, { klcoef = 1 }) end, 'unknown option "klcoef" (did you mean "kl_coef"?)')
  check.errors(function() rook.grpo.step(p1, r1, o1, b1, { epsilon = "wide" }) end, 'option "epsilon": want a number, got the string "wide"')
  check.errors(function() rook.grpo.step(p1, r1, o1, b1, { num_iterations = 1.5 }) end, 'option "num_iterations": want an integer, got 1.5')
  check.errors(function() rook.grpo.step(p1, r1, o1, b1, { lr = 1e-3 }) end, "the learning rate belongs to the optimizer")
  check.errors(function() rook.grpo.step(p1, r1, o1, b1, { std_eps = 0 }) end, "std_eps must be > 0")
end

function T.test_defaults_and_trl_compat()
  local d = rook.grpo.defaults()
  check.eq(d.loss_type, "grpo")
  check.eq(d.std_ddof, 0)
  check.eq(d.masked_in_denominator, false)
  check.eq(d.entropy_aggregation, "loss")
  check.eq(d.kl_coef, nil, "defaults are under canonical names only")
  local t = rook.grpo.defaults{ trl_compat = true }
  check.eq(t.loss_type, "dapo", "TRL's default loss")
  check.eq(t.std_ddof, 1)
  check.eq(t.masked_in_denominator, true)
  check.eq(t.entropy_aggregation, "token_mean")
  check.eq(rook.grpo.defaults{ trl_compat = true, loss_type = "grpo" }.loss_type, "grpo", "a setting given overrides the preset")
  check.errors(function() rook.grpo.defaults{ trl_compat = true, std_ddof = 0 } end, "trl_compat = true fixes std_ddof = 1")
  local p, r, o, b = fresh()
  local m = rook.grpo.step(p, r, o, b, { trl_compat = true })
  check.eq(m.finite, true)
end

-- How a batch was drawn is on the batch and in the step's metrics; greedy batches are refused
-- unless the recipe says so.
function T.test_sampling_is_recorded()
  local p, r, o, b = fresh{ group = 4, max_new_tokens = 4, seed = 3, temperature = 0.7, top_k = 5, top_p = 0.9 }
  check.eq(b.top_k, 5)
  check.near(b.top_p, 0.9, 1e-12)
  check.near(b.temperature, 0.7, 1e-6)
  check.eq(b.greedy, false)
  local m = rook.grpo.step(p, r, o, b)
  check.eq(m["sampling/top_k"], 5)
  check.near(m["sampling/temperature"], 0.7, 1e-6)
  local gp, gr, go, gb = fresh{ group = 4, max_new_tokens = 4, seed = 3, greedy = true }
  check.eq(gb.greedy, true)
  check.errors(function() rook.grpo.step(gp, gr, go, gb) end, "allow_greedy")
  check.eq(rook.grpo.step(gp, gr, go, gb, { allow_greedy = true })["sampling/greedy"], 1)
  check.errors(function() p:rollout({ "a" }, { group = 2, topk = 5 }) end, 'unknown option "topk" (did you mean "top_k"?)')
  check.errors(function() p:generate("a", { group = 2 }) end, "n, not group")
end

-- Test-only hooks live under rook.debug, not on the model.
function T.test_debug_hooks()
  local p, r, o, b = fresh()
  check.eq(p.inject_nan, nil, "no inject_nan method on a model")
  rook.debug.inject_nan(p)
  local m = rook.grpo.step(p, r, o, b)
  check.eq(m.finite, false)
end

-- rook.check reads option tables as the calls will, naming the bad key.
function T.test_check()
  rook.check{ grpo = { beta = 0.1, loss_type = "dapo" }, rollout = { group = 4, top_p = 0.9 }, adamw = { lr = 1e-4 } }
  check.errors(function() rook.check{ grpo = { beta = 0 / 0 } } end, "rook.check: rook.grpo.step: beta must be a finite number ≥ 0, got NaN")
  check.errors(function() rook.check{ rollout = { temperature = 0 } } end, "rook.check: policy:rollout: temperature must be > 0")
  check.errors(function() rook.check{ adamw = { lr_schedule = "cosinee" } } end, 'rook.check: rook.adamw: lr_schedule "cosinee"')
  check.errors(function() rook.check{ adam = {} } end, 'unknown option set "adam" (did you mean "adamw"?)')
  local policy = rook.load("random:tiny")
  check.errors(function() rook.check{ rollout = { max_new_tokens = 300 }, model = policy } end, "max_new_tokens must be < 256")
  rook.check{ rollout = { max_new_tokens = 200 }, model = policy }
end

return T
