local check = require("check")
local rook = require("rook")

local T = {}

-- A recipe's flat config, as rook.config returns it: engine settings under one of their
-- names, and the recipe's own keys.
local function recipe_config()
  return {
    steps = 30, seed = 7, threads = 0, depth = 3, model = "default",
    group = 4, max_new_tokens = 16, temperature = 0.8, top_k = 5,
    kl_coef = 0.05, epsilon = 0.1, loss_type = "dapo",
    lr = 1e-4, lr_warmup = 3, betas = { 0.9, 0.99 },
    malformed = -0.5, policy = { best_rank = 0.6 }, rank_credit = { 1, 0.5 },
    stockfish = "/bin/sf", stockfish_depth = 6, stockfish_workers = 2,
  }
end

local function keys(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return table.concat(out, ",")
end

-- rook.settings takes the entries of a flat config that are one call's settings, under their
-- canonical names.
function T.test_settings_take_a_calls_settings_by_name()
  local cfg = recipe_config()
  local update = rook.settings(cfg, "grpo")
  check.eq(keys(update), "beta,epsilon,loss_type", "grpo settings")
  check.eq(update.beta, 0.05, "kl_coef reaches beta")
  local sampling = rook.settings(cfg, "rollout")
  check.eq(keys(sampling), "group,max_new_tokens,temperature,top_k", "rollout settings (no seed: a recipe derives it per call)")
  local adamw = rook.settings(cfg, "adamw")
  check.eq(keys(adamw), "betas,lr,lr_warmup", "adamw settings and betas")
  local scoring = rook.settings(cfg, "reward")
  check.eq(keys(scoring), "depth,malformed,policy,rank_credit", "reward settings")
  check.eq(scoring.policy.best_rank, 0.6)
  -- The pool's settings go by their recipe names; the bare ones (depth, threads) are the recipe's.
  local engine = rook.settings(cfg, "stockfish")
  check.eq(keys(engine), "depth,path,workers", "stockfish settings")
  check.eq(engine.depth, 6, "stockfish_depth, not the recipe's depth")
  check.eq(engine.path, "/bin/sf")
  local options = rook.settings(cfg, "eval")
  check.eq(keys(options), "depth,malformed,max_new_tokens,policy,rank_credit,temperature", "eval settings")
  -- Each result is what the call reads.
  rook.check{ grpo = update, rollout = sampling, adamw = adamw, reward = scoring, stockfish = engine, eval = options }
  -- A copy: changing it leaves the config alone.
  scoring.policy.best_rank = 0.1
  check.eq(cfg.policy.best_rank, 0.6, "the config's table is not shared")
end

-- opts go over the config's entries, under any name of the group's settings, and are strict.
function T.test_settings_opts_are_strict()
  local cfg = recipe_config()
  local adamw = rook.settings(cfg, "adamw", { weight_decay = 0, total_updates = 90, betas = { 0.8, 0.9 } })
  check.eq(adamw.total_updates, 90)
  check.eq(adamw.betas[1], 0.8, "opts replace the config's entry")
  check.eq(rook.settings(cfg, "grpo", { beta = 0 }).beta, 0, "beta replaces the config's kl_coef")
  check.eq(rook.settings(cfg, "stockfish", { workers = 1 }).workers, 1)
  check.eq(rook.settings(cfg, "stockfish", { stockfish_workers = 3 }).workers, 3, "an alias, under its canonical name")
  check.eq(rook.settings({}, "reward", { engine = "not yet checked" }).engine, "not yet checked", "the call's own keys")
  check.errors(function() rook.settings(cfg, "adamw", { total_update = 90 }) end,
    '"total_update" is not an option of rook.adamw (did you mean "total_updates"?)')
  check.errors(function() rook.settings(cfg, "grpo", { beta = 0, kl_coef = 0 }) end, 'option "beta" is given twice')
  check.errors(function() rook.settings(cfg, "grpos") end, 'unknown setting group "grpos" (did you mean "grpo"?)')
  check.errors(function() rook.settings({ beta = 0.1, kl_coef = 0.2 }, "grpo") end,
    'the config gives rook.grpo.step\'s setting "beta" twice, as "beta", "kl_coef"')
  -- What rook.settings passes on is read strictly by the call.
  local bad = rook.settings({ malformed = "low" }, "reward")
  check.errors(function() rook.check{ reward = bad } end, 'rook.check: rook.reward.chess: option "malformed": want a number, got the string "low"')
end

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
