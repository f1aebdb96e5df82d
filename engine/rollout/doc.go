// Package rollout samples groups of completions from a gpt2.Model with its KV cache.
//
// For P prompts and group size G, each prompt is prefilled once and its cache copied to its
// G slots; then one batched decode step per new token serves every unfinished completion,
// and completions that emit <|endoftext|> or reach the token limit leave the batch. Where the
// backend runs a repeated step as a graph (a GPU), finished completions ride along, their
// draws dropped (Stats.RiderTokens), until half the batch has finished: the steps between keep
// the batch's rows and repeat, and a row's results do not depend on its neighbours.
//
// A completion also ends at a stop (Config.Stop, Config.StopRule): a stop string in its text,
// or the RookWorld rule, which reads each prompt's task from its text and ends a P: answer
// after "B:" and a complete UCI move, an A: answer after its fourth '+', as RookWorld-LM's
// model card stops generation. Such a completion is finished, not truncated: its tokens and
// logprobs end at the token that completed the stop (the whole token, when a stop string ends
// inside it), no <|endoftext|> is appended, and training scores exactly those tokens. Each new
// token's text is matched once, incrementally, never the whole completion again.
//
// The log-probability of every sampled token is recorded at sampling time under
// softmax(logits / temperature) — the full distribution, before top-k/top-p shaping, which
// only decides what is sampled. Those are the logprobs GRPO's ratio is taken against: on a
// batch-invariant backend (the CPU's) they are the training forward's bit for bit, in
// whatever batch the forward meets the tokens, so the ratio before the first update is
// exactly 1 (DESIGN §6.1, §6.2).
//
// Randomness: the uniform a token is drawn with is Philox4x32-10's (package philox) for the
// call's seed, the completion's stream and the token's position in the completion. A
// completion's stream derives from the prompt's tokens, its occurrence among identical
// prompts and j, so the same seed gives the same tokens however the prompts are batched, and
// a device that samples computes the same uniforms where it samples, with no state to carry.
// On such a backend (gpt2.DeviceSampler), unless top-k or top-p shape the draw, each step's
// draws run on the device with this package's arithmetic (Draw, DrawChunk), and only their
// tokens and logprobs reach the host.
package rollout
