--- defaultmodel: the embedded default model — a small RookWorld-format chess LM that
--- rookscript builds for itself, so the main job runs on a fresh machine with nothing
--- downloaded. It is NOT RookWorld-LM-124M: a GPT-2 of 7.3M parameters (4 layers, d=128,
--- the GPT-2 tokenizer), trained by SFT on RookWorld text this module generates (A: rows
--- labelled by the rules, P: rows labelled by Stockfish at a fixed depth) from opening
--- positions. The build is deterministic and cached in rook.cache_dir(); users with
--- RookWorld-LM pass model=<dir>.
---
---   local path = require("defaultmodel").ensure{ log = true }
---   local policy = rook.load(path)
local rook = require("rook")
local sftloop = require("sftloop")

local M = {}

--- The recipe of the build. Changing it changes VERSION, so a new cache entry is built (v2: each
--- P: row is learned as one text split where its token-consistent prompt ends, as RookWorld-LM
--- read its training text; v1 split it one pad space later). The
--- weights also depend on what the recipe does not name: the engine's arithmetic (its version,
--- the processor's vector units) and the Stockfish that labels P: rows. A cache entry built by
--- another rookscript version is kept as it is, a v1 model but not this version's bit for
--- bit; delete the directory to rebuild it.
M.VERSION = "v2"
M.SPEC = {
  arch = "random:small@seed=1", -- GPT-2, 4 layers, 4 heads, d=128, context 256
  -- Positions from the first 20 plies of seeded opening-style games: a model this small
  -- learns their moves and board updates in minutes; later positions would need hours.
  rows = 6000, env_fraction = 0.5, depth = 8, data_seed = 1, min_ply = 2, max_ply = 20,
  -- Warm-up over 20 steps to 3e-3, then cosine down to 1e-4 at the last step.
  steps = 500, batch = 16, adamw = { lr = 3e-3, lr_warmup = 20, lr_schedule = "cosine", lr_min_ratio = 1e-4 / 3e-3 },
}

M.DESCRIPTION = "rookscript default model " .. M.VERSION .. ": a 7.3M-parameter GPT-2 trained by SFT on "
  .. M.SPEC.rows .. " generated RookWorld rows (not RookWorld-LM-124M)"

function M.dir() return rook.cache_dir() .. "/default-model-" .. M.VERSION end

--- ensure{engine=, log=} → the path of the built model, building it first if needed
--- (a few minutes on 2 cores). engine: a rook.stockfish to label P: rows with (one is
--- started for the build if not given).
function M.ensure(o)
  o = o or {}
  local dir = M.dir()
  local model = dir .. "/model"
  if rook.exists(model .. "/config.json") then
    if o.log then rook.log("%s (cached in %s)", M.DESCRIPTION, model) end
    return model
  end
  local say = function(...) if o.log then rook.log(...) end end
  say("building the %s", M.DESCRIPTION)
  local sf = o.engine
  if not sf then
    local err
    sf, err = rook.stockfish{ depth = M.SPEC.depth, workers = 2 }
    assert(sf, err)
  end
  local data = dir .. "/train.txt"
  if not rook.exists(data) then
    local t0 = rook.clock()
    local gen = rook.positions{ generator = { seed = M.SPEC.data_seed, style = "opening",
                                              min_ply = M.SPEC.min_ply, max_ply = M.SPEC.max_ply } }
    local st = assert(rook.chess.dataset(gen, sf, data, {
      rows = M.SPEC.rows, env_fraction = M.SPEC.env_fraction, seed = M.SPEC.data_seed, depth = M.SPEC.depth }))
    say("generated %d training rows in %.0fs (%s)", M.SPEC.rows, rook.clock() - t0, data)
  end
  local policy = assert(rook.load(M.SPEC.arch))
  local t0 = rook.clock()
  local bar = o.log and rook.progress{ total = M.SPEC.steps, label = "default model SFT" }
  sftloop.train{
    model = policy, data = rook.positions{ path = data, loop = true }, steps = M.SPEC.steps, batch = M.SPEC.batch,
    adamw = M.SPEC.adamw, say = o.log and say or nil, log = function(step, m) if bar then bar:update(step, m) end end,
  }
  if bar then bar:done() end
  assert(policy:save(model))
  say("built in %.0fs: %s", rook.clock() - t0, model)
  return model
end

return M
