local check = require("check")
local rook = require("rook")

local T = {}

function T.test_config_defaults_and_types()
  local cfg = rook.config{ steps = 10, lr = 1e-5, name = "run", adam = { beta1 = 0.9 }, betas = { 0.9, 0.95 } }
  check.eq(cfg.steps, 10)
  check.eq(cfg.adam.beta1, 0.9)
  check.eq(#cfg.betas, 2)
  check.errors(function() rook.config(5) end, "bad argument #1")
end

function T.test_load_errors_are_values()
  local m, err = rook.load("no/such/model")
  check.eq(m, nil)
  check.truthy(string.find(err, "model not found: no/such/model", 1, true), "message names the path")
  check.errors(function() rook.load("random:tiny", { devise = "cpu" }) end, 'unknown option "devise"')
  local _, derr = rook.load("random:tiny", { device = "tpu" })
  check.truthy(string.find(derr, "unknown device", 1, true), "unknown device")
end

function T.test_model_generate_rollout_step()
  local policy = rook.load("random:tiny")
  check.truthy(policy.random, "random model is marked")
  local ref = policy:reference()
  check.truthy(ref.frozen, "reference is frozen")
  check.eq(ref:hash(), policy:hash(), "reference equals the policy it was taken from")
  local text = policy:generate("e2e4 ", { max_new_tokens = 5, seed = 1 })
  check.eq(type(text), "string")
  check.eq(policy:generate("e2e4 ", { max_new_tokens = 5, seed = 1 }), text, "same seed, same text")

  local opt = rook.adamw(policy, { lr = 1e-3, betas = { 0.9, 0.95 }, weight_decay = 0.01 })
  local b = policy:rollout({ "a", { prompt = "b" } }, { group = 3, max_new_tokens = 4, seed = 7, temperature = 0.9 })
  check.eq(#b, 6, "2 prompts × group 3")
  check.eq(b.size, 6)
  check.eq(b.group, 3)
  check.eq(b[1].prompt, "a")
  check.eq(b[4].prompt, "b")
  check.errors(function() rook.grpo.step(policy, ref, opt, b) end, "rewards")
  rook.reward.fn(b, function(prompt, text, c) return c.tokens end)
  check.truthy(b.scored, "scored")
  local m = rook.grpo.step(policy, ref, opt, b, { beta = 0.01, epsilon = 0.2 })
  check.eq(m.finite, true, "finite")
  check.eq(m.updates, 1, "one update")
  check.truthy(m["ratio/first_max_abs_log"] < 1e-5, "ratio is 1 before the update")
  check.truthy(math.abs(m["kl/first_max"]) < 1e-5, "KL is 0 before the update")
  check.truthy(policy:hash() ~= ref:hash(), "policy moved, reference did not")
  check.errors(function() rook.grpo.step(policy, ref, opt, b, { loss_type = "sum" }) end, 'loss_type "sum"')
  check.errors(function() rook.grpo.step(policy, ref, opt, b, { klcoef = 1 }) end, 'unknown option "klcoef"')
  check.errors(function() rook.grpo.step(ref, nil, opt, b) end, "another model")
end

-- A completion ended by a stop is finished, not truncated: its text ends with the token that
-- completed the stop, and the step scores exactly its tokens (DESIGN §6.1, §6.2: the first
-- ratio is 1 and the KL 0 bit for bit, stop-, limit- and EOT-ended completions mixed).
function T.test_stop_strings_finish_completions()
  local policy = rook.load("random:tiny")
  local ref, opt = policy:reference(), rook.adamw(policy, { lr = 1e-3 })
  local b = policy:rollout({ "a", "b" }, { group = 8, max_new_tokens = 3, seed = 8, stop = { "e", "o" } })
  local stopped, truncated = 0, 0
  for i = 1, #b do
    local c = b[i]
    if c.stop then
      stopped = stopped + 1
      check.eq(c.truncated, false, "a stopped completion is not truncated")
      check.truthy(string.find(c.text, c.stop, 1, true), "its text holds its stop string")
    elseif c.truncated then
      truncated = truncated + 1
    end
  end
  check.truthy(stopped > 0 and truncated > 0, "the batch mixes stopped and truncated completions")
  rook.reward.fn(b, function(_, text) return #text end)
  local m = rook.grpo.step(policy, ref, opt, b, { beta = 0.01 })
  check.eq(m["ratio/first_max_abs_log"], 0, "ratio is 1 bit for bit")
  check.eq(m["kl/first_max"], 0, "KL is 0 bit for bit")
  check.errors(function() policy:rollout({ "a" }, { stop_rule = "chess" }) end, 'stop_rule "chess"')
end

function T.test_nan_gradient_is_skipped()
  local policy = rook.load("random:tiny")
  local opt = rook.adamw(policy, { lr = 1e-2 })
  local b = policy:rollout({ "x" }, { group = 4, max_new_tokens = 3, seed = 3 })
  b:set_rewards({ 1, 0, 0.5, 0.25 })
  local before = policy:hash()
  rook.debug.inject_nan(policy)
  local m = rook.grpo.step(policy, nil, opt, b)
  check.eq(m.finite, false, "non-finite step reported")
  check.eq(m.skipped, 1, "update skipped")
  check.eq(policy:hash(), before, "weights untouched")
  m = rook.grpo.step(policy, nil, opt, b)
  check.eq(m.finite, true, "next step runs")
end

function T.test_reference_sync_is_explicit()
  local policy = rook.load("random:tiny")
  local ref = policy:reference()
  local opt = rook.adamw(policy, { lr = 1e-2 })
  local b = policy:rollout({ "x" }, { group = 4, max_new_tokens = 3, seed = 3 })
  b:set_rewards({ 1, 0, 0.5, 0.25 })
  rook.grpo.step(policy, ref, opt, b)
  local h = ref:hash()
  check.truthy(h ~= policy:hash(), "reference unchanged by training")
  check.eq(ref:sync(policy, 1), policy:hash(), "sync copies the policy")
  check.errors(function() policy:sync(ref) end, "sync is for references")
end

function T.test_progress()
  local p = rook.progress{ total = 3, label = "loop" }
  for i = 1, 3 do p:update(i, { loss = 1 / i }) end
  p:done()
  check.errors(function() rook.progress{ totl = 3 } end, 'unknown option "totl"')
end

function T.test_tokenizer()
  local ids = rook.encode("Hello world")
  check.eq(ids[1], 15496)
  check.eq(ids[2], 995)
  check.eq(rook.decode(ids), "Hello world")
  check.eq(rook.eot, 50256)
  local s, err = rook.decode({ 99999 })
  check.eq(s, nil)
  check.truthy(err, "bad id is an error value")
end

return T
