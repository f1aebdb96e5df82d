local check = require("check")
local rook = require("rook")

local T = {}

-- rook.check reads reward, stockfish and eval option tables as their calls will.
function T.test_check_reward_stockfish_eval()
  rook.check{ reward = { malformed = -0.5, policy = { eval = 0.3 }, shaping = "centered" },
              stockfish = { stockfish_depth = 4, timeout = 2.5 }, eval = { greedy = false, malformed = -1 } }
  check.errors(function() rook.check{ reward = { malformed = 20 } } end,
    "rook.check: rook.reward.chess: malformed must be in [-10, 10], got 20")
  check.errors(function() rook.check{ reward = { policy = { best_rnk = 1 } } } end,
    'rook.check: rook.reward.chess: unknown option "policy.best_rnk" (did you mean "policy.best_rank"?)')
  check.errors(function() rook.check{ reward = { shaping = "square" } } end, 'shaping must be "linear", "centered" or "strict", got "square"')
  check.errors(function() rook.check{ reward = { engine = 3 } } end, "rook.check: rook.reward.chess: engine must be a rook.stockfish, got a number")
  check.errors(function() rook.check{ stockfish = { stockfish_depth = 0 } } end,
    "rook.check: rook.stockfish: stockfish_depth must be ≥ 1, got 0")
  check.errors(function() rook.check{ stockfish = { timeout = 0 } } end,
    "rook.check: rook.stockfish: stockfish_timeout must be a positive number of seconds, got 0")
  check.errors(function() rook.check{ eval = { temperature = 0 } } end, "rook.check: rook.eval: temperature must be > 0")
  check.errors(function() rook.check{ eval = { max_new_token = 8 } } end,
    'rook.check: rook.eval: unknown option "max_new_token" (did you mean "max_new_tokens"?)')
  check.errors(function() rook.check{ rewards = {} } end, 'unknown option set "rewards" (did you mean "reward"?)')
  local policy = rook.load("random:tiny")
  check.errors(function() rook.check{ eval = { max_new_tokens = 300 }, model = policy } end, "max_new_tokens must be < 256")
end

return T
