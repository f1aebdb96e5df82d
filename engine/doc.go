// Package engine holds every numeric and domain component of rookscript; it never
// imports Lua. Its sub-packages:
//
//	backend     the small interface of kernels a device implements, with Buf/I32 memory views
//	backend/cpu the CPU device: Go loops on goroutines plus OpenBLAS SGEMM through cgo
//	gpt2        the model: parameter layout, packed-batch forward/backward, KV-cache decode, loaders
//	tokenizer   GPT-2 byte-pair encoding (r50k_base), offline
//	chess       RookWorld task formats, rewards, the Stockfish pool, evaluation metrics, data
package engine
