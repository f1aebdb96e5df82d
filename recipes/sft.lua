-- sft: supervised fine-tuning on RookWorld-format text (the warm start before GRPO). Data
-- is a training-text file (one P:/A: row per line, or JSONL with a "text" field), or
-- "generate" to build one here with Stockfish and the rules.
--
--   rookscript recipes/sft.lua data=generate rows=20000 steps=2000 out=models/my-sft
--   rookscript recipes/sft.lua resume=runs/sft          # continue, with the config it ran with
local rook = require("rook")
local sftloop = require("sftloop")

local cfg = rook.config{
  model = "random:small",       -- the starting point: a named random architecture or a checkpoint
  data = "generate", rows = 6000, env_fraction = 0.5, data_seed = 1,
  stockfish = "", stockfish_depth = 8, -- the labelling engine: binary ("": on PATH, then /usr/games), depth
  steps = 400, batch = 16, lr = 2e-3, lr_warmup = 20, lr_min = 1e-4, weight_decay = 0.0,
  max_grad_norm = 1.0, loss_on = "completion",
  micro_tokens = 0, mem_budget = "", -- tokens per forward; 0: from mem_budget ("" = half the RAM, "0.25", "8GB")
  run_dir = "runs/sft", out = "models/sft", save_every = 100, device = "cpu",
}

local resume = cfg.resume ~= "" and cfg.resume or nil
rook.check{ run = { dir = resume or cfg.run_dir, resume = resume ~= nil } } -- before the model loads
local policy = assert(rook.load(cfg.model, { device = cfg.device }))
local data_path = cfg.data
if data_path == "generate" then
  data_path = cfg.run_dir .. "-data.txt"
  if not rook.exists(data_path) then
    local sf = assert(rook.stockfish(rook.settings(cfg, "stockfish", { workers = 2 })))
    local gen = rook.positions{ generator = { seed = cfg.data_seed, max_plies = 80 } }
    rook.log("writing %d rows to %s", cfg.rows, data_path)
    assert(rook.chess.dataset(gen, sf, data_path, { rows = cfg.rows, env_fraction = cfg.env_fraction,
                                                     seed = cfg.data_seed }))
  end
end
local data = assert(rook.positions{ path = data_path, loop = true })
-- The loop passes each step's rate (warm-up, then cosine to lr_min): the optimizer's own
-- schedule stays flat.
local opt = rook.adamw(policy, rook.settings(cfg, "adamw", { betas = { 0.9, 0.95 }, lr_warmup = 0 }))
local run = assert(rook.run{ dir = resume or cfg.run_dir, resume = resume,
                             policy = policy, opt = opt, data = data, steps = cfg.steps, save_every = cfg.save_every,
                             fixed = { "data", "data_seed", "rows", "env_fraction", "stockfish_depth" } })

-- The loop's settings (steps, batch, lr, lr_warmup, lr_min, max_grad_norm, loss_on,
-- micro_tokens, mem_budget) are cfg's, under the same names.
sftloop.train(setmetatable({
  model = policy, opt = opt, data = data, start = run.step, say = rook.log,
  log = function(step, m)
    run:log(step, m)
    -- Due every save_every steps, at the last step, and after Ctrl-C (the save then ends the run).
    if run:save_due(step) then run:save(step) end
  end,
}, { __index = cfg }))
assert(policy:save(cfg.out))
rook.log("saved %s", cfg.out)
