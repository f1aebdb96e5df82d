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

-- Each setting has one name (TRL's where TRL has it); a misspelt one is refused with the
-- nearest, and another trainer's name for it (kl_coef, TRL's PPO one) is no name here.
function T.test_trl_names()
  local p1, r1, o1, b1 = fresh()
  check.errors(function() rook.grpo.step(p1, r1, o1, b1, { kl_coef = 0.05 }) end, 'unknown option "kl_coef"')
  check.errors(function() rook.grpo.step(p1, r1, o1, b1, { betta = 1 }) end, 'unknown option "betta" (did you mean "beta"?)')
  check.errors(function() rook.grpo.step(p1, r1, o1, b1, { epsilon = "wide" }) end, 'option "epsilon": want a number, got the string "wide"')
  check.errors(function() rook.grpo.step(p1, r1, o1, b1, { num_iterations = 1.5 }) end, 'option "num_iterations": want an integer, got 1.5')
  check.errors(function() rook.grpo.step(p1, r1, o1, b1, { lr = 1e-3 }) end, "the learning rate is the optimizer's")
  check.errors(function() rook.grpo.step(p1, r1, o1, b1, { std_eps = 0 }) end, "std_eps must be > 0")
end

function T.test_defaults_and_trl_compat()
  local d = rook.grpo.defaults()
  check.eq(d.loss_type, "grpo")
  check.eq(d.std_ddof, 0)
  check.eq(d.masked_in_denominator, false)
  check.eq(d.entropy_aggregation, "loss")
  check.eq(d.beta, 0, "defaults under the settings' names")
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

-- rook.grpo.plan sizes a run's micro-batches from its sections, and refuses shapes GRPO cannot
-- train before any work.
function T.test_plan()
  local policy = rook.load("random:tiny")
  local p = rook.grpo.plan(policy, { prompts = 2, rollout = { group = 4, max_new_tokens = 8 }, grpo = { beta = 0.1 } })
  check.eq(p.micro_batch, 8, "a whole step fits an ample budget")
  check.truthy(p.bytes <= p.budget and p.bytes > 0 and p.parts.kv_cache > 0, p.text)
  local small = rook.grpo.plan(policy, { prompts = 2, rollout = { group = 4, max_new_tokens = 8 }, grpo = { beta = 0.1 },
                                         budget = p.bytes - 1 })
  check.truthy(small.micro_batch < 8, "a budget below the whole step: smaller micro-batches (" .. small.text .. ")")
  -- The plan is a contract: a run that does not fit is refused, naming what to lower.
  check.errors(function() rook.grpo.plan(policy, { prompts = 2, rollout = { group = 4 }, budget = "1MB" }) end,
    "over its 1.0 MB budget")
  check.errors(function() rook.grpo.plan(policy, { prompts = 2, rollout = { group = 4 }, budget = "1MB" }) end,
    "lower prompts (2), rollout.group (4)")
  check.errors(function() rook.grpo.plan(policy, { prompts = 2, eval_size = 100000000, budget = "8GB" }) end, "eval_size (100000000)")
  check.errors(function() rook.grpo.plan(policy, { prompts = 2, grpo = { micro_batch = 8 }, budget = small.bytes }) end,
    "with micro-batches of 8")
  check.errors(function() rook.grpo.plan(policy, { prompts = 2, rollout = { group = 1 } }) end, "GRPO needs at least 2 per prompt to compare")
  check.errors(function() rook.grpo.plan(policy, { prompts = 0 }) end, "a step needs prompts")
  check.errors(function() rook.grpo.plan(policy, { prompts = 1, rollout = { max_new_tokens = 300 } }) end,
    "leave no room for a prompt in the model's context of 256")
  check.errors(function() rook.grpo.plan(policy, { prompts = 1, eval_size = 4, eval = { max_new_tokens = 256 } }) end,
    "answers of up to 256 tokens")
end

return T
