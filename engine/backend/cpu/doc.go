// Package cpu is the host backend: GEMMs through OpenBLAS (cgo), or, for products of up to
// ntMaxRows rows on AVX-512 (a decode step, an LM-head chunk), through the packing-free kernel
// of gemm_small.c, which also adds a block's residual and applies GELU as it stores a product
// (MatMulAdd, MatMulGELU, rounding as the separate passes); the inner loops of GELU, AdamW,
// log-softmax, attention and decode attention in C (kernels.c, decode_attention.c; AVX2 and
// AVX-512 paths with portable ones the tests hold them to bit for bit); the rest in Go. Every
// kernel is spread over a fixed pool of goroutines.
//
// Determinism: each parallel kernel splits its work into chunks whose boundaries depend only
// on the problem size (never on the number of threads or on timing), and reductions combine
// per-chunk partial results in chunk order. OpenBLAS partitions a GEMM over its output, not
// over the reduction dimension, so it too returns bit-identical results run after run for a
// given thread count.
//
// Steady state allocates nothing: kernel arguments travel in job structs owned by the
// backend, and scratch space grows only when a larger problem than any before arrives.
// A backend serves one caller at a time; concurrent calls are serialised by a mutex.
package cpu
