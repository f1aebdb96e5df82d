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
      check.eq(#it.prompt, 92, "padded policy prompt, less the last space (a token prefix of its row)")
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
    "rook.chess.score: reward: malformed must be in [-10, 10], got NaN")
  -- Fields that parse around a FEN that is not a position (a rank of 6 squares): graded
  -- between the floor and the lowest well-formed A: total (0.1), or the floor without
  -- partial_credit.
  local short = string.gsub(r.completion, "^rnbqkbnr/pppppppp", "rnbqkbnr/pppppp")
  local part = rook.chess.score(prompt, short)
  check.eq(part.malformed, true)
  check.eq(part.partial, true)
  check.truthy(part.total > -0.3 and part.total < 0.1, "partly parsed: " .. part.total)
  check.eq(bad.partial, false, "garbage parses not at all")
  local floored = rook.chess.score(prompt, short, { partial_credit = false })
  check.eq(floored.partial, false)
  check.near(floored.total, -0.3, 1e-12, "partial_credit = false: the floor")
end

-- An illegal position is an error, not a −1 reward; an illegal move in a legal one is judged.
function T.test_step_refuses_an_illegal_position()
  local r, err = rook.chess.step("8/8/8/8/8/8/8/4K3 w - - 0 1", "e1e2")
  check.eq(r, nil, "no answer for a kingless board")
  check.truthy(string.find(err, "illegal position: black has 0 kings", 1, true), err)
  r, err = rook.chess.step("4k3/8/8/8/8/8/8/4K3 w K - 0 1", "e1g1")
  check.eq(r, nil, "no answer for a castling right without its rook")
  check.truthy(string.find(err, "castling right K without the rook on h1", 1, true), err)
  r = rook.chess.step("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", "e2e5")
  check.eq(r.reward, -1, "an illegal move still gets the illegal reward")
end

-- A kingless FEN in a position file: an error naming file:line, or skipped with skip_invalid,
-- so it never reaches the engine (it used to pass skip_invalid and crash training at step 3).
function T.test_positions_refuse_illegal_positions()
  local path = check.tmpdir() .. ".fen"
  local f = assert(io.open(path, "w"))
  f:write("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1\n",
    "5R2/6R1/8/3P4/p7/1b2R2P/2p3P1/6K1 b - - 0 58\n",
    "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1\n")
  f:close()
  local strict = rook.positions{ path = path, loop = false }
  check.errors(function() strict:next(3) end, path .. ":2: fen")
  local lenient = rook.positions{ path = path, loop = false, skip_invalid = true }
  local items = lenient:next(3)
  check.eq(#items, 2, "the kingless line is skipped")
  check.eq(items[2].origin, path .. ":3")
end

function T.test_reward_chess_on_a_rollout()
  local sf, err = rook.stockfish{ depth = 6, workers = 2 }
  check.truthy(sf, err)
  local data = rook.positions{ path = EPD, task = "mix", seed = 1 }
  local policy = rook.load("random:tiny")
  local b = policy:rollout(data:next(2), { group = 2, max_new_tokens = 8, seed = 1 })
  local summary = rook.reward.chess(b, { malformed = -0.25 }, sf)
  check.eq(#b:rewards(), 4)
  for _, r in ipairs(b:rewards()) do check.near(r, -0.25, 1e-12, "random text is malformed") end
  check.eq(summary.components.malformed, 1)
  check.eq(summary.components.partial, 0, "random text parses not at all")
  check.eq(summary.p_count + summary.a_count, 4)
  local m = rook.eval(policy, data:next(2), { max_new_tokens = 8 }, sf)
  check.eq(m.p_format + m.a_format, 0, "a random model formats nothing")
  local a = sf:analyse("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1")
  check.eq(#a.moves, 5)
  check.errors(function() rook.reward.chess(b, { weights = 1 }, sf) end, 'unknown option "weights"')
  check.errors(function() rook.reward.chess(b, { engine = sf }) end, 'unknown option "engine"')
end

-- reward.soft_overlong: DAPO's soft overlong punishment, by each completion's length within the
-- batch's max_new_tokens, added to its total and reported as the component overlong; off by
-- default; a length longer than the batch's max_new_tokens is refused, naming the setting.
function T.test_reward_chess_soft_overlong()
  local data = rook.positions{ path = EPD, task = "env", seed = 1 } -- A: prompts: no engine needed
  local b = rook.load("random:tiny"):rollout(data:next(2), { group = 2, max_new_tokens = 8, seed = 1 })
  check.eq(rook.reward.chess(b).components.overlong, nil, "off by default: no overlong component")
  local base = b:rewards()
  -- cache 8 = max_new_tokens: every token is punished, 0.5 · (0 − n)/8.
  local s = rook.reward.chess(b, { soft_overlong = { soft_punish_cache = 8, penalty_factor = 0.5 } })
  local r, sum = b:rewards(), 0
  for i = 1, b.size do
    local pen = 0.5 * ((0 - b[i].tokens) / 8)
    check.near(r[i], base[i] + pen, 1e-12, "completion " .. i .. " of " .. b[i].tokens .. " tokens")
    sum = sum + pen
  end
  check.truthy(sum < 0, "the penalty shifts the totals")
  check.near(s.components.overlong, sum / b.size, 1e-12, "components.overlong: the mean penalty")
  check.near(s.mean, (sum + base[1] + base[2] + base[3] + base[4]) / b.size, 1e-12, "the mean total")
  check.errors(function() rook.reward.chess(b, { soft_overlong = { soft_punish_cache = 9 } }) end,
    "rook.reward.chess: reward.soft_overlong.soft_punish_cache (9) is longer than max_new_tokens (8)")
  check.errors(function() rook.reward.chess(b, { soft_overlong = { max_completion_len = 12, soft_punish_cache = 4 } }) end,
    "rook.reward.chess: reward.soft_overlong.max_completion_len (12) is longer than max_new_tokens (8)")
  check.errors(function() rook.reward.chess(b, { soft_overlong = { soft_punish_cache = 1.5 } }) end,
    'option "soft_overlong.soft_punish_cache": want an integer')
  check.errors(function() rook.reward.chess(b, { soft_overlong = { soft_punish_cache = 4, penalty_factor = -1 } }) end,
    "soft_overlong.penalty_factor must be a finite number ≥ 0, got -1")
end

-- Reward options are rookworld.RewardConfig's settings: nested weights over their defaults,
-- lists, named shapings; an older name is refused with the new one; errors name the key by
-- its path.
function T.test_reward_options()
  local prompt = "A: rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1+e2e4+e2e4+"
  local right = rook.chess.step("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", "e2e4").completion
  check.near(rook.chess.score(prompt, "garbage", { malformed = -0.5 }).total, -0.5, 1e-12, "the malformed floor")
  check.errors(function() rook.chess.score(prompt, "garbage", { malformd = -0.5 }) end,
    'rook.chess.score: unknown option "malformd" (did you mean "malformed"?)')
  -- Right flags and reward field, wrong FEN: with all the weight on the FEN the total is 0,
  -- 2t − 1 = −1 when centered.
  local wrong_fen = string.gsub(right, "4P3", "3P4", 1)
  local fen_only = { env = { format = 0, flags = 0, reward_field = 0 } }
  check.near(rook.chess.score(prompt, wrong_fen, fen_only).total, 0, 1e-12, "only the FEN weighs")
  fen_only.shaping, fen_only.partial_credit = "centered", false -- −1 lies below the −0.3 floor
  check.near(rook.chess.score(prompt, wrong_fen, fen_only).total, -1, 1e-12, "centered")
  fen_only.partial_credit = nil
  check.errors(function() rook.chess.score(prompt, wrong_fen, fen_only) end,
    "partial_credit: malformed (-0.3) must be below the lowest total of a well-formed env answer (-1")
  check.near(rook.chess.score(prompt, wrong_fen).total, 0.4, 1e-12, "default weights: format, flags, reward field")
  check.errors(function() rook.chess.score(prompt, right, { env = { fenn = 1 } }) end,
    'rook.chess.score: unknown option "env.fenn" (did you mean "fen"?)')
  check.errors(function() rook.chess.score(prompt, right, { rank_credit = { 1, "x" } }) end,
    'option "rank_credit": element 2: want a number, got the string "x"')
  check.errors(function() rook.chess.score(prompt, right, { rank_credit = { 1, 2 } }) end, "rank_credit[1] must be in [0, 1], got 2")
  check.errors(function() rook.chess.score(prompt, right, { policy = 0.5 }) end, 'option "policy": want a table of settings, got 0.5')
end

-- rook.eval's settings are its decoding settings (rollout.Config's names) and the reward's,
-- nested (reward = {...} or a reward section); the engine is its fourth argument.
function T.test_eval_options_are_checked()
  local policy = rook.load("random:tiny")
  local prompts = { "A: rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1+e2e4+e2e4+" }
  check.errors(function() rook.eval(policy, prompts, { max_new_token = 8 }) end,
    'rook.eval: unknown option "max_new_token" (did you mean "max_new_tokens"?)')
  check.errors(function() rook.eval(policy, prompts, { temperature = 0 }) end, "rook.eval: eval: rollout: temperature must be > 0")
  check.errors(function() rook.eval(policy, prompts, { reward = { malformed = 11 } }) end,
    "rook.eval: eval: reward: malformed must be in [-10, 10], got 11")
  check.errors(function() rook.eval(policy, prompts, { malformed = -0.25 }) end, 'rook.eval: unknown option "malformed"')
  local m = rook.eval(policy, prompts, { max_new_tokens = 4, greedy = false, seed = 3, reward = { malformed = -0.25 } })
  check.near(m.reward_mean, -0.25, 1e-12, "a random model's answer is malformed")
end

function T.test_eval_answers_per_prompt()
  local sf, err = rook.stockfish{ depth = 6, workers = 2 }
  check.truthy(sf, err)
  local data = rook.positions{ path = EPD, task = "mix", seed = 1 }
  local prompts = {}
  for _, task in ipairs({ "policy", "env", "policy" }) do prompts[#prompts + 1] = data:next(1, { task = task })[1] end
  local m = rook.eval(rook.load("random:tiny"), prompts, { max_new_tokens = 8 }, sf)
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

-- A batch keeps its prompts' items: batch:items() gives them back, one per group, with the
-- game each is judged with; a recipe's own reward can score a completion by its item. The
-- batch also says how it was drawn.
function T.test_batch_keeps_its_items()
  local pgn = "../engine/rookworld/testdata/repetition.pgn"
  local prompts = { "A: rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1+e2e4+e2e4+" }
  for _, it in ipairs(rook.positions{ path = pgn, per_game = 1000, loop = false, task = "env" }:next(100)) do
    if it.origin == pgn .. ":4 ply 17" or it.origin == pgn .. ":4 ply 3" then prompts[#prompts + 1] = it end
  end
  check.eq(#prompts, 3)
  local b = rook.load("random:tiny"):rollout(prompts, { group = 2, max_new_tokens = 3, seed = 5, stop_rule = "rookworld" })
  local items = b:items()
  check.eq(#items, 3, "one item per group")
  check.eq(items[1].prompt, prompts[1])
  check.eq(items[1].task, nil, "a string prompt's item has only its text")
  for i = 2, 3 do
    for _, k in ipairs({ "prompt", "task", "fen", "move", "origin", "start_fen" }) do
      check.eq(items[i][k], prompts[i][k], k)
    end
    check.eq(items[i].history ~= nil, prompts[i].history ~= nil)
  end
  check.eq(table.concat(items[3].history, " "), table.concat(prompts[3].history, " "))
  check.eq(b[5].group, 3, "a completion's group indexes batch:items()")
  check.eq(b.seed, 5)
  check.eq(b.max_new_tokens, 3)
  check.eq(b.stop_rule, "rookworld")
  check.eq(#b.stop, 0)
  local right = rook.chess.step(items[3].fen, items[3].move)
  local rewards = rook.reward.fn(b, function(_, text, c)
    return rook.chess.score(items[c.group], c.group == 3 and string.gsub(right.completion, "0.001%+0%+0", "0.5+1+0") or text).total
  end)
  check.eq(rewards[5], 1, "the fifth repetition, scored with the item's game")
  check.errors(function() rook.load("random:tiny"):rollout({ prompts[1], { fen = "x" } }) end,
    'prompt 2: field "prompt": want a string, got nil')
end

function T.test_engine_option_must_be_a_stockfish()
  check.errors(function() rook.positions{ generator = { engine = 3 } } end,
    'rook.positions: option "generator.engine": want a rook.stockfish, got 3')
  check.errors(function() rook.chess.score("A: x", "y", nil, "sf") end,
    "rook.chess.score: the engine (argument 4) must be a rook.stockfish, got string")
end

function T.test_stockfish_settings_are_checked()
  check.errors(function() rook.stockfish{ depth = 0 } end, "rook.stockfish: stockfish: depth must be ≥ 1, got 0")
  check.errors(function() rook.stockfish{ workers = 0 } end, "stockfish: workers must be ≥ 1, got 0")
  check.errors(function() rook.stockfish{ depht = 4 } end, 'rook.stockfish: unknown option "depht" (did you mean "depth"?)')
  check.errors(function() rook.stockfish{ timeout = "30s" } end, 'rook.stockfish: option "timeout": want a number, got the string "30s"')
  local sf, err = rook.stockfish{ path = "/nonexistent/stockfish" }
  check.eq(sf, nil)
  check.truthy(string.find(err, "make setup", 1, true), err)
end

-- A rook.game keeps its history: repetitions by FIDE's rule, and the automatic game ends.
function T.test_game_sees_repetition()
  local g = rook.chess.game()
  check.eq(g:fen(), "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1")
  check.eq(g:repetitions(), 1)
  local shuffle = { "g1f3", "g8f6", "f3g1", "f6g8" }
  local last, before
  for round = 1, 4 do
    for _, m in ipairs(shuffle) do
      check.eq(g:outcome(), nil, "the game goes on")
      before = g:fen()
      last = assert(g:push(m))
    end
    check.eq(g:repetitions(), round + 1, "the start position again")
  end
  check.eq(last.terminated, true, "a fifth occurrence ends the game")
  check.eq(last.reward, 0.5)
  check.eq(last.completion, g:fen() .. "+0.5+1+0")
  local o = g:outcome()
  check.eq(o.result, "1/2-1/2")
  check.eq(o.reason, "fivefold_repetition")
  check.eq(#g:moves(), 16)
  check.eq(g:moves()[16], "f6g8")
  -- The same step from the bare FEN cannot see it.
  check.eq(rook.chess.step(before, "f6g8").terminated, false)

  local r, err = g:push("e2e5")
  check.eq(r, nil, "an illegal move is an error")
  check.truthy(string.find(err, "e2e5", 1, true), err)
  check.eq(#g:moves(), 16, "and changes nothing")

  local mate = rook.chess.game("rnbqkbnr/pppp1ppp/8/4p3/6P1/5P2/PPPPP2P/RNBQKBNR b KQkq - 0 2")
  check.eq(mate:push("d8h4").reward, 1)
  check.eq(mate:outcome().result, "0-1")
  check.eq(mate:outcome().reason, "checkmate")
  check.truthy(string.find(tostring(mate), "rook.game(", 1, true))
  local bad
  bad, err = rook.chess.game("8/8/8/8/8/8/8/4K3 w - - 0 1")
  check.eq(bad, nil)
  check.truthy(string.find(err, "black has 0 kings", 1, true), err)
end

-- A: prompts from a PGN game are judged with the game: the move that repeats a position a
-- fifth time is a draw, though the prompt alone (ten recent moves) cannot show it.
function T.test_positions_from_games_judge_fivefold()
  local data = rook.positions{ path = "../engine/rookworld/testdata/repetition.pgn", per_game = 1000,
    loop = false, task = "env" }
  local item
  for _, it in ipairs(data:next(100)) do
    if it.origin == "../engine/rookworld/testdata/repetition.pgn:4 ply 17" then item = it end
  end
  check.truthy(item, "the knights game's 18th move")
  local g = rook.chess.game()
  for _, m in ipairs({ "e2e4", "e7e5" }) do g:push(m) end
  for _ = 1, 4 do
    for _, m in ipairs({ "g1f3", "b8c6", "f3g1", "c6b8" }) do g:push(m) end
  end
  check.eq(g:repetitions(), 5)
  local bare = rook.chess.step(item.fen, item.move).completion
  local right = g:fen() .. "+0.5+1+0"
  check.eq(bare, g:fen() .. "+0.001+0+0", "the bare FEN: the game goes on")
  -- The item carries its game; the prompt's text alone does not.
  check.eq(item.start_fen, "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1")
  check.eq(#item.history, 17)
  check.eq(item.history[17], "f3g1")
  check.eq(item.move, "c6b8")
  local s = rook.chess.score(item, right)
  check.eq(s.total, 1, "the draw by repetition is right")
  check.eq(s.expected, right)
  check.near(rook.chess.score(item, bare).total, 0.775, 1e-12, "the bare FEN's answer is not")
  check.near(rook.chess.score(item.prompt, right).total, 0.775, 1e-12, "a string prompt has no game: the bare FEN judges it")
  check.eq(rook.chess.score(item.prompt, bare).total, 1)
end

-- Only the A: items whose answer needs their game carry it (start_fen, history): a handful in
-- a file of repetitions, none for P: items or sources without a game's start.
function T.test_items_carry_a_game_only_where_it_decides()
  local pgn = "../engine/rookworld/testdata/repetition.pgn"
  local carried = {}
  for _, it in ipairs(rook.positions{ path = pgn, per_game = 1000, loop = false, task = "env" }:next(100)) do
    check.eq(it.start_fen ~= nil, it.history ~= nil, "start_fen and history come together")
    if it.history then carried[#carried + 1] = it.origin end
  end
  -- The eight rows of rookworld's fivefoldRows, and the perpetual check's last position, whose
  -- move (drawn: the game has no next) repeats a position a fifth time too.
  check.eq(table.concat(carried, ", "), table.concat({ pgn .. ":4 ply 17", pgn .. ":10 ply 16", pgn .. ":10 ply 17",
    pgn .. ":18 ply 16", pgn .. ":18 ply 17", pgn .. ":18 ply 18", pgn .. ":18 ply 19", pgn .. ":18 ply 22",
    pgn .. ":18 ply 23" }, ", "))
  for _, it in ipairs(rook.positions{ path = pgn, per_game = 1000, loop = false, task = "policy" }:next(100)) do
    check.eq(it.history, nil, "a P: item carries no game")
  end
  for _, it in ipairs(rook.positions{ path = EPD, task = "env", seed = 1 }:next(20)) do
    check.eq(it.history, nil, "an EPD position has no game")
  end
end

-- rook.chess.score takes an item table as its prompt; an item table it cannot read is an
-- error naming the field.
function T.test_score_reads_item_tables()
  local prompt = "A: rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1+e2e4+e2e4+"
  local right = rook.chess.step("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", "e2e4").completion
  check.eq(rook.chess.score({ prompt = prompt, task = "A" }, right).total, 1)
  check.errors(function() rook.chess.score({ text = prompt }, right) end, 'the prompt: field "prompt": want a string, got nil')
  check.errors(function() rook.chess.score({ prompt = prompt, history = { "e2e4" } }, right) end,
    'the prompt: field "history": without start_fen')
  check.errors(function() rook.chess.score(3, right) end, "the prompt is a number, want a string or an item table")
end

return T
