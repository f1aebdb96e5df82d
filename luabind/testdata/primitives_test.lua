local check = require("check")
local rook = require("rook")
local losses = require("losses")

local T = {}

local REWARDS = { 1, 0, 0.5, 0.25, 0, 1, 1, 0.5 }

-- A fresh policy (random:tiny is always the same weights) with a scored rollout.
local function fresh()
  local policy = rook.load("random:tiny")
  local b = policy:rollout({ "a", "b" }, { group = 4, max_new_tokens = 5, seed = 3 })
  b:set_rewards(REWARDS)
  return policy, policy:reference(), rook.adamw(policy, { lr = 1e-3, weight_decay = 0.1 }), b
end

-- rook.grpo.step written with the primitives, as a recipe writes it.
local function composed(policy, ref, opt, batch, s)
  rook.grpo.advantages(batch, s)
  for _ = 1, s.num_iterations do
    for mb = 1, s.minibatches do
      policy:forward_backward(batch, "step", s, { ref = s.beta > 0 and ref or nil, minibatch = mb })
      opt:step(s)
    end
  end
end

-- The primitives composed give rook.grpo.step's weights bit for bit: every loss_type, token
-- and sequence importance sampling, with and without beta, two steps in a row.
function T.test_composition_is_step()
  for _, lt in ipairs{ "grpo", "bnpo", "dapo", "dr_grpo", "cispo", "sapo" } do
    for _, level in ipairs{ "token", "sequence" } do
      for _, beta in ipairs{ 0, 0.05 } do
        local s = rook.grpo.defaults{ loss_type = lt, importance_sampling_level = level, beta = beta, minibatches = 2, micro_batch = 3 }
        local p1, r1, o1, b1 = fresh()
        local p2, r2, o2, b2 = fresh()
        for _ = 1, 2 do
          rook.grpo.step(p1, r1, o1, b1, s)
          composed(p2, r2, o2, b2, s)
        end
        local what = string.format("%s, %s level, beta %g", lt, level, beta)
        check.truthy(o1:steps() > 0, what .. ": the step made updates")
        check.eq(o2:steps(), o1:steps(), what .. ": updates")
        check.eq(p2:diff(p1), 0, what .. ": max |Δw|")
        check.eq(p2:hash(), p1:hash(), what .. ": hash")
      end
    end
  end
end

-- The GRPO loss written in Lua gives the built-in loss's gradient, after one forward.
function T.test_lua_grpo_loss_is_builtin()
  for _, beta in ipairs{ 0, 0.05 } do
    local s = rook.grpo.defaults{ beta = beta }
    local p1, ref, _, b = fresh()
    local p2 = rook.load("random:tiny")
    rook.grpo.advantages(b, s)
    local m1 = p1:forward_backward(b, "grpo", s, { ref = ref })
    local m2 = p2:forward_backward(b, losses.grpo(s), s, { ref = ref })
    local diff, scale = p1:diff(p2, { grads = true })
    check.truthy(scale > 0, "a gradient")
    check.truthy(diff / scale <= 1e-6, string.format("beta %g: max |Δg| / max |g| = %g", beta, diff / scale))
    check.near(m2.loss, m1.loss, 1e-9, "loss")
    local p3 = rook.load("random:tiny")
    p3:forward_backward(b, losses.grpo(s), s, { ref = ref, token_level = true }) -- inside the fused pass, chunk by chunk
    local d3, s3 = p1:diff(p3, { grads = true })
    check.truthy(d3 / s3 <= 1e-6, string.format("token level, beta %g: max |Δg| / max |g| = %g", beta, d3 / s3))
    check.eq(m1["ratio/first_max_abs_log"], 0, "the first forward gives the sampler's log-probabilities")
    check.eq(m2["ratio/first_max_abs_log"], nil, "another model did not sample the batch")
  end
end

-- Tinker's built-in losses train; accumulation over two calls is explicit.
function T.test_tinker_losses()
  for _, name in ipairs{ "importance_sampling", "ppo", "cispo", "dro", "cross_entropy" } do
    local p, _, o, b = fresh()
    local before = p:hash()
    rook.grpo.advantages(b)
    local m = p:forward_backward(b, name, nil, { loss_fn_config = { clip_low_threshold = 0.9 } })
    check.truthy(m.loss == m.loss, name .. ": a loss")
    local u = o:step()
    check.eq(u.updates, 1, name .. ": one update")
    check.truthy(p:hash() ~= before, name .. ": the weights moved")
  end
  local p, _, o, b = fresh()
  rook.grpo.advantages(b)
  p:forward_backward(b, "ppo")
  p:forward_backward(b, "ppo")
  check.eq(o:step().passes, 2, "two passes accumulated")
  check.eq(o:step().updates, 0, "nothing left to apply")
  check.errors(function() p:forward_backward(b, "ppo", { beta = 0.1 }) end, "without a KL or entropy term")
  check.errors(function() p:forward_backward(b, "ppo2") end, 'loss "ppo2" is not one of')
end

-- Advantages per token; the scores of any model; a batch without advantages is refused.
function T.test_advantages_and_scores()
  local p, ref, o, b = fresh()
  check.errors(function() p:forward_backward(b, "grpo") end, "no advantages")
  local lp = ref:score(b)
  check.eq(#lp, 8, "one list per completion")
  local per = {}
  for i = 1, #b do
    per[i] = {}
    check.eq(#lp[i], b[i].tokens, "one log-probability per token")
    for t = 1, b[i].tokens do per[i][t] = (i % 2 == 0) and 1 or -1 end
  end
  b:set_advantages(per)
  check.eq(b:advantages()[2][1], 1)
  local rec = b:logprobs()
  check.eq(rec[1][1], lp[1][1], "the reference (the initial policy) scores what the sampler recorded")
  check.eq(p:forward_backward(b, "grpo").tokens > 0, true)
  check.eq(o:step().updates, 1)
  check.errors(function() b:set_advantages{ 1, 2 } end, "2 advantages for 8 completions")
  check.errors(function() b:set_advantages{ { 1 }, {}, {}, {}, {}, {}, {}, {} } end, "completion 1 has")
end

-- A Lua loss's bad answers are errors that name the function, the completion and the token.
function T.test_lua_loss_errors()
  local p, _, _, b = fresh()
  rook.grpo.advantages(b)
  local function grads(seqs, f)
    local g = {}
    for i, s in ipairs(seqs) do
      g[i] = {}
      for t = 1, #s.logp do g[i][t] = f(i, t) end
    end
    return g
  end
  check.errors(function()
    p:forward_backward(b, function(seqs) local g = grads(seqs, function() return 0 end); g[2][1] = nil; table.remove(g[2]); return 0, g end)
  end, "completion 2: dlogp has")
  check.errors(function()
    p:forward_backward(b, function(seqs) return 0, grads(seqs, function(i, t) return (i == 3 and t == 2) and "x" or 0 end) end)
  end, "completion 3 token 2: dlogp is string, want a number")
  check.errors(function() p:forward_backward(b, function() error("boom") end) end, "boom")
  local err = check.errors(function() p:forward_backward(b, function() return "no" end) end, "as the loss, want a number")
  check.truthy(string.find(err, "primitives_test.lua:", 1, true), "names the function's file and line: " .. err)
end

-- A loss function works on copies: what it writes does not reach the recorded log-probabilities
-- or the reference's.
function T.test_lua_loss_cannot_change_records()
  local p, ref, _, b = fresh()
  rook.grpo.advantages(b)
  local before, refBefore = b:logprobs(), ref:score(b)
  p:forward_backward(b, function(seqs)
    for _, s in ipairs(seqs) do
      for t = 1, #s.logp do s.old_logp[t], s.ref_logp[t] = 0, 0 end
    end
    return losses.grpo{}(seqs, { sequences = #seqs, tokens = 1, max_new_tokens = 5 })
  end, nil, { ref = ref })
  check.eq(b:logprobs()[1][1], before[1][1], "recorded")
  check.eq(ref:score(b)[1][1], refBefore[1][1], "reference")
end

-- A non-finite loss or gradient from Lua skips the update and says where (DESIGN §6.9).
function T.test_lua_loss_nonfinite()
  local p, _, o, b = fresh()
  rook.grpo.advantages(b)
  local before = p:hash()
  local m = p:forward_backward(b, function(seqs, info)
    local l, g = losses.grpo{}(seqs, info)
    g[2][3] = 0 / 0
    return l, g
  end)
  check.eq(m.finite, false)
  check.eq(m.nonfinite, "completion 2 token 3: dlogp is NaN")
  local u = o:step()
  check.eq(u.finite, false)
  check.eq(u.updates, 0)
  check.eq(u.nonfinite, "completion 2 token 3: dlogp is NaN")
  check.eq(p:hash(), before, "weights unchanged")
end

-- rook.gradcheck passes every shipped Lua loss and fails a wrong gradient.
function T.test_gradcheck()
  for name, loss in pairs{ grpo = losses.grpo{ beta = 0.05 }, gspo = losses.grpo{ importance_sampling_level = "sequence" },
      dapo = losses.grpo{ loss_type = "dapo", entropy_coef = 0.01 }, cispo = losses.cispo{ epsilon_high = 1.1 },
      dro = losses.dro{ beta = 0.1 }, luspo = losses.luspo{} } do
    local ok, r = rook.gradcheck(loss, { entropy = name == "dapo" })
    check.truthy(ok, name .. ": " .. tostring(r.text))
    check.truthy(r.checked > 0, name .. ": checked")
  end
  local wrong = function(seqs, info)
    local l, g = losses.grpo{}(seqs, info)
    g[1][1] = g[1][1] * 1.01 -- one token's gradient off by 1%
    return l, g
  end
  local ok, r = rook.gradcheck(wrong)
  check.eq(ok, false, "a wrong gradient fails")
  check.eq(r.worst.completion, 1)
  check.eq(r.worst.token, 1)
end

return T
