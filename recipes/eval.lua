-- eval: the DESIGN evaluation metrics of a model on a fixed set of RookWorld prompts. By
-- default the set is the one grpo_stable.lua evaluates on (its seed 1 + 200, plies 2 to 20,
-- 256 prompts, half P: half A:, greedy answers of up to 144 tokens), so a run's policy gets
-- the numbers of its table's "after" column.
--
--   rookscript recipes/eval.lua model=runs/grpo_stable      # a run's newest checkpoint
--   rookscript recipes/eval.lua model=path/to/RookWorld-LM-124M size=64 seed=7
local rook = require("rook")
local evalkit = require("evalkit")

local cfg = rook.config({
  model = "default",            -- "default", a run directory, an HF dir, an llm.c .bin
  positions = "generator",      -- "generator" (seeded games) or a FEN/EPD/PGN/training-text file
  seed = 201, min_ply = 2, max_ply = 20, size = 256, env_fraction = 0.5, device = "cpu",
  eval = { max_new_tokens = 144, greedy = true, reward = { malformed = -0.3 } }, -- decoding and scoring
  stockfish = { depth = 8, workers = 2 },
}, { size = "integer >= 1", env_fraction = "[0, 1]", min_ply = "integer >= 0", max_ply = "integer >= 0" })

local sf = assert(rook.stockfish(cfg.stockfish))
local m = assert(rook.load(cfg.model, { device = cfg.device, engine = sf }))
local source = cfg.positions == "generator"
  and { generator = { seed = cfg.seed, min_ply = cfg.min_ply, max_ply = cfg.max_ply }, task = "mix" }
  or { path = cfg.positions, seed = cfg.seed, task = "mix", loop = false }
local set = evalkit.set(assert(rook.positions(source)), cfg.size, cfg.env_fraction)
local metrics = evalkit.run(m, set, sf, cfg.eval)
print(evalkit.compare({ [cfg.model] = metrics }))
return metrics
