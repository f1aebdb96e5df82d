--- curriculum: what a step trains on. The task mix (P: policy vs A: environment prompts)
--- and the game phases sampled can change with the step, as piecewise or linear schedules.
---
---   local cur = require("curriculum")
---   local mix = cur.schedule{ { until_step = 50, env = 0.8 }, { env = 0.3 } }
---   local prompts = cur.next(data, 8, mix(step))              -- env fraction for this step
---   local phases = cur.schedule{ { until_step = 100, phases = { "opening" } }, { phases = cur.ALL } }
---   local prompts = cur.next(data, 8, 0.5, phases(step))      -- only those phases
---   local prompts = cur.next(data, 8, 0.5, { exclude = cur.exclude(evalset) })  -- never an eval position
local evalkit = require("evalkit")
local M = {}

M.ALL = { "opening", "middlegame", "endgame" }

--- schedule(stages) → function(step) returning the first stage whose until_step is ≥ step
--- (a stage without until_step lasts forever). A stage's single value other than until_step
--- is returned as is; a stage with several is returned as a table.
function M.schedule(stages)
  assert(type(stages) == "table" and #stages > 0, "curriculum.schedule{ {until_step = ..., ...}, ... }")
  for i = 1, #stages - 1 do
    assert(stages[i].until_step, "curriculum.schedule: only the last stage may omit until_step")
  end
  return function(step)
    for _, s in ipairs(stages) do
      if s.until_step == nil or step <= s.until_step then
        local value, count = nil, 0
        for k, v in pairs(s) do
          if k ~= "until_step" then value, count = v, count + 1 end
        end
        if count == 1 then return value end
        return s
      end
    end
  end
end

--- linear{from=, to=, steps=} → function(step): from at step 1, to from step `steps` on.
function M.linear(o)
  assert(o.from and o.to and o.steps and o.steps >= 1, "curriculum.linear{ from = ..., to = ..., steps = ... }")
  return function(step)
    local p = math.min(1, math.max(0, (step - 1) / math.max(1, o.steps - 1)))
    return o.from + (o.to - o.from) * p
  end
end

local values = { p = 1, n = 3, b = 3, r = 5, q = 9 }

--- phase(fen) → "opening", "middlegame" or "endgame": endgame once the non-pawn material of
--- both sides is at most 13 (two rooks and a minor, say), opening for the first 10 moves
--- while most pieces are on the board, middlegame otherwise.
function M.phase(fen)
  local board, _, _, _, _, fullmove = string.match(fen, "^(%S+)%s+(%S+)%s+(%S+)%s+(%S+)%s+(%S+)%s+(%S+)")
  board = board or fen
  local material = 0
  for c in string.gmatch(board, "[nbrqNBRQ]") do
    material = material + values[string.lower(c)]
  end
  if material <= 13 then return "endgame" end
  if tonumber(fullmove or "1") <= 10 and material >= 50 then return "opening" end
  return "middlegame"
end

--- position(fen) → the FEN without its move counters: the key under which two prompts are
--- the same position.
function M.position(fen)
  return string.match(fen, "^(%S+%s+%S+%s+%S+%s+%S+)") or fen
end

--- exclude(items) → a set of the items' positions, for next's `exclude` (e.g. the evaluation
--- set, so that training never sees an evaluation position).
function M.exclude(items)
  local set = {}
  for _, it in ipairs(items) do set[M.position(it.fen)] = true end
  return set
end

--- next(data, n, env_fraction [, phases | opts [, max_draws]]) → n prompts from a
--- rook.positions source: round(n·env_fraction) environment (A:) prompts and the rest policy
--- (P:) prompts, only from positions in `phases` when given and never from a position in
--- `exclude` (drawing at most max_draws positions, default 50·n, before giving up with an error
--- that says what was asked for). opts = { phases = {...}, exclude = cur.exclude(...),
--- max_draws = n } or, as before, the list of phases itself.
function M.next(data, n, env_fraction, phases, max_draws)
  local exclude
  if phases and phases[1] == nil then
    local o = phases
    phases, exclude, max_draws = o.phases, o.exclude, o.max_draws or max_draws
  end
  local want_env = math.floor(n * (env_fraction or 0) + 0.5)
  local allowed
  if phases then
    allowed = {}
    for _, p in ipairs(phases) do allowed[p] = true end
  end
  local out, draws, limit = {}, 0, max_draws or 50 * n
  while #out < n do
    local task = (#out < want_env) and "env" or "policy"
    local item = data:next(1, { task = task })[1]
    if item == nil then break end
    draws = draws + 1
    if (allowed == nil or allowed[M.phase(item.fen)]) and not (exclude and exclude[M.position(item.fen)]) then
      out[#out + 1] = item
    elseif draws >= limit then
      local what = phases and string.format("in phases {%s}", table.concat(phases, ", ")) or "outside the excluded set"
      error(string.format("curriculum.next: no position %s after %d draws", what, draws), 2)
    end
  end
  return out
end

--- sources(cfg) → data, evalset, exclude: a run's prompts from its config. data is the
--- training source (cfg.positions: "generator", drawing games of cfg.min_ply..cfg.max_ply
--- plies, or a FEN/EPD/PGN/text file or data set); evalset is a fixed evaluation set of
--- cfg.eval_size items, half P: half A:, from other games (a data set's test split where it has
--- one); exclude is its positions, for next's `exclude`, so that training never sees them.
--- Seeds: cfg.seed + 100 for training, cfg.seed + 200 for evaluation.
function M.sources(cfg)
  local rook = require("rook")
  local function source(seed, split)
    if cfg.positions ~= "generator" then
      return assert(rook.positions{ path = cfg.positions, seed = seed, task = "mix", split = split })
    end
    return rook.positions{ generator = { seed = seed, min_ply = cfg.min_ply, max_ply = cfg.max_ply }, task = "mix" }
  end
  local data = source(cfg.seed + 100)
  local evalset = evalkit.set(source(cfg.seed + 200, { "test", "train" }), cfg.eval_size)
  return data, evalset, M.exclude(evalset)
end

return M
