// Package gpt2 is GPT-2 on a backend.Backend: the flat parameter layout, the forward and
// backward over a packed batch, KV-cache decoding, the memory a workload holds, and the
// loaders and savers (Hugging Face safetensors, llm.c .bin).
//
// # Shapes
//
// V vocabulary, T context (rows of the position embedding), L layers, NH heads, C channels,
// hd = C/NH the head size. A batch is packed: its n rows are the tokens of all its sequences
// laid end to end, no padding; r of them are scored. Parameters are one flat buffer in llm.c's
// order (Layout), matrices (out, in) row-major so that y = x·Wᵀ + b; gradients and AdamW's
// moments are flat buffers in the same order.
//
// # Forward
//
// For a row with token t at position p (its place in its sequence; for a continuation, after
// its prefix):
//
//	x₀ = wte[t] + wpe[p]                                   embeddings, (C)
//	for each layer l:
//	  a  = LN(x; g₁, b₁)                                   LN(x) = g ⊙ (x − μ)/√(σ² + ε) + b
//	  q, k, v = a·W_qkvᵀ + b_qkv                           (3C), heads of hd channels
//	  s_j = q_h·k_{h,j} / √hd   over the keys j the row sees   (causal; its prefix's rows first)
//	  y_h = Σ_j softmax(s)_j v_{h,j}
//	  x  = x + y·W_projᵀ + b_proj
//	  m  = LN(x; g₂, b₂)
//	  x  = x + GELU(m·W_fcᵀ + b_fc)·W_fcprojᵀ + b_fcproj   (4C hidden), GELU(u) = ½u(1 + tanh(√(2/π)(u + 0.044715u³)))
//	h = LN(x; g_f, b_f)
//
// The head is tied to the embedding: z = h·wteᵀ / τ at temperature τ, and a scored row with
// target y gives
//
//	lse = log Σ_k e^{z_k},   log p_y = z_y − lse,   H = −Σ_k p_k log p_k = lse − Σ_k p_k z_k.
//
// There is no dropout anywhere: training, scoring and sampling compute the same function.
// Attention keeps only each row's log-sum-exp per head; its backward recomputes the
// probabilities.
//
// # Backward
//
// Every loss the engine trains is L = Σ_r g_r·log p_{y_r} + Σ_r e_r·H_r over the scored rows:
// g_r = −1/N for mean cross-entropy, −A/|o| (times the ratio terms) for a GRPO token, e_r for
// an entropy bonus. With p = softmax(z),
//
//	∂L/∂z_k = g·(1[k = y] − p_k) − e·p_k·(log p_k + H),   ∂L/∂logits = ∂L/∂z / τ
//	∂L/∂h   = ∂L/∂logits · wte,   ∂L/∂wte += ∂L/∂logitsᵀ · h   (plus the embedding's own term)
//
// and the chain continues through the layers in reverse: for y = x·Wᵀ + b, dx = dy·W,
// dW += dyᵀ·x, db += Σ_rows dy; for LayerNorm with x̂ = (x − μ)·rstd,
// dx = rstd·(dŷ − mean(dŷ) − x̂·mean(dŷ ⊙ x̂)) with dŷ = g ⊙ dout, dg += Σ dout ⊙ x̂,
// db += Σ dout; GELU's derivative is the product rule through tanh; for attention with
// P = softmax(S), dV = Pᵀ·dY, dP = dY·Vᵀ, dS = P ⊙ (dP − rowsum(dY ⊙ Y)), dQ = dS·K/√hd,
// dK = dSᵀ·Q/√hd. Parameter gradients accumulate (+=); a step zeroes them first.
//
// # The LM head in chunks
//
// A batch's logits are r × V floats — 64 completions of 72 tokens over GPT-2's vocabulary are
// 0.9 GB — so they are never held at once. The head runs over the scored rows in equal chunks
// of at most HeadRows (HeadChunkBytes of logits): each chunk's logits are computed, reduced to lse,
// log p_y and H, and dropped. Backward recomputes a chunk's logits from the saved head input h
// and turns them into ∂L/∂logits in place, then into the chunk's share of ∂L/∂h and ∂L/∂wte.
// ForwardBackward fuses the two for losses whose g_r and e_r are known once log p and H are
// (the fused linear cross-entropy of Liger-Kernel; SFT's cross-entropy, GRPO's token-level
// loss): each chunk's gradient is taken while its logits are in memory, which saves the
// recomputation. Score is the forward without anything
// kept for a backward: every layer runs through one layer's buffers.
//
// # Shared prompts
//
// A sequence may continue another (Batch.AddContinuation): its rows attend to the prefix's
// rows, then causally to their own, at positions that continue the prefix's — the function of
// the prefix written in front of it — while the prefix is computed once. GRPO packs a
// group's prompt once and its G completions as continuations; the prefix's gradient is the
// sum over its continuations, as it would be over G copies.
//
// # Sampling
//
// Prefill runs prompts through the trunk, writing every layer's k and v into a KVCache slot,
// and returns the next-token distribution after each prompt; Decode feeds one token per row
// at its slot's next position, attending over the slot's cached positions. ShareSlot lets the
// samples of one prompt read the prompt's keys and values from the slot it was prefilled in,
// so a decode step reads them once per prompt rather than once per sample. Both compute
// exactly the training forward's function with the same sums: on a backend whose forward is
// batch-invariant (BatchInvariant; the CPU's), the log-probabilities a sampler records are
// the training forward's bit for bit, in whatever batch the forward meets them, and so the
// GRPO ratio before the first update is exactly 1 (DESIGN §6.1, §6.2).
//
// # Memory
//
// Footprint gives the bytes a model holds, by kind — weights, gradients, AdamW moments, the
// saved activations of a batch ((16C + 4 + NH) floats per row and layer, 3C + 5 more per row),
// the backward's scratch (14C per row), one chunk of head logits, the KV cache
// (2·L·slots·positions·C), the sampler's distribution — exactly what New, EnsureGrads,
// NewKVCache and the forwards allocate. Plan sizes micro-batches from a budget with it.
//
// # Files
//
// LoadHF reads config.json and model.safetensors, LoadLLMC an llm.c .bin; SaveHF and SaveLLMC
// write them. Nothing a file says is trusted before it is checked: each size is bounded
// (MaxVocabSize, MaxPositions, MaxLayers, MaxChannels), and every tensor's shape, or the .bin's
// byte count, must be what the config implies before a buffer of the config's size is
// allocated. Non-finite weights are refused by the loaders and the savers alike. SaveHF records
// ParamsHash of the config and weights in model.safetensors' metadata (HFHashKey), and LoadHF
// refuses a folder whose contents no longer hash to it; a folder without it (transformers',
// or any other writer's) loads unchecked.
package gpt2
