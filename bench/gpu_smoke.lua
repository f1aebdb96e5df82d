-- The rookscript command on a GPU, end to end (bench/gpu_check.sh runs it): GPT-2 124M with
-- random weights on device "cuda", rollouts of 4 positions × 8 samples, a reward from a Lua
-- function, and GRPO steps against a KL reference. It fails unless the health checks of
-- DESIGN §6 hold on the device, exactly: the sampler's recorded log-probabilities are the
-- training forward's bit for bit (§6.2; the device's forward is batch-invariant, docs/CUDA.md),
-- and the first minibatch's ratio is 1 against an unchanged policy (§6.1).
--
--   rookscript bench/gpu_smoke.lua                      -- on GPU 0 (a -tags cuda build)
--   rookscript bench/gpu_smoke.lua device=cpu model=random:tiny
local rook = require("rook")

local cfg = rook.config({ device = "cuda", model = "random:124m@seed=1", steps = 2, group = 8, max_new_tokens = 32 })

local fens = {
  "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
  "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3",
  "rnbqkb1r/pp2pppp/3p1n2/8/3NP3/8/PPP2PPP/RNBQKB1R w KQkq - 1 5",
  "8/8/4k3/8/2K5/8/3P4/8 w - - 0 1",
}
local prompts = {}
for i, fen in ipairs(fens) do prompts[i] = rook.chess.policy_prompt(fen) end

local t0 = rook.clock()
local policy = assert(rook.load(cfg.model, { device = cfg.device }))
local ref = policy:reference()
local opt = rook.adamw(policy, { lr = 1e-5 })
rook.log("loaded %s on %s in %.1f s", policy.source, cfg.device, rook.clock() - t0)

local failed = 0
local function check(ok, what, detail)
  if not ok then failed = failed + 1 end
  print(string.format("%s  %-46s %s", ok and "PASS" or "FAIL", what, detail))
end

for step = 1, cfg.steps do
  local batch = policy:rollout(prompts, { group = cfg.group, max_new_tokens = cfg.max_new_tokens, seed = step })
  local packed, alone = batch:logprob_gap(policy)
  rook.reward.fn(batch, function(_, text) return (#text % 7) / 7 end)
  local m = rook.grpo.step(policy, ref, opt, batch, { beta = 0.02 })
  local st = batch:stats()
  rook.log("step %d: %d new tokens at %.0f tok/s; rollout %.2f s, reference %.2f s, update %.2f s; loss %.4g, kl %.3g, grad_norm %.3g",
    step, st.new_tokens, st.tokens_per_sec, m["time/rollout"], m["time/reference"], m["time/update"], m.loss, m.kl, m.grad_norm)
  check(packed == 0 and alone == 0, string.format("step %d: sampler logprobs = training forward", step),
    string.format("max |Δ| %.2g packed, %.2g alone (0 wanted)", packed, alone))
  check(m["ratio/first_max_abs_log"] == 0, string.format("step %d: first ratio = 1", step),
    string.format("max |log ratio| %.2g (0 wanted)", m["ratio/first_max_abs_log"]))
  check(m.finite and m.updates > 0, string.format("step %d: the update ran", step),
    string.format("finite %s, %d update(s)", tostring(m.finite), m.updates))
  if step == 1 then
    check(m["kl/first_max"] == 0, "step 1: KL to an identical reference = 0", string.format("kl/first_max %.2g", m["kl/first_max"]))
  end
end
if failed > 0 then error(string.format("%d check(s) failed on %s", failed, cfg.device)) end
