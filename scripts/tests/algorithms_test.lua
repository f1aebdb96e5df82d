local check = require("check")
local rook = require("rook")
local adv = require("advantages")
local losses = require("losses")

-- Each estimator and loss against its reference on testdata/algorithms_fixture.lua, written by
-- testdata/gen_algorithms_fixture.py from the sources' formulas (its header names each source
-- and version); the losses' gradients there come from automatic differentiation.
local fx = dofile("tests/testdata/algorithms_fixture.lua")
local I, W, S = fx.inputs, fx.want, fx.settings

local T = {}

-- DAPO's soft overlong punishment against TRL's get_soft_overlong_punishment on a table of
-- lengths: its docstring's example (max 100, cache 20: 90 tokens give −0.5) and the edges.
function T.test_soft_overlong()
  local got = adv.soft_overlong({ 50, 80, 81, 90, 100, 101, 200 }, 100, 20)
  local want = { 0, 0, -0.05, -0.5, -1, -1, -1 }
  for i = 1, #want do check.near(got[i], want[i], 1e-12, "length " .. i) end
  local none = adv.soft_overlong({ 100, 101 }, 100, 0) -- cache 0: only past max_len
  check.eq(none[1], 0, "cache 0, at max_len")
  check.eq(none[2], -1, "cache 0, beyond")
  check.errors(function() adv.soft_overlong({ 1 }, 72, 80) end, "cache must be an integer in [0, max_len = 72], got 80")
  check.errors(function() adv.soft_overlong({ 1 }, 0, 0) end, "max_len must be an integer >= 1")
end

local TOL = 1e-6

local function near_list(got, want, what)
  check.eq(#got, #want, what .. ": length")
  for i = 1, #want do
    if type(want[i]) == "table" then
      near_list(got[i], want[i], what .. "[" .. i .. "]")
    else
      check.near(got[i], want[i], TOL * math.max(1, math.abs(want[i])), what .. "[" .. i .. "]")
    end
  end
end

function T.test_advantage_estimators()
  near_list(adv.rloo(I.rewards, S.group), W.rloo, "rloo")
  near_list(adv.reinforce_pp(I.rewards, S.group, { lengths = I.lengths }), W.reinforce_pp_baseline, "reinforce_pp baseline")
  near_list(adv.reinforce_pp(I.rewards, S.group, { lengths = I.lengths, baseline = false }), W.reinforce_pp, "reinforce_pp")
  near_list(adv.gdpo(I.components, S.group, { weights = S.gdpo_weights }), W.gdpo, "gdpo")
  near_list(adv.kl_shaped(I.advantages, I.sampled, I.ref, S.kl_coef), W.kl_shaped, "kl_shaped")
  near_list(adv.kl_shaped(I.advantages, I.sampled, I.ref, S.kl_coef, S.kl_discount), W.kl_shaped_discounted, "kl_shaped discounted")
  check.errors(function() adv.rloo({ 1, 2, 3 }, 2) end, "3 rewards do not form groups of 2")
end

-- The fixture's completions as a loss function receives them.
local function sequences()
  local seqs, tokens, longest = {}, 0, 0
  for i = 1, #I.lengths do
    local n = I.lengths[i]
    local a, ones = {}, {}
    for t = 1, n do a[t], ones[t] = I.advantages[i], 1 end
    seqs[i] = { logp = I.logp[i], logp_detached = I.logp[i], old_logp = I.sampled[i], ref_logp = I.ref[i],
                advantages = a, mask = ones, n = n, completion = i, group = math.floor((i - 1) / S.group) + 1 }
    tokens, longest = tokens + n, math.max(longest, n)
  end
  return seqs, { sequences = #seqs, tokens = tokens, max_new_tokens = longest }
end

function T.test_losses_match_references()
  local seqs, info = sequences()
  for name, loss in pairs{ cispo = losses.cispo(S.cispo), dro = losses.dro(S.dro), luspo = losses.luspo(S.luspo) } do
    local l, g = loss(seqs, info)
    check.near(l, W[name].loss, TOL * math.max(1, math.abs(W[name].loss)), name .. " loss")
    near_list(g, W[name].dlogp, name .. " dlogp")
  end
end

-- Every shipped Lua loss passes the gradient check (CISPO's clipped ratio is a stop-gradient:
-- it reads logp_detached, which the check holds still).
function T.test_losses_pass_gradcheck()
  for name, loss in pairs{ grpo = losses.grpo{ beta = 0.04, kl_estimator = "k2" }, gspo = losses.grpo{ importance_sampling_level = "sequence", beta = 0.02 },
      dr_grpo = losses.grpo{ loss_type = "dr_grpo", entropy_coef = 0.01 }, cispo = losses.cispo(S.cispo),
      dro = losses.dro(S.dro), luspo = losses.luspo(S.luspo) } do
    local ok, r = rook.gradcheck(loss, { entropy = name == "dr_grpo", completions = 6 })
    check.truthy(ok, name .. ": " .. tostring(r.text))
  end
end

return T
