// Package paritytest compares a backend under test with the CPU backend: every kernel on
// random inputs of awkward sizes, determinism, and whole-model steps (a forward/backward and
// GRPO-like update, KV-cache decoding). The CUDA emulator's tests run it in every build; the
// GPU's run it under -tags cuda, so both check the same things with the same tolerances.
//
// It lives under engine/internal rather than inside engine/backend because the whole-model
// steps use gpt2, grpo, optim and rollout, which import backend, not the other way round.
package paritytest
