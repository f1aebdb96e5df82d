// Package grpo is the GRPO update: advantages from grouped rewards, the clipped
// policy-gradient loss against the logprobs recorded at sampling time, an optional KL
// penalty to a frozen reference model and entropy bonus, loss aggregation, and the optimizer
// step with gradient clipping and non-finite protection.
//
// The math (DESIGN §5). For prompt q with completions o_1..o_G and rewards r_i:
//
//	A_i   = (r_i − mean(r)) / (std(r) + eps)        scale "group" (per prompt), "batch", or "none" (r_i − mean(r) only: Dr. GRPO)
//	ρ_t   = exp(logp_θ(t) − logp_old(t))            token ratio; "sequence" level (GSPO): exp(mean_t(logp_θ − logp_old))
//	L_t   = −min(ρ_t A, clip(ρ_t, 1−ε_low, 1+ε_high) A) + β·KL_t − c_H·H_t
//	KL_t  = k1: x − x_ref,  k2: ½(x − x_ref)²,  k3: e^{x_ref − x} − (x_ref − x) − 1   (x = logp_θ(t))
//
// and the loss is aggregated as "grpo" (mean over each sequence's tokens, then over sequences),
// "dapo" (sum over all tokens / number of tokens) or "dr_grpo" (sum / (sequences ×
// max_new_tokens)). std is the population standard deviation (divide by G).
//
// Every log-probability is of softmax(logits / T) with the rollout's temperature T, and
// logp_old is what the sampler recorded: never recomputed, never re-read from elsewhere.
//
// The gradient of L with respect to each token's logp (and entropy) is formed here on the
// host and handed to gpt2.Model.Backward; normalisers are fixed per minibatch before its
// micro-batches run, so splitting a minibatch for memory does not change the gradient.
package grpo
