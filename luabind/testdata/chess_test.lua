local check = require("check")
local rook = require("rook")

local T = {}

local EPD = "../engine/chess/testdata/positions.epd"

function T.test_positions_mix_and_cursor()
  local data = rook.positions{ path = EPD, task = "mix", env_fraction = 0.5, seed = 3 }
  local first = data:next(6)
  check.eq(#first, 6)
  local tasks = {}
  for _, it in ipairs(first) do
    tasks[it.task] = true
    if it.task == "P" then
      check.eq(string.sub(it.prompt, 1, 3), "P: ")
      check.eq(#it.prompt, 93, "padded policy prompt")
    else
      check.eq(string.sub(it.prompt, 1, 3), "A: ")
      check.truthy(it.move, "env prompt has its move")
    end
  end
  check.truthy(tasks.P and tasks.A, "a mix of both tasks")
  local c = data:cursor()
  local after = data:next(2)
  local again = rook.positions{ path = EPD, task = "mix", env_fraction = 0.5, seed = 3 }
  again:restore(c)
  local same = again:next(2)
  check.eq(same[1].prompt, after[1].prompt, "restored cursor continues identically")
  check.eq(same[2].prompt, after[2].prompt)
  local _, err = rook.positions("no/such/file.epd")
  check.truthy(err, "missing file is an error value")
end

function T.test_rules_and_scoring_without_engine()
  local r = rook.chess.step("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", "e2e4")
  check.eq(r.fen, "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1", "no en-passant square without a capture")
  check.eq(r.completion, r.fen .. "+0.001+0+0")
  local prompt = "A: rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1+e2e4+e2e4+"
  local s = rook.chess.score(prompt, r.completion)
  check.eq(s.total, 1, "the rules' own answer scores 1")
  check.eq(s.components.fen_exact, 1)
  local bad = rook.chess.score(prompt, "garbage")
  check.eq(bad.malformed, true)
  check.near(bad.total, -0.3, 1e-12, "malformed floor")
  check.errors(function() rook.chess.score(prompt, r.completion, { malformed = 0/0 }) end,
    "rook.chess.score: malformed must be in [-10, 10], got NaN")
end

function T.test_reward_chess_on_a_rollout()
  local sf, err = rook.stockfish{ depth = 6, workers = 2 }
  check.truthy(sf, err)
  local data = rook.positions{ path = EPD, task = "mix", seed = 1 }
  local policy = rook.load("random:tiny")
  local b = policy:rollout(data:next(2), { group = 2, max_new_tokens = 8, seed = 1 })
  local summary = rook.reward.chess(b, { engine = sf, malformed = -0.25 })
  check.eq(#b:rewards(), 4)
  for _, r in ipairs(b:rewards()) do check.near(r, -0.25, 1e-12, "random text is malformed") end
  check.eq(summary.components.malformed, 1)
  check.eq(summary.p_count + summary.a_count, 4)
  local m = rook.eval(policy, data:next(2), { engine = sf, max_new_tokens = 8 })
  check.eq(m.p_format + m.a_format, 0, "a random model formats nothing")
  local a = sf:analyse("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1")
  check.eq(#a.moves, 5)
  check.errors(function() rook.reward.chess(b, { engine = sf, weights = 1 }) end, 'unknown option "weights"')
end

function T.test_eval_answers_per_prompt()
  local sf, err = rook.stockfish{ depth = 6, workers = 2 }
  check.truthy(sf, err)
  local data = rook.positions{ path = EPD, task = "mix", seed = 1 }
  local prompts = {}
  for _, task in ipairs({ "policy", "env", "policy" }) do prompts[#prompts + 1] = data:next(1, { task = task })[1] end
  local m = rook.eval(rook.load("random:tiny"), prompts, { engine = sf, max_new_tokens = 8 })
  check.eq(#m.answers, 3, "one answer per prompt")
  local sum = 0
  for i, a in ipairs(m.answers) do
    check.eq(a.task, prompts[i].task == "P" and "policy" or "env", "answers in prompt order")
    sum = sum + a.reward
  end
  check.near(sum / 3, m.reward_mean, 1e-12, "answers average to reward_mean")
  check.eq(m.answers[1].p_format, 0)
  check.eq(m.answers[1].a_format, nil, "an answer carries only its task's metrics")
  check.eq(m.answers[2].a_fen_exact, 0)
  check.eq(m.answers[2].p_format, nil)
end

function T.test_engine_option_must_be_a_stockfish()
  check.errors(function() rook.positions{ generator = { engine = 3 } } end,
    "generator.engine must be a rook.stockfish, got a number")
  check.errors(function() rook.chess.score("A: x", "y", { engine = "sf" }) end,
    "engine must be a rook.stockfish, got a string")
end

function T.test_stockfish_settings_are_checked()
  check.errors(function() rook.stockfish{ depth = 0 } end, "stockfish_depth must be ≥ 1, got 0")
  check.errors(function() rook.stockfish{ workers = 0 } end, "stockfish_workers must be ≥ 1, got 0")
  local sf, err = rook.stockfish{ path = "/nonexistent/stockfish" }
  check.eq(sf, nil)
  check.truthy(string.find(err, "make setup", 1, true), err)
end

return T
