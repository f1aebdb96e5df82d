-- sft: supervised fine-tuning on RookWorld-format text (the warm start before GRPO). Data
-- is a training-text file (one P:/A: row per line, or JSONL with a "text" field), or
-- "generate" to build one here with Stockfish and the rules.
--
--   rookscript recipes/sft.lua data=generate rows=20000 steps=2000 out=models/my-sft
local rook = require("rook")
local sftloop = require("sftloop")

local cfg = rook.config{
  model = "random:small",       -- the starting point: a named random architecture or a checkpoint
  data = "generate", rows = 6000, env_fraction = 0.5, depth = 8, data_seed = 1,
  steps = 400, batch = 16, lr = 2e-3, lr_warmup = 20, lr_min = 1e-4, weight_decay = 0.0,
  max_grad_norm = 1.0, loss_on = "completion",
  micro_tokens = 0, mem_budget = "", -- tokens per forward; 0: from mem_budget ("" = half the RAM, "0.25", "8GB")
  run_dir = "runs/sft", out = "models/sft", save_every = 100, device = "cpu",
}

local policy = assert(rook.load(cfg.model, { device = cfg.device }))
local data_path = cfg.data
if data_path == "generate" then
  data_path = cfg.run_dir .. "-data.txt"
  if not rook.exists(data_path) then
    local sf = assert(rook.stockfish{ depth = cfg.depth, workers = 2 })
    local gen = rook.positions{ generator = { seed = cfg.data_seed, max_plies = 80 } }
    rook.log("writing %d rows to %s", cfg.rows, data_path)
    assert(rook.chess.dataset(gen, sf, data_path, { rows = cfg.rows, env_fraction = cfg.env_fraction,
                                                     seed = cfg.data_seed, depth = cfg.depth }))
  end
end
local data = assert(rook.positions{ path = data_path, loop = true })
local opt = rook.adamw(policy, { lr = cfg.lr, betas = { 0.9, 0.95 }, weight_decay = cfg.weight_decay })
local resume = cfg.resume ~= "" and cfg.resume or nil
local run = assert(rook.run{ dir = resume or cfg.run_dir, resume = resume,
                             policy = policy, opt = opt, data = data, steps = cfg.steps })

sftloop.train{
  model = policy, opt = opt, data = data, start = run.step, steps = cfg.steps, batch = cfg.batch,
  lr = cfg.lr, lr_warmup = cfg.lr_warmup, lr_min = cfg.lr_min, max_grad_norm = cfg.max_grad_norm,
  loss_on = cfg.loss_on, micro_tokens = cfg.micro_tokens ~= 0 and cfg.micro_tokens or nil,
  mem_budget = cfg.mem_budget, say = rook.log,
  log = function(step, m)
    run:log(step, m)
    if step % cfg.save_every == 0 or step == cfg.steps then run:save(step) end
  end,
}
assert(policy:save(cfg.out))
rook.log("saved %s", cfg.out)
