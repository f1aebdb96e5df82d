-- eval: the DESIGN evaluation metrics of a model on a fixed set of RookWorld prompts.
--
--   rookscript recipes/eval.lua model=runs/grpo_stable/checkpoints/step-00000030/model
local rook = require("rook")
local evalkit = require("evalkit")

local cfg = rook.config{
  model = "default",            -- "default", an HF dir, an llm.c .bin
  positions = "generator",      -- "generator" (seeded games) or a FEN/EPD/PGN/training-text file
  seed = 201, size = 64, env_fraction = 0.5, device = "cpu",
  eval = { max_new_tokens = 72, greedy = true, reward = { malformed = -0.3 } }, -- decoding and scoring
  stockfish = { depth = 8, workers = 2 },
}

local sf = assert(rook.stockfish(cfg.stockfish))
local m = assert(rook.load(cfg.model, { device = cfg.device, engine = sf }))
local source = cfg.positions == "generator"
  and { generator = { seed = cfg.seed, max_ply = 80 }, task = "mix", env_fraction = cfg.env_fraction }
  or { path = cfg.positions, seed = cfg.seed, task = "mix", env_fraction = cfg.env_fraction, loop = false }
local set = evalkit.set(assert(rook.positions(source)), cfg.size)
local metrics = evalkit.run(m, set, sf, cfg.eval)
print(evalkit.compare({ [cfg.model] = metrics }))
return metrics
