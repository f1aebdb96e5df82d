-- grpo_stable: the main job. GRPO on RookWorld tasks (P: best move, A: rules) with what kept
-- earlier systems stable: β warm-up, a bound on each token's KL, a conservative clip and
-- learning rate, a -0.3 malformed floor, gradient clipping and a recovery policy; evaluated
-- before and after on a fixed set, with 95% intervals (scripts/evalkit.lua). Any setting of a
-- section below can be given by name (loss_type=dapo) or with its section (grpo.loss_type=dapo).
--
--   rookscript recipes/grpo_stable.lua model=path/to/RookWorld-LM-124M steps=200 lr=1e-6
--   rookscript recipes/grpo_stable.lua trl_compat=true kl_clamp=0   # TRL's conventions
--   rookscript recipes/grpo_stable.lua resume=runs/grpo_stable      # continue a run as it was
-- Exit code: 0 done, 1 error, 3 stopped by the recovery policy (report.txt), 130/143 interrupted.
local rook = require("rook")
local sched, recovery = require("schedules"), require("recovery")
local evalkit, cur = require("evalkit"), require("curriculum")

local cfg = rook.config({
  model = "default", run_dir = "runs/grpo_stable", device = "cpu", threads = 0, seed = 1,
  -- 60 steps: minutes on 2 cores; what they teach, seed by seed, is in the README.
  steps = 60, prompts = 8, kl_warmup = 10, kl_schedule = "linear", mem_budget = "", -- "": half the RAM
  positions = "generator", min_ply = 2, max_ply = 20, env_fraction = 0.5, -- or a FEN/EPD/PGN/text file or a data set
  eval_size = 256, eval_every = 0, save_every = 10, keep = 3,
  samples = 4, print_sample_every = 0, -- completions per step in samples.jsonl; print one every N steps
  -- T=0.7: the small default model's T=1 samples are mostly malformed, with little signal.
  -- stop_rule: answers end where RookWorld-LM's model card stops them (after B: and its move,
  -- after A:'s fourth '+'), finished, not truncated: the real model runs on into new documents.
  rollout = { group = 8, max_new_tokens = 72, temperature = 0.7, stop_rule = "rookworld" },
  grpo = { beta = 0.05, kl_clamp = 10 }, -- k3 is unbounded: one rare token can be a batch's KL
  adamw = { lr = 3e-4, lr_warmup = 3 },  -- sized for the 7.3M default model (124M wants ~1e-6)
  reward = { malformed = -0.3 },         -- -1.0 drove NaNs
  stockfish = { depth = 8, workers = 2 },
  recovery = { lr_factor = 0.5, rollback_after = 2, stop_after = 5, kl_stop = 2.0 },
}, { steps = "integer >= 1", prompts = "integer >= 1", threads = "integer >= 0", env_fraction = "[0, 1]",
     kl_warmup = "integer >= 0", kl_schedule = "one of constant, linear, step", eval_size = "integer >= 1",
     eval_every = "integer >= 0", save_every = "integer >= 1", keep = "integer >= 1",
     samples = "integer >= 0", print_sample_every = "integer >= 0",
     -- The data a run draws from cannot change when it is resumed.
     positions = "fixed", min_ply = "integer >= 0, fixed", max_ply = "integer >= 0, fixed" })

local sf = assert(rook.stockfish(cfg.stockfish))
local policy = assert(rook.load(cfg.model, { device = cfg.device, threads = cfg.threads, engine = sf }))
local ref, opt = policy:reference(), rook.adamw(policy, cfg.adamw)
local plan = rook.grpo.plan(policy, { budget = cfg.mem_budget, prompts = cfg.prompts, eval_size = cfg.eval_size,
                                      rollout = cfg.rollout, grpo = cfg.grpo })
local configured = cfg.grpo.micro_batch > 0 and ("; micro_batch=" .. cfg.grpo.micro_batch .. " as configured") or ""
if configured == "" then cfg.grpo.micro_batch = plan.micro_batch end
rook.memory.limit(plan.bytes) -- the garbage collector keeps the heap near the plan (a soft limit)
rook.log("memory: %s%s", plan.text, configured)
local function source(seed, split)
  if cfg.positions ~= "generator" then return assert(rook.positions{ path = cfg.positions, seed = seed, task = "mix", split = split }) end
  return rook.positions{ generator = { seed = seed, min_ply = cfg.min_ply, max_ply = cfg.max_ply }, task = "mix" }
end
local data = source(cfg.seed + 100)
-- A fixed evaluation set, half P: half A:, from other games (a data set's test split where it
-- has one); training skips its positions.
local evalset = evalkit.set(source(cfg.seed + 200, { "test", "train" }), cfg.eval_size)
local held_out = cur.exclude(evalset)
local run = assert(rook.run{ dir = cfg.run_dir, resume = cfg.resume,
  policy = policy, ref = ref, opt = opt, data = data, steps = cfg.steps, save_every = cfg.save_every, keep = cfg.keep,
  best = "eval/reward_mean", samples = cfg.samples, print_sample_every = cfg.print_sample_every })
local rec, state = recovery.new(cfg.recovery), run:state()
rec:restore(state.recovery)
local function evaluate(step)
  local m = evalkit.run(policy, evalset, sf, { reward = cfg.reward }) -- greedy, ended by the RookWorld rule
  run:log(step, m, "eval")
  return m
end
local before, beta = state.before or evaluate(run.step), cfg.grpo.beta
local after = state.after_step == run.step and state.after or nil -- a finished run, resumed: its last evaluation

-- run.step is the step of the policy's weights: a rollback sets it back, and the steps after
-- the checkpoint run again (with the recovery policy's lower learning rate).
while run.step < cfg.steps do
  local step = run.step + 1
  cfg.rollout.seed = cfg.seed * 1000003 + step
  local batch = policy:rollout(cur.next(data, cfg.prompts, cfg.env_fraction, { exclude = held_out }), cfg.rollout)
  rook.reward.chess(batch, cfg.reward, sf)
  cfg.grpo.beta = sched.kl_warmup(step, beta, cfg.kl_warmup, cfg.kl_schedule)
  local m = rook.grpo.step(policy, ref, opt, batch, cfg.grpo)
  run:log(step, m, batch) -- metrics, and a few completions to samples.jsonl
  local action = rec:check(step, m, { run = run, opt = opt })
  if action == "stop" then run:stop(rec:report()) break end
  local due = cfg.eval_every > 0 and step % cfg.eval_every == 0 or step == cfg.steps
  local last = action ~= "rollback" and due and evaluate(step) or nil
  after = step == cfg.steps and last or nil
  -- Due every save_every steps, at the last step, and after Ctrl-C (the save then ends the run).
  if action ~= "rollback" and run:save_due(step) then
    run:save(step, { state = { before = before, recovery = rec:state(), after = after, after_step = after and step },
                     metrics = last and { ["eval/reward_mean"] = last.reward_mean } })
  end
end

-- Evaluated at the last step (so checkpoints/BEST is its checkpoint), or where the run stopped.
return evalkit.report(before, after or evaluate(run.step)) -- prints the table; returns {before=, after=, verdict=}
