-- diagnose: the single-batch health check to run before a long run, on your own model, data
-- and settings. Prints PASS/FAIL for each invariant the numeric core promises and each
-- reward sanity check, then overfits one batch for a few steps to show the reward moving.
-- Exit code: 0 when no check FAILs (SKIP: not checkable on this batch), 1 when one does.
--
--   rookscript recipes/diagnose.lua model=path/to/RookWorld-LM-124M prompts=4 group=8
local rook = require("rook")

local cfg = rook.config({
  model = "default", positions = "generator", seed = 1, env_fraction = 0.5, device = "cpu",
  prompts = 4, overfit_steps = 5, overfit_lr = 2e-4,
  rollout = { group = 8, max_new_tokens = 72 },
  grpo = { beta = 0.02 },
  adamw = { lr = 5e-5 },
  reward = { malformed = -0.3 },
  stockfish = { depth = 8, workers = 2 },
}, { prompts = "integer >= 1", env_fraction = "[0, 1]", overfit_steps = "integer >= 2", overfit_lr = "> 0" })

local failed = {}
-- report(ok, name, detail): ok is true (PASS), false (FAIL) or "skip" (not checkable here).
local function report(ok, name, detail)
  if not ok then failed[#failed + 1] = name end
  local mark = ok == "skip" and "SKIP" or (ok and "PASS" or "FAIL")
  print(string.format("%s  %-44s %s", mark, name, detail or ""))
end

local sf = assert(rook.stockfish(cfg.stockfish))
local policy = assert(rook.load(cfg.model, { device = cfg.device, engine = sf }))
rook.grpo.plan(policy, { prompts = cfg.prompts, rollout = cfg.rollout, grpo = cfg.grpo }) -- the shapes fit the model
report(not policy.random, "model is trained, not random", policy.random and "RANDOM weights: rewards will be floors" or policy.source)
local ref = policy:reference()
local opt = rook.adamw(policy, cfg.adamw)
local source = cfg.positions == "generator" and { generator = { seed = cfg.seed, max_ply = 80 } }
  or { path = cfg.positions, seed = cfg.seed }
source.task, source.env_fraction = "mix", cfg.env_fraction
local data = assert(rook.positions(source))
local prompts = data:next(cfg.prompts)

cfg.rollout.seed = cfg.seed
local batch = policy:rollout(prompts, cfg.rollout)
local packed, alone = batch:logprob_gap(policy)
report(packed == 0 and alone == 0, "sampler logprobs = training forward, bit for bit",
       string.format("max |Δ| %.2g packed, %.2g alone", packed, alone))

local r = rook.reward.chess(batch, cfg.reward, sf)
local st = batch:stats()
local c = r.components
report((c.malformed or 1) < 1, "some completions parse", string.format("malformed %.0f%%", 100 * (c.malformed or 1)))
report((c["policy/moves_legal"] or 0) > 0 or (c["env/fen_exact"] or 0) > 0, "some answers are right",
       string.format("P: legal moves %.2f, A: exact FEN %.2f", c["policy/moves_legal"] or 0, c["env/fen_exact"] or 0))
report(st.reward_std > 0, "rewards differ (there is a signal)",
       string.format("mean %.3f std %.3f min %.3f max %.3f", st.reward_mean, st.reward_std, st.reward_min, st.reward_max))

-- A step stops before its first update when a token's logprob is not the one its sampler
-- recorded (DESIGN §6.1): that error is a FAIL here, not a crash.
local ok, m = pcall(rook.grpo.step, policy, ref, opt, batch, cfg.grpo)
if not ok then
  report(false, "the first GRPO step runs", tostring(m))
  error(string.format("diagnose: %d check(s) failed: %s", #failed, table.concat(failed, "; ")))
end
report(m["ratio/first_max_abs_log"] == 0, "ratio = 1 exactly before the first update",
       string.format("max |log ratio| %.2g", m["ratio/first_max_abs_log"]))
report(m["clip_ratio/region_mean"] == 0, "nothing clipped before the first update",
       string.format("clip fraction %.3f", m["clip_ratio/region_mean"]))
report((m["kl/first_max"] or 0) == 0, "KL = 0 exactly to the initial policy", string.format("max KL %.2g", m["kl/first_max"] or 0))
report(m.finite, "loss and gradient are finite", string.format("loss %.4g", m.loss or 0 / 0))
local zero = {}
for k, v in pairs(m) do
  if string.sub(k, 1, 10) == "grad_norm/" and k ~= "grad_norm/max" and v == 0 then zero[#zero + 1] = string.sub(k, 11) end
end
if st.reward_std == 0 then
  -- Equal rewards make every advantage 0: a zero gradient is then correct (DESIGN §6.3).
  report("skip", "every layer receives a gradient", "no reward signal in this batch")
else
  report(#zero == 0 and (m.grad_norm or 0) > 0, "every layer receives a gradient",
         #zero == 0 and string.format("grad norm %.3g", m.grad_norm or 0) or "zero in " .. table.concat(zero, ", "))
end

-- Overfit: the same prompts again and again with a larger learning rate; the reward should rise
-- by more than noise. Equal rewards within every group give no gradient: then nothing can rise.
opt:set_lr(cfg.overfit_lr)
local first, last, signal = nil, nil, false
for step = 1, cfg.overfit_steps do
  cfg.rollout.seed = cfg.seed + step
  local b = policy:rollout(prompts, cfg.rollout)
  rook.reward.chess(b, cfg.reward, sf)
  local om = rook.grpo.step(policy, ref, opt, b, cfg.grpo)
  print(string.format("      overfit step %d: reward %.3f  kl %.4f", step, om.reward, om.kl or 0))
  first = first or om.reward
  last = om.reward
  signal = signal or om.frac_reward_zero_std < 1 -- a group whose rewards differ
end
local MIN_GAIN = 0.01 -- a hundredth of a reward: a smaller rise is no evidence that the updates work
if not signal then
  report("skip", "overfitting one batch raises the reward", "no reward signal: every group's rewards were equal")
else
  report(last > first + MIN_GAIN, "overfitting one batch raises the reward",
         string.format("%.3f → %.3f (want a rise > %.2f)", first, last, MIN_GAIN))
end
assert(#failed == 0, string.format("diagnose: %d check(s) failed: %s", #failed, table.concat(failed, "; ")))
print("all checks passed")
return { failures = 0 }
