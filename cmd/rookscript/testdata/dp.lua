-- A small GRPO run whose rewards vary (the length of each answer), for the data-parallel
-- tests: run on one rank or several, killed on one rank (kill_rank, kill_at), resumed; with
-- lua_loss=true the step is the primitives with the GRPO loss written in Lua; with
-- dynamic=true the batch is DAPO's dynamic sampling of coarser rewards, whose groups tie now
-- and then.
local rook, dyn = require("rook"), require("dynamic")
local cfg = rook.config{ run_dir = "runs/dp", steps = 3, save_every = 1, prompts = 4, kill_rank = -1, kill_at = 0, out = "",
                         lua_loss = false, dynamic = false }
local lua_loss = require("losses").grpo({ beta = 0.05 })
local policy = rook.load("random:tiny")
local ref, opt = policy:reference(), rook.adamw(policy, { lr = 1e-4 })
local data = rook.positions{ generator = { seed = 3 }, task = "mix" }
local run = assert(rook.run{ dir = cfg.run_dir, resume = cfg.resume, policy = policy, ref = ref, opt = opt, data = data,
                             steps = cfg.steps, save_every = cfg.save_every })
while run.step < cfg.steps do
  local step = run.step + 1
  if rook.world.rank == cfg.kill_rank and step == cfg.kill_at then rook.debug.kill() end
  local batch, dm
  if cfg.dynamic then
    local d = { seed = 100, prompts = cfg.prompts, dynamic_sampling = true, max_draws = 3, grpo = { beta = 0.05 },
                rollout = { group = 4, max_new_tokens = 8, temperature = 1 } }
    batch, dm = dyn.fill(d, step, function() return policy:rollout(data:next(cfg.prompts), d.rollout) end,
      function(b) rook.reward.fn(b, function(_, text) return #text % 2 end) end)
  else
    batch, dm = policy:rollout(data:next(cfg.prompts), { group = 4, max_new_tokens = 8, temperature = 1, seed = 100 + step }), {}
    rook.reward.fn(batch, function(_, text) return (#text % 5) / 4 end)
  end
  if cfg.lua_loss then
    rook.grpo.advantages(batch, { beta = 0.05 })
    local m = policy:forward_backward(batch, lua_loss, { beta = 0.05 }, { ref = ref })
    local u = opt:step({ beta = 0.05 })
    run:log(step, { loss = m.loss, grad_norm = u.grad_norm, updates = u.updates }, batch)
  else
    run:log(step, dyn.note(rook.grpo.step(policy, ref, opt, batch, { beta = 0.05 }), dm), batch)
  end
  if run:save_due(step) then run:save(step) end
end
if cfg.out ~= "" and rook.world.is_main then assert(policy:save(cfg.out)) end
