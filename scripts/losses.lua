--- losses: policy losses written in Lua, for policy:forward_backward(batch, loss, ...).
--- Each constructor returns a loss function f(seqs, info) → loss, dlogp [, dent]: seqs holds
--- the micro-batch's completions whole (logp, logp_detached, old_logp, ref_logp, entropy,
--- advantages, mask, n), info the minibatch's totals (sequences, tokens, max_new_tokens), so a
--- loss normalised by them does not depend on how the minibatch is split. Every function here
--- passes rook.gradcheck; scripts/tests/testdata/gen_algorithms_fixture.py holds each to its
--- reference formula. The token-level ones (grpo at the token level, cispo, dro) normalise by a
--- completion's length n, not by #logp, so they also run with forward_backward's
--- { token_level = true }, which hands them the pieces of completions an LM-head chunk holds.
local M = {}

local exp, min, max = math.exp, math.min, math.max

local function clip(x, lo, hi) return min(max(x, lo), hi) end

-- One token's KL(π‖π_ref) estimate and its derivative in x = logp, for r = logp_ref.
local function kl(estimator, x, r)
  local d = r - x
  if estimator == "k1" then return -d, 1 end
  if estimator == "k2" then return 0.5 * d * d, -d end
  local e = exp(d)
  return e - d - 1, 1 - e
end

-- The weight of each token of a completion of n tokens in the GRPO family's aggregation.
local function weight(loss_type, n, info)
  if loss_type == "grpo" then return 1 / (n * info.sequences) end
  if loss_type == "dapo" or loss_type == "bnpo" then return 1 / info.tokens end
  if loss_type == "dr_grpo" then return 1 / (info.sequences * info.max_new_tokens) end
  error("losses.grpo: unknown loss_type '" .. tostring(loss_type) .. "'", 3)
end

--- grpo(settings) → loss: rook.grpo.step's loss (engine/grpo's sequenceLoss) in Lua: the clipped
--- surrogate at the token or sequence level (GSPO), an optional β·KL term and entropy bonus,
--- aggregated by loss_type. settings: a grpo section or a table with epsilon, epsilon_high,
--- loss_type, importance_sampling_level, beta, kl_estimator, entropy_coef (other keys are
--- ignored). entropy_coef needs forward_backward's { entropy = true }.
function M.grpo(s)
  s = s or {}
  local eps = s.epsilon or 0.2
  local eps_high = (s.epsilon_high and s.epsilon_high > 0) and s.epsilon_high or eps
  local loss_type, beta = s.loss_type or "grpo", s.beta or 0
  local estimator, ent_coef = s.kl_estimator or "k3", s.entropy_coef or 0
  local sequence = (s.importance_sampling_level or "token") == "sequence"
  return function(seqs, info)
    local loss, dlogp, dent = 0, {}, {}
    for i, q in ipairs(seqs) do
      local n = #q.logp
      local w = weight(loss_type, q.n or n, info)
      local g, h = {}, {}
      local seq_ratio, seq_grad = 0, 0
      if sequence then
        if (q.n or n) ~= n then error("losses.grpo: the sequence level needs whole completions (no token_level)", 2) end
        for t = 1, n do seq_ratio = seq_ratio + (q.logp[t] - q.old_logp[t]) end
        seq_ratio = exp(seq_ratio / n)
      end
      for t = 1, n do
        local x, a = q.logp[t], q.advantages[t]
        local ratio = sequence and seq_ratio or exp(x - q.old_logp[t])
        local c = clip(ratio, 1 - eps, 1 + eps_high)
        local pg, dpg = -c * a, 0
        if ratio * a <= c * a then pg, dpg = -ratio * a, -a end
        local k, dk = 0, 0
        if beta > 0 then k, dk = kl(estimator, x, q.ref_logp[t]) end
        local ent = q.entropy and q.entropy[t] or 0
        loss = loss + w * (pg + beta * k) - ent_coef * w * ent
        local gt = beta * dk
        if sequence then seq_grad = seq_grad + w * dpg else gt = gt + dpg * ratio end
        g[t], h[t] = w * gt, -ent_coef * w
      end
      if sequence then
        local d = seq_grad * seq_ratio / n
        for t = 1, n do g[t] = g[t] + d end
      end
      dlogp[i], dent[i] = g, h
    end
    if ent_coef ~= 0 then return loss, dlogp, dent end
    return loss, dlogp
  end
end

--- cispo(settings) → loss: CISPO as TRL v1.9.0 computes it (loss_type = "cispo"):
--- −sg(min(ρ_t, epsilon_high))·A·logp_t per token, plus β·k3 when beta > 0, summed and divided
--- by the minibatch's tokens. settings: epsilon_high (the bound on the ratio itself, default
--- 5.0), beta (0). The clipped ratio is read from logp_detached: a stop-gradient.
function M.cispo(s)
  s = s or {}
  local eps_max, beta = s.epsilon_high or 5.0, s.beta or 0
  return function(seqs, info)
    local loss, dlogp = 0, {}
    local w = 1 / info.tokens
    for i, q in ipairs(seqs) do
      local g = {}
      for t = 1, #q.logp do
        local x, a = q.logp[t], q.advantages[t]
        local c = min(exp(q.logp_detached[t] - q.old_logp[t]), eps_max)
        local k, dk = 0, 0
        if beta > 0 then k, dk = kl("k3", x, q.ref_logp[t]) end
        loss = loss + w * (-c * a * x + beta * k)
        g[t] = w * (-c * a + beta * dk)
      end
      dlogp[i] = g
    end
    return loss, dlogp
  end
end

--- dro(settings) → loss: DRO as Tinker's docs give it (loss_fn "dro"):
--- −(logp·A − ½β(logp − logp_sampler)²) summed over every token. settings: beta (0.05).
function M.dro(s)
  s = s or {}
  local beta = s.beta or 0.05
  return function(seqs)
    local loss, dlogp = 0, {}
    for i, q in ipairs(seqs) do
      local g = {}
      for t = 1, #q.logp do
        local x, a = q.logp[t], q.advantages[t]
        local d = x - q.old_logp[t]
        loss = loss - (x * a - 0.5 * beta * d * d)
        g[t] = -(a - beta * d)
      end
      dlogp[i] = g
    end
    return loss, dlogp
  end
end

--- luspo(settings) → loss: LUSPO as TRL v1.9.0 computes it (loss_type = "luspo" with
--- importance_sampling_level = "sequence"): GSPO's sequence ratio s = exp(mean_t(logp − old)),
--- the clipped surrogate −min(sA, clip(s, 1−ε, 1+ε_high)A) of each completion scaled by its
--- length, and the mean over the minibatch's sequences. A is the completion's advantage (its
--- first token's). settings: epsilon (0.2), epsilon_high (0: epsilon).
function M.luspo(s)
  s = s or {}
  local eps = s.epsilon or 0.2
  local eps_high = (s.epsilon_high and s.epsilon_high > 0) and s.epsilon_high or eps
  return function(seqs, info)
    local loss, dlogp = 0, {}
    for i, q in ipairs(seqs) do
      local n, a = #q.logp, q.advantages[1]
      if (q.n or n) ~= n then error("losses.luspo: a sequence-level loss needs whole completions (no token_level)", 2) end
      local lr = 0
      for t = 1, n do lr = lr + (q.logp[t] - q.old_logp[t]) end
      local ratio = exp(lr / n)
      local c = clip(ratio, 1 - eps, 1 + eps_high)
      local pg, dpg = -c * a, 0
      if ratio * a <= c * a then pg, dpg = -ratio * a, -a end
      loss = loss + n * pg / info.sequences
      local d = dpg * ratio / info.sequences -- n·(∂pg/∂s)·(s/n) / B
      local g = {}
      for t = 1, n do g[t] = d end
      dlogp[i] = g
    end
    return loss, dlogp
  end
end

return M
