-- A short run whose TensorBoard files bench/tb_check.py reads with TensorBoard's own reader
-- (bench/gpu_check.sh runs both where the tensorboard package is installed): the tiny random
-- model, rewards from a Lua function (no Stockfish), saves, a rollback and steps run again.
--
--   rookscript bench/tb_check.lua run_dir=/tmp/tb-run && python3 bench/tb_check.py /tmp/tb-run
local rook = require("rook")
local cfg = rook.config({ run_dir = "runs/tb_check", steps = 6 })
local policy = assert(rook.load("random:tiny"))
local ref, opt = policy:reference(), rook.adamw(policy, { lr = 1e-3 })
local run = assert(rook.run{ dir = cfg.run_dir, policy = policy, ref = ref, opt = opt, steps = cfg.steps, save_every = 2 })
local rolled = false
while run.step < cfg.steps do
  local step = run.step + 1
  local b = policy:rollout({ "a", "b" }, { group = 4, max_new_tokens = 6, seed = step })
  rook.reward.fn(b, function(_, text) return #text % 3 end)
  run:log(step, rook.grpo.step(policy, ref, opt, b, { beta = 0.01 }), b)
  if step == 5 and not rolled then
    rolled = true
    run:rollback() -- back to step 4's checkpoint: step 5 runs again
  elseif run:save_due(step) then
    run:save(step)
  end
end
