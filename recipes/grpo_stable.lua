-- grpo_stable: the main job. GRPO on RookWorld tasks (P: best-move policy, A: rules engine)
-- with the settings that kept earlier systems stable: β warm-up, a conservative clip and
-- learning rate (its default sized for the small default model), a -0.3 malformed floor,
-- gradient clipping, and a recovery policy.
-- Evaluates before and after on a fixed set, and prints the DESIGN metrics side by side with
-- 95% intervals and, for the change, a paired one (scripts/evalkit.lua).
--
--   rookscript recipes/grpo_stable.lua                          # the embedded default model
--   rookscript recipes/grpo_stable.lua model=path/to/RookWorld-LM-124M steps=200 lr=1e-6
--   rookscript recipes/grpo_stable.lua resume=runs/grpo_stable  # continue a run
local rook = require("rook")
local sched = require("schedules")
local recovery = require("recovery")
local evalkit = require("evalkit")
local cur = require("curriculum")

local cfg = rook.config{
  model = "default",            -- "default": the embedded default model; or an HF dir / llm.c .bin
  run_dir = "runs/grpo_stable", -- checkpoints, metrics.jsonl, recipe and config copies
  device = "cpu", threads = 0,
  seed = 1,
  steps = 30, prompts = 8, group = 8,
  -- T=0.7: the small default model's T=1 samples are mostly malformed and rarely name a legal
  -- best move, so its groups carried little signal about legality; at 0.7 they do.
  max_new_tokens = 72, temperature = 0.7, top_k = 0, top_p = 1.0,
  positions = "generator",      -- "generator" (seeded games) or a FEN/EPD/PGN/training-text file
  min_plies = 2, max_plies = 20, -- generator: positions from these plies of its games
  env_fraction = 0.5,           -- share of A: (rules) prompts; the rest are P: (policy)
  lr = 3e-4, lr_warmup = 3, lr_schedule = "constant", -- lr for the 7.3M default model; 124M wants ~1e-6
  kl_coef = 0.02, kl_warmup = 10, kl_schedule = "linear", kl_estimator = "k3",
  clip_low = 0.2, clip_high = 0.2, scale = "group", aggregation = "grpo",
  max_grad_norm = 1.0, epochs = 1, minibatches = 1, micro_batch = 32, drop_zero_std = false,
  malformed = -0.3,             -- reward floor for unparsable output (-1.0 drove NaNs)
  stockfish = "", stockfish_depth = 8, stockfish_workers = 2, -- stockfish: engine binary ("": on PATH, then /usr/games)
  eval_size = 256, eval_every = 0, save_every = 10, keep = 3, -- eval_size: fixed prompts, half P: half A:
  recovery = { lr_factor = 0.5, rollback_after = 2, stop_after = 5, kl_stop = 2.0 },
}

local sf = assert(rook.stockfish{ path = cfg.stockfish, depth = cfg.stockfish_depth, workers = cfg.stockfish_workers })
local model = cfg.model
if model == "default" then model = require("defaultmodel").ensure{ engine = sf, log = true } end
local policy = assert(rook.load(model, { device = cfg.device, threads = cfg.threads }))
local ref = policy:reference()
local opt = rook.adamw(policy, { lr = cfg.lr, betas = { 0.9, 0.95 }, weight_decay = 0 })
local function source(seed)
  if cfg.positions ~= "generator" then return assert(rook.positions{ path = cfg.positions, seed = seed, task = "mix" }) end
  return rook.positions{ generator = { seed = seed, min_plies = cfg.min_plies, max_plies = cfg.max_plies }, task = "mix" }
end
local data = source(cfg.seed + 100)
-- A fixed evaluation set, half P: half A:, from other games than training's; training skips
-- its positions too (early positions of different games can coincide).
local evalset = evalkit.set(source(cfg.seed + 200), cfg.eval_size)
local held_out = cur.exclude(evalset)
local resume = cfg.resume ~= "" and cfg.resume or nil
local run = assert(rook.run{ dir = resume or cfg.run_dir, resume = resume,
                             policy = policy, ref = ref, opt = opt, data = data, steps = cfg.steps,
                             keep = cfg.keep, best = "eval/reward_mean" })
local rec = recovery.new(cfg.recovery)
local state = run:state()
rec:restore(state.recovery)

local function evaluate(step)
  local m = evalkit.run(policy, evalset, sf, { malformed = cfg.malformed })
  run:log(step, m, "eval")
  return m
end
local before = state.before or evaluate(run.step)

for step = run.step + 1, cfg.steps do
  local prompts = cur.next(data, cfg.prompts, cfg.env_fraction, { exclude = held_out })
  local batch = policy:rollout(prompts, { group = cfg.group, temperature = cfg.temperature,
    max_new_tokens = cfg.max_new_tokens, top_k = cfg.top_k, top_p = cfg.top_p, seed = cfg.seed * 1000003 + step })
  rook.reward.chess(batch, { engine = sf, malformed = cfg.malformed })
  local m = rook.grpo.step(policy, ref, opt, batch, {
    lr = sched.lr(step, cfg) * opt:lr() / cfg.lr, beta = sched.kl_warmup(step, cfg),
    kl_estimator = cfg.kl_estimator, clip_low = cfg.clip_low, clip_high = cfg.clip_high,
    scale = cfg.scale, aggregation = cfg.aggregation, max_grad_norm = cfg.max_grad_norm,
    epochs = cfg.epochs, minibatches = cfg.minibatches, micro_batch = cfg.micro_batch,
    drop_zero_std = cfg.drop_zero_std })
  run:log(step, m)
  local action = rec:check(step, m, { run = run, opt = opt })
  if action == "stop" then
    run:report(rec:report())
    break
  end
  local eval_now = cfg.eval_every > 0 and step % cfg.eval_every == 0
  local last = eval_now and evaluate(step) or nil
  if step % cfg.save_every == 0 or step == cfg.steps then
    run:save(step, { state = { before = before, recovery = rec:state() }, metrics = last and { ["eval/reward_mean"] = last.reward_mean } })
  end
end

local after = evaluate(cfg.steps)
local columns, order = { before = before, after = after }, { "before", "after" }
local intervals = evalkit.intervals(columns, order)
local verdict = evalkit.verdict(intervals)
print()
print("evaluation on " .. #evalset .. " fixed prompts, greedy; [95% interval]; Δ: paired bootstrap, ▲▼ beyond noise")
print(evalkit.compare(columns, order, { intervals = intervals }))
print(string.format("changed beyond noise: up {%s}, down {%s}", table.concat(verdict.up, ", "), table.concat(verdict.down, ", ")))
return { before = before, after = after, verdict = verdict }
