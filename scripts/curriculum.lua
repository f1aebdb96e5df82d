--- curriculum: what a step trains on. The task mix (P: policy vs A: environment prompts)
--- and the game phases sampled can change with the step, as piecewise or linear schedules.
---
---   local cur = require("curriculum")
---   local mix = cur.schedule{ { until_step = 50, env = 0.8 }, { env = 0.3 } }
---   local prompts = cur.next(data, 8, mix(step))              -- env fraction for this step
---   local phases = cur.schedule{ { until_step = 100, phases = { "opening" } }, { phases = cur.ALL } }
---   local prompts = cur.next(data, 8, 0.5, phases(step))      -- only those phases
---   local prompts = cur.next(data, 8, 0.5, { exclude = cur.exclude(evalset) })  -- never an eval position
---
--- And one that follows the reward signal (follow_signal): it moves the task mix toward the
--- task whose groups carry signal, from each task's no-signal fraction over the last steps.
---
---   local mix = cur.follow_signal({ mode = "signal", window = 5, floor = 0.125 }, run, 0.5)
---   local prompts = cur.next(data, 8, mix:env_fraction(step))
---   local m = run:log(step, mix:note(step, rook.grpo.step(...)), batch)  -- curriculum/env_fraction
---   mix:observe(step, m)                                               -- no_signal/P, no_signal/A
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

local Mix = {}
Mix.__index = Mix

-- follow_signal's options and their defaults.
local SIGNAL_DEFAULTS = {
  mode = "fixed", -- "fixed": the start fraction at every step; "signal": follow the signal
  window = 5,     -- steps whose no-signal fractions are averaged
  floor = 0.125,  -- the least share of prompts each task keeps (1 of 8)
  rate = 0.5,     -- how far each step moves toward the target (1: all the way)
}

--- follow_signal([opts [, run [, env_fraction]]]) → a task mix that follows the reward signal.
--- At each step it sets the share of A: prompts from the last `window` steps' no_signal/P and
--- no_signal/A (run:log's per-task fractions of groups whose advantages are all 0): each task's
--- signal is 1 − its mean no-signal fraction (1 when the window has none of its groups, so a
--- starved task is tried again), the target share of A: prompts is sA / (sA + sP) (none
--- when neither has signal, or the window is empty: the share stays), the share moves `rate` of the way there from the last step's and
--- stays within [floor, 1 − floor]. mode "fixed" keeps env_fraction (default 0.5) at every
--- step and still records it. Given the run, its history lives in run:state().curriculum, one
--- record per step {step, env_fraction, P, A}: saved with every checkpoint, so a resumed run
--- takes the same decisions bit for bit; a step's decision reads only the records of the
--- steps before it, and deciding it again (after a rollback) drops the records after it.
function M.follow_signal(o, run, env_fraction)
  local p = setmetatable({ start = env_fraction or 0.5 }, Mix)
  for k, v in pairs(SIGNAL_DEFAULTS) do p[k] = v end
  for k, v in pairs(o or {}) do
    if SIGNAL_DEFAULTS[k] == nil then error("curriculum.follow_signal: unknown option '" .. tostring(k) .. "'", 2) end
    p[k] = v
  end
  if p.mode ~= "fixed" and p.mode ~= "signal" then
    error("curriculum.follow_signal: mode must be \"fixed\" or \"signal\", got " .. tostring(p.mode), 2)
  end
  if not (type(p.start) == "number" and p.start >= 0 and p.start <= 1) then
    error("curriculum.follow_signal: env_fraction must be in [0, 1], got " .. tostring(p.start), 2)
  end
  if not (type(p.window) == "number" and p.window == math.floor(p.window) and p.window >= 1) then
    error("curriculum.follow_signal: window must be an integer ≥ 1, got " .. tostring(p.window), 2)
  end
  if not (type(p.floor) == "number" and p.floor >= 0 and p.floor <= 0.5) then
    error("curriculum.follow_signal: floor must be in [0, 0.5], got " .. tostring(p.floor), 2)
  end
  if not (type(p.rate) == "number" and p.rate > 0 and p.rate <= 1) then
    error("curriculum.follow_signal: rate must be in (0, 1], got " .. tostring(p.rate), 2)
  end
  local state = run and run:state() or {}
  state.curriculum = state.curriculum or {}
  p.history = state.curriculum
  return p
end

-- record(mix, step) → the history's record of step, or nil.
local function record(mix, step)
  for _, r in ipairs(mix.history) do
    if r.step == step then return r end
  end
end

--- mix:env_fraction(step) → the share of A: prompts for step, decided from the records of the
--- steps before it and recorded (deciding a step again gives the same share).
function Mix:env_fraction(step)
  local h, keep = self.history, {}
  for _, r in ipairs(h) do -- the window before step; records from step on are a rolled-back past
    if r.step < step and r.step >= step - self.window then keep[#keep + 1] = r end
  end
  for i = #h, 1, -1 do h[i] = nil end
  for i, r in ipairs(keep) do h[i] = r end
  local prev = record(self, step - 1)
  local f = prev and prev.env_fraction or self.start
  if self.mode == "signal" then
    local sum, n = { P = 0, A = 0 }, { P = 0, A = 0 }
    for _, r in ipairs(h) do
      for _, t in ipairs({ "P", "A" }) do
        if r[t] then sum[t], n[t] = sum[t] + r[t], n[t] + 1 end
      end
    end
    local sP = n.P > 0 and 1 - sum.P / n.P or 1
    local sA = n.A > 0 and 1 - sum.A / n.A or 1
    if n.P + n.A > 0 and sP + sA > 0 then f = f + self.rate * (sA / (sP + sA) - f) end
    f = math.min(1 - self.floor, math.max(self.floor, f))
  end
  h[#h + 1] = { step = step, env_fraction = f }
  return f
end

--- mix:note(step, m) → m with m["curriculum/env_fraction"], the share decided for step (for
--- run:log to record).
function Mix:note(step, m)
  local r = record(self, step) or { env_fraction = self:env_fraction(step) }
  m["curriculum/env_fraction"] = r.env_fraction
  return m
end

--- mix:observe(step, m) → m, after keeping m's no_signal/P and no_signal/A (set by run:log
--- given the step's batch) in step's record, for the decisions of the steps after it.
function Mix:observe(step, m)
  local r = record(self, step)
  if r == nil then
    self:env_fraction(step)
    r = record(self, step)
  end
  r.P, r.A = m["no_signal/P"], m["no_signal/A"]
  return m
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
