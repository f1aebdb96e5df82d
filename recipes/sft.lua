-- sft: supervised fine-tuning on RookWorld-format text (the warm start before GRPO). Data
-- is a training-text file (one P:/A: row per line, or JSONL with a "text" field), or
-- "generate" to build one here with Stockfish and the rules.
--
--   rookscript recipes/sft.lua data=generate rows=20000 steps=2000 out=models/my-sft
--   (without out=, the model is saved in the run directory: runs/sft/model)
--   rookscript recipes/sft.lua resume=runs/sft          # continue, with the config it ran with
local rook = require("rook")
local sftloop = require("sftloop")

local cfg = rook.config({
  model = "random:small",       -- the starting point: a named random architecture or a checkpoint
  data = "generate", rows = 6000, env_fraction = 0.5, data_seed = 1,
  steps = 400, batch = 16, mem_budget = "", -- micro-batches from mem_budget ("" = half the RAM, "0.25", "8GB")
  run_dir = "runs/sft", out = "", save_every = 100, device = "cpu", -- out: "" saves in run_dir/model
  stockfish = { depth = 8, workers = 2 }, -- labels the P: rows of data=generate
  -- Warm-up, then cosine down to lr·lr_min_ratio at the last step.
  adamw = { lr = 2e-3, lr_warmup = 20, lr_schedule = "cosine", lr_min_ratio = 0.05 },
  sft = { loss_on = "completion", max_grad_norm = 1.0 },
}, { -- the data a run learns from cannot change when it is resumed
  data = "fixed", data_seed = "fixed", rows = "fixed", env_fraction = "fixed", ["stockfish.depth"] = "fixed",
})

local policy = assert(rook.load(cfg.model, { device = cfg.device }))
local data_path = cfg.data
if data_path == "generate" then
  -- Generated rows are a built artefact, kept in the cache under what they are made from
  -- (path nil): built once, found by later runs.
  local sf = assert(rook.stockfish(cfg.stockfish))
  local gen = rook.positions{ generator = { seed = cfg.data_seed, max_ply = 80 } }
  local built = assert(rook.chess.dataset(gen, sf, nil, { rows = cfg.rows, env_fraction = cfg.env_fraction,
                                                           seed = cfg.data_seed }))
  data_path = built.path
  rook.log("%d rows in %s%s", cfg.rows, data_path, built.cached and " (cached)" or "")
end
local data = assert(rook.positions{ path = data_path, loop = true })
cfg.adamw.total_updates = cfg.steps
local opt = rook.adamw(policy, cfg.adamw)
local run = assert(rook.run{ dir = cfg.run_dir, resume = cfg.resume,
                             policy = policy, opt = opt, data = data, steps = cfg.steps, save_every = cfg.save_every })
sftloop.train{
  model = policy, opt = opt, data = data, steps = cfg.steps, batch = cfg.batch, sft = cfg.sft,
  mem_budget = cfg.mem_budget, start = run.step, say = rook.log,
  log = function(step, m)
    run:log(step, m)
    -- Due every save_every steps, at the last step, and after Ctrl-C (the save then ends the run).
    if run:save_due(step) then run:save(step) end
  end,
}
local out = cfg.out ~= "" and cfg.out or cfg.run_dir .. "/model"
assert(policy:save(out))
rook.log("saved %s", out)
