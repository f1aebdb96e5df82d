-- A training loop of primitives (a Lua loss, opt:step) in a run that checkpoints every step;
-- kill_at kills the process at that step between forward_backward and opt:step. Prints the
-- policy's hash when done.
local rook, losses = require("rook"), require("losses")
local cfg = rook.config({ run_dir = "run", steps = 4, kill_at = 0, seed = 1,
  rollout = { group = 4, max_new_tokens = 6, temperature = 1 }, grpo = { beta = 0 }, adamw = { lr = 1e-2 } })
local policy = assert(rook.load("random:tiny"))
local opt = rook.adamw(policy, cfg.adamw)
local data = rook.positions{ generator = { seed = cfg.seed }, task = "mix" }
local run = assert(rook.run{ dir = cfg.run_dir, resume = cfg.resume, policy = policy, ref = policy:reference(),
  opt = opt, data = data, steps = cfg.steps, save_every = 1 })
local loss = losses.grpo(cfg.grpo)
while run.step < cfg.steps do
  local step = run.step + 1
  cfg.rollout.seed = cfg.seed * 1000003 + step
  local batch = policy:rollout(data:next(2), cfg.rollout)
  rook.reward.fn(batch, function(_, text) return (#text % 5) / 4 end)
  rook.grpo.advantages(batch, cfg.grpo)
  local m = policy:forward_backward(batch, loss, cfg.grpo)
  if step == cfg.kill_at then rook.debug.kill() end -- the gradient accumulated, not yet applied
  local u = opt:step(cfg.grpo)
  run:log(step, { loss = m.loss, grad_norm = u.grad_norm or 0 })
  if run:save_due(step) then run:save(step) end
end
print("policy " .. policy:hash())
