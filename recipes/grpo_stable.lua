-- grpo_stable: the main job. GRPO on RookWorld tasks (P: best move, A: rules), kept stable by β warm-up,
-- a bound on each token's KL, a conservative clip and learning rate, graded failures over a -0.3 floor,
-- gradient clipping and a recovery policy; evaluated before and after on a fixed set, with 95% intervals.
-- Settings by name (loss_type=dapo) or section (grpo.loss_type=dapo); resume=<run dir> continues a run.
-- Exit code: 0 done, 1 error, 3 stopped by the recovery policy (report.txt), 130/143 interrupted.
local rook, sched, recovery = require("rook"), require("schedules"), require("recovery")
local evalkit, cur, dyn = require("evalkit"), require("curriculum"), require("dynamic")
local cfg = rook.config({
  model = "default", run_dir = "runs/grpo_stable", device = "cpu", threads = 0, seed = 1, mem_budget = "",
  steps = 60, prompts = 8, kl_warmup = 10, kl_schedule = "linear", save_every = 10, keep = 3,
  positions = "generator", min_ply = 2, max_ply = 20, env_fraction = 0.5, eval_size = 256, eval_every = 0,
  samples = 4, print_sample_every = 0, -- completions per step in samples.jsonl; print one every N steps
  dynamic_sampling = false, max_draws = 3, on_short = "proceed", -- DAPO: tied groups dropped, new prompts drawn
  -- T=0.7: the default model's T=1 samples are mostly malformed; answers end where the model card's do.
  rollout = { group = 8, max_new_tokens = 72, temperature = 0.7, stop_rule = "rookworld" },
  grpo = { beta = 0.05, kl_clamp = 10 }, -- k3 is unbounded: one rare token can be a batch's KL
  adamw = { lr = 3e-4, lr_warmup = 3 },  -- sized for the 7.3M default model (124M wants ~1e-6)
  reward = { malformed = -0.3, partial_credit = true }, -- -1.0 drove NaNs; false: every A: group ties
  stockfish = { depth = 8, workers = 2 }, recovery = { lr_factor = 0.5, rollback_after = 2, stop_after = 5, kl_stop = 2.0 },
}, { steps = "integer >= 1", prompts = "integer >= 1", threads = "integer >= 0", env_fraction = "[0, 1]",
     kl_warmup = "integer >= 0", kl_schedule = "one of constant, linear, step", eval_size = "integer >= 1",
     eval_every = "integer >= 0", save_every = "integer >= 1", keep = "integer >= 1", samples = "integer >= 0",
     print_sample_every = "integer >= 0", max_draws = "integer >= 1", on_short = "one of proceed, error",
     positions = "fixed", min_ply = "integer >= 0, fixed", max_ply = "integer >= 0, fixed" }) -- a run resumes on its data
local sf = assert(rook.stockfish(cfg.stockfish))
local policy = assert(rook.load(cfg.model, { device = cfg.device, threads = cfg.threads, engine = sf }))
local ref, opt, beta = policy:reference(), rook.adamw(policy, cfg.adamw), cfg.grpo.beta
rook.grpo.apply_plan(policy, cfg) -- micro-batches within the memory budget
local data, evalset, held_out = cur.sources(cfg)
local run = assert(rook.run{ dir = cfg.run_dir, resume = cfg.resume, policy = policy, ref = ref, opt = opt, data = data,
  steps = cfg.steps, save_every = cfg.save_every, keep = cfg.keep, best = "eval/reward_mean",
  samples = cfg.samples, print_sample_every = cfg.print_sample_every })
local rec, state = recovery.new(cfg.recovery, run), run:state() -- saved with every checkpoint
local function evaluate(step) return run:log(step, evalkit.run(policy, evalset, sf, { reward = cfg.reward }), "eval") end
state.before = state.before or evaluate(run.step)
while run.step < cfg.steps do -- run.step: the weights' step; a rollback sets it back
  local step = run.step + 1
  cfg.grpo.beta = sched.kl_warmup(step, beta, cfg.kl_warmup, cfg.kl_schedule)
  local batch, dm = dyn.fill(cfg, step, function() -- new prompts, sampled (fill sets the seed: seed · 1000003 + step)
    return policy:rollout(cur.next(data, cfg.prompts, cfg.env_fraction, { exclude = held_out }), cfg.rollout)
  end, function(b) rook.reward.chess(b, cfg.reward, sf) end) -- and scored; refilled with dynamic_sampling (DAPO)
  local m = run:log(step, dyn.note(rook.grpo.step(policy, ref, opt, batch, cfg.grpo), dm), batch) -- and samples.jsonl
  local action = rec:check(step, m, { run = run, opt = opt })
  if action == "stop" then run:stop(rec:report()) break end
  if action ~= "rollback" and (step == cfg.steps or cfg.eval_every > 0 and step % cfg.eval_every == 0) then
    state.after, state.after_step = evaluate(step), step
  end
  if action ~= "rollback" and run:save_due(step) then run:save(step) end -- and after Ctrl-C, which ends the run
end
return evalkit.report(state.before, state.after_step == run.step and state.after or evaluate(run.step))
