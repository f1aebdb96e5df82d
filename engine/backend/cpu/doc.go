// Package cpu is the host backend: the forward's products through the kernel of gemm_small.c
// (AVX-512, or AVX2 with FMA, or portable C: the same sums), which also adds a block's
// residual and applies GELU as it stores a product (MatMulAdd, MatMulGELU, rounding as the
// separate passes); the backward's GEMMs through OpenBLAS (cgo), whose kernel family the
// processor's features choose (blasfamily.go); the inner loops of GELU, AdamW, LayerNorm,
// log-softmax, attention and decode attention in C (kernels.c, decode_attention.c; AVX2 and
// AVX-512 paths with portable ones the tests hold them to bit for bit, on the processor's
// features as features.c reports them); the rest in Go.
// Every kernel is spread over a fixed pool of goroutines.
//
// Batch invariance (DESIGN §6.1): every operation of the forward computes each output element
// by a reduction whose order depends only on that element's own inputs — not on the number of
// rows, a row's place in the batch, a KV cache or the whole sequence, a prompt shared by a
// group or written out, the LM head's chunks, or the thread count. So a token's logprob is
// the same bits whether the sampler decodes it or a training or reference forward meets it in
// any packed batch:
//
//   - products: out[i][j] = bias[j] + Σ_k a[i][k]·w[j][k] with element k in lane k mod 16,
//     fused multiply-adds in k order, the sixteen lanes added by one fixed tree (lanes.h), at
//     every row count (MatMul, MatMulAdd, MatMulGELU; a decode step's, a prefill's, a training
//     batch's, an LM-head chunk's);
//   - attention: one kernel (rk_attention_decode) for a decoded row against its cache and for
//     every row of a packed forward against the packed keys: scores in the same lanes and
//     tree, the softmax's sum with position j in lane j mod 16, the values summed in position
//     order, per channel;
//   - LayerNorm, GELU, the softmax and log-softmax over the vocabulary: per row, in a fixed
//     order; the sampler's log-sum-exp and the forward's are one expression (lseOf).
//
// The backward needs no such property and runs OpenBLAS. On a processor without AVX-512 the
// products and attention run AVX2 kernels of the same lanes and tree (with the AVX2 product
// kernel alone, GPT-2 124M's forward takes longer than with the AVX-512 one on a processor
// with both), or portable C ones without AVX2 and FMA: every path gives the same bits, so a
// processor's sampler and forward are the AVX-512 ones. ROOKSCRIPT_CPU_CAPABILITY=avx2 runs that path on a processor with AVX-512
// (capability.go).
//
// Determinism: each parallel kernel splits its work into chunks whose boundaries depend only
// on the problem size (never on the number of threads or on timing), and reductions combine
// per-chunk partial results in chunk order. OpenBLAS partitions a GEMM over its output, not
// over the reduction dimension, so it too returns bit-identical results run after run for a
// given thread count.
//
// Buffers come from HostFloats, which marks a large one for transparent huge pages: the
// weights and activations stream through memory, and 4 KB pages slow a decode step of 8 rows,
// which waits on memory.
//
// Steady state allocates nothing: kernel arguments travel in job structs owned by the
// backend, and scratch space grows only when a larger problem than any before arrives.
// A backend serves one caller at a time; concurrent calls are serialised by a mutex.
package cpu
