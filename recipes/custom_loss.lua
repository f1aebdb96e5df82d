-- custom_loss: a new RL algorithm written in the recipe. The step is the primitives composed by
-- hand: an RLOO advantage (scripts/advantages.lua) set on the batch, a CISPO loss written in Lua
-- (scripts/losses.lua) applied by policy:forward_backward as the backward's row gradients after
-- one forward, and opt:step. rook.grpo.step is the same primitives composed in Go.
--
-- check=true (on model=random:tiny, no Stockfish needed) takes one step three ways from one
-- saved state and one batch: rook.grpo.step; the primitives with the built-in "grpo" loss; the
-- primitives with the GRPO loss written in Lua. It prints, last, the largest weight difference
-- of the first two (0: bit for bit) and the largest gradient difference of the last two before
-- the optimizer step, relative to the largest gradient (AdamW's first update is close to
-- lr·sign(g): the weights would magnify rounding where g ≈ 0).
--
--   rookscript recipes/custom_loss.lua check=true model=random:tiny
local rook, adv, losses = require("rook"), require("advantages"), require("losses")
local cfg = rook.config({
  model = "default", check = false, device = "cpu", threads = 0, seed = 1,
  steps = 20, prompts = 4, positions = "generator",
  rollout = { group = 8, max_new_tokens = 72, temperature = 0.7, stop_rule = "rookworld" },
  grpo = { beta = 0.02, micro_batch = 8 }, -- the pass's settings (and the check's step)
  cispo = { epsilon_high = 5.0 },            -- TRL's loss_type = "cispo": the bound on the ratio
  adamw = { lr = 3e-4 },
  reward = { malformed = -0.3 },
  stockfish = { depth = 8, workers = 2 },
}, { steps = "integer >= 1", prompts = "integer >= 1", threads = "integer >= 0" })

local function load()
  local policy = assert(rook.load(cfg.model, { device = cfg.device, threads = cfg.threads }))
  return policy, rook.adamw(policy, cfg.adamw)
end

if cfg.check then
  local fens = { "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1",
                 "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3" }
  local prompts = {}
  for i = 1, cfg.prompts do prompts[i] = rook.chess.policy_prompt(fens[(i - 1) % #fens + 1]) end
  local p1, o1 = load()
  local p2, o2 = load()
  local p3 = load()
  local ref = p1:reference()
  cfg.rollout.seed = cfg.seed
  local batch = p1:rollout(prompts, cfg.rollout)
  rook.reward.fn(batch, function(_, text) return (#text % 5) / 4 end) -- varied, deterministic: the check is of numbers
  local s = cfg.grpo
  local opts = { ref = s.beta > 0 and ref or nil }
  rook.grpo.step(p1, ref, o1, batch, s)                           -- 1: the one-call form
  rook.grpo.advantages(batch, s)
  for mb = 1, s.minibatches do
    opts.minibatch = mb
    p2:forward_backward(batch, "grpo", s, opts)                   -- 2: the built-in loss
    p3:forward_backward(batch, losses.grpo(s), s, opts)           -- 3: the same loss in Lua
  end
  local dg, g = p2:diff(p3, { grads = true })
  o2:step(s)
  print(string.format("max_abs_weight_diff_builtin=%.17g", (p1:diff(p2))))
  print(string.format("max_rel_grad_diff_lua=%.3g", g > 0 and dg / g or 0 / 0))
  return
end

local sf = assert(rook.stockfish(cfg.stockfish))
local policy, opt = load()
local data = assert(rook.positions{ generator = { seed = cfg.seed }, task = "mix" })
local cispo = losses.cispo(cfg.cispo)
for step = 1, cfg.steps do
  cfg.rollout.seed = cfg.seed * 1000003 + step
  local batch = policy:rollout(data:next(cfg.prompts), cfg.rollout)
  rook.reward.chess(batch, cfg.reward, sf)
  batch:set_advantages(adv.rloo(batch:rewards(), batch.group))
  local m = policy:forward_backward(batch, cispo, cfg.grpo, { token_level = true }) -- CISPO's gradient is per token
  local u = opt:step(cfg.grpo)
  local note = u.no_signal and "  (no signal: every advantage 0)" or not u.finite and
    "  (skipped: " .. (u.nonfinite or "a non-finite gradient") .. ")" or ""
  rook.log("step %d: reward %.3f  loss %.4g  grad_norm %.4g%s", step, batch:stats().reward_mean, m.loss, u.grad_norm or 0, note)
end
