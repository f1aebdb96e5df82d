--- advantages: advantage estimators written in Lua, for batch:set_advantages. Rewards come in
--- groups of `group` consecutive completions (a batch's order: batch:rewards(), batch.group).
--- Per-completion estimators return one number per completion; kl_shaped returns one list per
--- completion, a number per token. scripts/tests/testdata/gen_algorithms_fixture.py holds each
--- to its reference formula.
local M = {}

local sqrt = math.sqrt

local function check_groups(n, group, who)
  if group < 1 or n % group ~= 0 then
    error(string.format("advantages.%s: %d rewards do not form groups of %d", who, n, group), 3)
  end
end

--- rloo(rewards, group) → advantages: REINFORCE leave-one-out (Ahmadian et al. 2024,
--- arXiv:2402.14740): each reward less the mean of the other rewards of its group,
--- A_i = r_i − (Σ_j r_j − r_i)/(G − 1).
function M.rloo(rewards, group)
  check_groups(#rewards, group, "rloo")
  if group < 2 then error("advantages.rloo: leave-one-out needs groups of 2 or more", 2) end
  local adv = {}
  for g0 = 0, #rewards - 1, group do
    local sum = 0
    for j = 1, group do sum = sum + rewards[g0 + j] end
    for j = 1, group do
      local r = rewards[g0 + j]
      adv[g0 + j] = r - (sum - r) / (group - 1)
    end
  end
  return adv
end

--- reinforce_pp(rewards, group [, opts]) → advantages: REINFORCE++ (Hu 2025, arXiv:2501.03262)
--- with an outcome reward, as verl's core_algos computes it: with opts.baseline (default true,
--- "REINFORCE++-baseline") each reward less its group's mean first; then whitened over the
--- whole batch's tokens (verl's masked_whiten: token-weighted mean, unbiased variance,
--- (x − mean)/sqrt(var + 1e-8)). opts.lengths: each completion's tokens (default 1 each: a
--- whitening over completions).
function M.reinforce_pp(rewards, group, opts)
  opts = opts or {}
  check_groups(#rewards, group, "reinforce_pp")
  local n = #rewards
  local x = {}
  for i = 1, n do x[i] = rewards[i] end
  if opts.baseline ~= false then
    for g0 = 0, n - 1, group do
      local sum = 0
      for j = 1, group do sum = sum + rewards[g0 + j] end
      for j = 1, group do x[g0 + j] = rewards[g0 + j] - sum / group end
    end
  end
  local len = opts.lengths
  local tokens, sum = 0, 0
  for i = 1, n do
    local l = len and len[i] or 1
    tokens, sum = tokens + l, sum + l * x[i]
  end
  local mean, sq = sum / tokens, 0
  for i = 1, n do
    local l = len and len[i] or 1
    sq = sq + l * (x[i] - mean) ^ 2
  end
  local var = (sq / tokens) * tokens / (tokens - 1) -- masked_var, unbiased
  local adv, rs = {}, 1 / sqrt(var + 1e-8)
  for i = 1, n do adv[i] = (x[i] - mean) * rs end
  return adv
end

-- TRL's nanstd: the unbiased std of the numbers that are not NaN, and their mean.
local function nanstats(v)
  local n, sum = 0, 0
  for _, x in ipairs(v) do
    if x == x then n, sum = n + 1, sum + x end
  end
  local mean = sum / n
  local sq = 0
  for _, x in ipairs(v) do
    if x == x then sq = sq + (x - mean) ^ 2 end
  end
  return mean, sqrt(sq / (n - 1))
end

--- gdpo(components, group [, opts]) → advantages: GDPO's normalise-then-sum of several rewards
--- (group reward-decoupled normalisation), as TRL v1.9.0 computes it with
--- multi_objective_aggregation = "normalize_then_sum": each component normalised within each
--- group ((r − mean)/(std + 1e-4), std unbiased, NaN entries left out), weighted and summed (NaN
--- terms skipped), then normalised over the batch ((R − mean)/(std + 1e-4)). components: a list
--- of reward lists (or batch:components(), name → list, whose names are taken in sorted
--- order); opts.weights: one per component, in that order (default 1 each).
function M.gdpo(components, group, opts)
  opts = opts or {}
  local lists = {}
  if #components > 0 then
    lists = components
  else
    local names = {}
    for k in pairs(components) do names[#names + 1] = k end
    table.sort(names)
    for i, k in ipairs(names) do lists[i] = components[k] end
  end
  if #lists == 0 then error("advantages.gdpo: no reward components", 2) end
  local n = #lists[1]
  check_groups(n, group, "gdpo")
  local total = {}
  for i = 1, n do total[i] = 0 end
  for k, r in ipairs(lists) do
    if #r ~= n then error(string.format("advantages.gdpo: component %d has %d rewards, the first %d", k, #r, n), 2) end
    local w = opts.weights and opts.weights[k] or 1
    for g0 = 0, n - 1, group do
      local slice = {}
      for j = 1, group do slice[j] = r[g0 + j] end
      local mean, std = nanstats(slice)
      for j = 1, group do
        local v = (r[g0 + j] - mean) / (std + 1e-4) * w
        if v == v then total[g0 + j] = total[g0 + j] + v end
      end
    end
  end
  local mean, std = nanstats(total)
  local adv = {}
  for i = 1, n do adv[i] = (total[i] - mean) / (std + 1e-4) end
  return adv
end

--- kl_shaped(advantages, logp, ref_logp, coef [, discount]) → per-token advantages: KL as reward
--- shaping, as Tinker's cookbook (tinker_cookbook.rl, incorporate_kl_penalty) adds it: with
--- d_t = logp_t − ref_logp_t (the sampler's against the reference's) and d̄ their mean over
--- every token of the batch, each token's advantage gains coef·(d̄ − d_t), or with discount γ > 0
--- the discounted sum of those from the token to the end. advantages: one per completion, or one
--- list per completion; logp: batch:logprobs(); ref_logp: ref:score(batch).
function M.kl_shaped(advantages, logp, ref_logp, coef, discount)
  discount = discount or 0
  local sum, count = 0, 0
  for i = 1, #logp do
    for t = 1, #logp[i] do sum, count = sum + (logp[i][t] - ref_logp[i][t]), count + 1 end
  end
  local avg = sum / math.max(count, 1)
  local out = {}
  for i = 1, #logp do
    local n, a = #logp[i], advantages[i]
    local pen = {}
    for t = 1, n do pen[t] = coef * (avg - (logp[i][t] - ref_logp[i][t])) end
    if discount > 0 then
      for t = n - 1, 1, -1 do pen[t] = pen[t] + discount * pen[t + 1] end
    end
    local row = {}
    for t = 1, n do row[t] = (type(a) == "table" and a[t] or a) + pen[t] end
    out[i] = row
  end
  return out
end

--- soft_overlong(lengths, max_len, cache) → penalties: DAPO's soft overlong punishment (Eq. 13;
--- TRL's get_soft_overlong_punishment, v1.10.0.dev0), a reward to add to each completion's:
--- 0 up to max_len − cache tokens, ((max_len − cache) − L)/cache between, −1 beyond max_len.
--- rook.reward.chess adds it itself with the reward setting soft_overlong; this is for recipes
--- that score with rewards of their own.
function M.soft_overlong(lengths, max_len, cache)
  if type(max_len) ~= "number" or max_len < 1 or max_len % 1 ~= 0 then
    error("advantages.soft_overlong: max_len must be an integer >= 1, got " .. tostring(max_len), 2)
  end
  if type(cache) ~= "number" or cache < 0 or cache % 1 ~= 0 or cache > max_len then
    error(string.format("advantages.soft_overlong: cache must be an integer in [0, max_len = %d], got %s", max_len, tostring(cache)), 2)
  end
  local out, free = {}, max_len - cache
  for i, l in ipairs(lengths) do
    if l <= free then out[i] = 0
    elseif l <= max_len then out[i] = (free - l) / cache
    else out[i] = -1 end
  end
  return out
end

return M
