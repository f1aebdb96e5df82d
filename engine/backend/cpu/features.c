// The processor's vector features and the switches that hold the kernels below them. Every
// C file of this package that picks a path asks here, and this file asks no other, so the
// files depend on one another in one direction only: kernels.c, gemm_small.c and
// decode_attention.c on this one, and the Go code on all of them.
#include "kernels.h"

static int cpu_avx2 = -1;      // what the processor supports, detected once
static int cpu_avx512 = -1;    // likewise
static int avx2_enabled = 1;   // tests switch the vector paths off
static int avx512_enabled = 1; // tests switch the sixteen-lane paths off, leaving AVX2's

int rk_has_avx2(void) {
	if (cpu_avx2 < 0) {
		__builtin_cpu_init();
		cpu_avx2 = __builtin_cpu_supports("avx2") != 0;
	}
	return cpu_avx2 && avx2_enabled;
}

void rk_set_avx2(int on) { avx2_enabled = on; }

int rk_has_avx512(void) {
	if (cpu_avx512 < 0) {
		__builtin_cpu_init();
		cpu_avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
	}
	return cpu_avx512;
}

void rk_set_avx512(int on) { avx512_enabled = on; }

// kernels.c's sixteen-lane paths: the loops a decode step or a GRPO update runs over whole
// activations (GELU, the sampler's softmax, log-probabilities), the same operations as the
// AVX2 ones, element for element and sum lane for sum lane.
int rk_avx512_on(void) { return rk_has_avx2() && avx512_enabled && rk_has_avx512(); }

int rk_has_avx2_fma(void) {
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

int rk_cpu_features(void) {
	__builtin_cpu_init();
	int f = 0;
	if (__builtin_cpu_supports("avx2")) f |= RK_AVX2;
	if (__builtin_cpu_supports("fma")) f |= RK_FMA;
	if (__builtin_cpu_supports("avx512f")) f |= RK_AVX512F;
	if (__builtin_cpu_supports("avx512bw")) f |= RK_AVX512BW;
	if (__builtin_cpu_supports("avx512dq")) f |= RK_AVX512DQ;
	if (__builtin_cpu_supports("avx512vl")) f |= RK_AVX512VL;
	if (__builtin_cpu_supports("avx512bf16")) f |= RK_AVX512BF16;
	return f;
}
