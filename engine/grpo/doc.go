// Package grpo is the GRPO update: advantages from grouped rewards, the clipped
// policy-gradient loss against the logprobs recorded at sampling time, an optional KL
// penalty to a frozen reference model and entropy bonus, loss aggregation, and the optimizer
// updates with gradient clipping and non-finite protection.
//
// The math (DESIGN §5). For prompt q with completions o_1..o_G and rewards r_i:
//
//	A_i   = (r_i − mean(r)) / (std(r) + std_eps)    scale_rewards "group", "batch" (the batch's std) or "none" (Dr. GRPO)
//	ρ_t   = exp(logp_θ(t) − logp_old(t))            importance_sampling_level "token"; "sequence" (GSPO): exp(mean_t(logp_θ − logp_old))
//	L_t   = −min(ρ_t A, clip(ρ_t, 1−ε, 1+ε_high) A) + β·KL_t − c_H·H_t
//	KL_t  = k1: x − x_ref,  k2: ½(x − x_ref)²,  k3: e^{x_ref − x} − (x_ref − x) − 1   (x = logp_θ(t))
//
// aggregated by loss_type: "grpo" (mean over each sequence's tokens, then over sequences),
// "dapo" and "bnpo" (sum over tokens / unmasked tokens) or "dr_grpo" (sum /
// (sequences × max_new_tokens)). A group whose rewards do not vary (std ≤ max(1e-6,
// 1e-8·max|r|); TRL's torch.isclose(std, 0), std ≤ 1e-8, with trl_compat) has advantages of
// exactly 0.
//
// Settings carry TRL's names (Config's json tags) and its semantics where TRL has them; the
// conventions where this project and TRL differ are options, and TRLConfig selects TRL's:
//
//	                                   this project (DefaultConfig)     TRL v1.9.0 (TRLConfig)
//	std of the advantages (std_ddof)   0: population, divide by G       1: unbiased, as torch.std
//	entropy term (entropy_aggregation) weighted like the loss ("loss")  token mean ("token_mean")
//	masked completions                 out of the sequence counts       kept in them (masked_in_denominator)
//	  (drop_zero_std, mask_truncated_completions; token counts never count them)
//	zero-variance group                std ≤ max(1e-6, 1e-8·max|r|)     std ≤ 1e-8 (trl_compat)
//	loss_type                          "grpo"                           "dapo"
//
// testdata/gen_trl_fixture.py transcribes TRL's loss in PyTorch; TestTRLParity holds this
// package to it within 1e-6 for every variant, TestTRLZeroStd to its zero-std rule.
//
// Every log-probability is of softmax(logits / T) with the rollout's temperature T, and
// logp_old is what the sampler recorded: never recomputed, never re-read from elsewhere.
// Top-k, top-p and greedy sampling change what is drawn, not what is recorded (as in TRL):
// the batch's shaping is reported in the metrics, a shaped batch draws a warning, and a
// greedy one is refused unless allow_greedy.
//
// The gradient of L with respect to each token's logp (and entropy) is formed here on the
// host, chunk by chunk of LM-head rows as gpt2.Model.ForwardBackward computes them (a
// token's terms depend on its own logp and entropy alone, so its head gradient is taken
// while its logits are in memory); GSPO's sequence-level ratio needs a whole sequence's
// logps first and goes through Forward, then Backward. Normalisers are fixed per minibatch
// before its micro-batches run, so splitting a minibatch for memory does not change the
// gradient. The
// learning rate is the optimizer's (optim.AdamW.LR): a step only applies updates.
//
// Step is a composition of primitives a recipe can call itself (pass.go): advantages set on
// the batch, ForwardBackward (one minibatch's pass, accumulating its gradient) with a built-in
// loss — the GRPO family above, or Tinker's importance_sampling, ppo, cispo, dro and
// cross_entropy (tinker.go) — or a SequenceLoss computed outside the engine, OptimStep, and
// Score under any model. Composed as Step composes them they give its weights bit for bit.
package grpo
