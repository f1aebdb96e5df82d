// Shared by the C kernels of this package, so that every path rounds alike: the fixed tree
// that sums sixteen float lanes, in AVX-512 and in portable C, and the exponential with its
// constants, scalar (exp1) and in eight and sixteen lanes (exp8, exp16: the same operations;
// the tests hold each to exp1 bit for bit).
#ifndef ROOKSCRIPT_LANES_H
#define ROOKSCRIPT_LANES_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

// Cephes' expf (kernels.c): exp(x) = 2^n · e^r, n = floor(x·log2 e + ½), r = x − n·ln 2 with
// ln 2 = C1 + C2 in two parts, e^r by a degree-6 polynomial; inputs clamped to [EXP_LO, EXP_HI].
#define EXP_LO -87.3f
#define EXP_HI 88.7f
#define LOG2E 1.44269504088896341f
#define C1 0.693359375f
#define C2 -2.12194440e-4f
#define P0 1.9875691500e-4f
#define P1 1.3981999507e-3f
#define P2 8.3334519073e-3f
#define P3 4.1665795894e-2f
#define P4 1.6666665459e-1f
#define P5 5.0000001201e-1f

// exp1: Cephes' expf. Range reduction by ln 2 in two parts, a degree-6 polynomial and scaling
// by 2^n through the exponent bits; about 1 ulp over [EXP_LO, EXP_HI]. Inputs are clamped to
// that range (callers only need x ≤ 0: softmax and tanh arguments); NaN stays NaN. Contraction
// is off for it, as in the files that call it: inlined into a function whose target has FMA,
// a multiply and an add would otherwise round once.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
static inline float pow2i(int32_t n) {
	int32_t b = (n + 127) << 23;
	float f;
	memcpy(&f, &b, 4);
	return f;
}

static inline float exp1(float x) {
	x = EXP_LO > x ? EXP_LO : x; // written so that NaN falls through, as max_ps(lo, x) does
	x = EXP_HI < x ? EXP_HI : x;
	float fl = floorf(x * LOG2E + 0.5f);
	int32_t n = (int32_t)fl;
	x = x - fl * C1;
	x = x - fl * C2;
	float z = x * x;
	float y = P0;
	y = y * x + P1;
	y = y * x + P2;
	y = y * x + P3;
	y = y * x + P4;
	y = y * x + P5;
	y = y * z + x + 1.0f;
	int32_t n1 = n >> 1;
	return y * pow2i(n1) * pow2i(n - n1);
}

// exp1 in eight lanes (AVX2) and in sixteen (AVX-512), operation for operation.
__attribute__((target("avx2"))) static inline __m256 exp8(__m256 x) {
	x = _mm256_max_ps(_mm256_set1_ps(EXP_LO), x);
	x = _mm256_min_ps(_mm256_set1_ps(EXP_HI), x);
	__m256 fl = _mm256_floor_ps(_mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(LOG2E)), _mm256_set1_ps(0.5f)));
	__m256i n = _mm256_cvttps_epi32(fl);
	x = _mm256_sub_ps(x, _mm256_mul_ps(fl, _mm256_set1_ps(C1)));
	x = _mm256_sub_ps(x, _mm256_mul_ps(fl, _mm256_set1_ps(C2)));
	__m256 z = _mm256_mul_ps(x, x);
	__m256 y = _mm256_set1_ps(P0);
	y = _mm256_add_ps(_mm256_mul_ps(y, x), _mm256_set1_ps(P1));
	y = _mm256_add_ps(_mm256_mul_ps(y, x), _mm256_set1_ps(P2));
	y = _mm256_add_ps(_mm256_mul_ps(y, x), _mm256_set1_ps(P3));
	y = _mm256_add_ps(_mm256_mul_ps(y, x), _mm256_set1_ps(P4));
	y = _mm256_add_ps(_mm256_mul_ps(y, x), _mm256_set1_ps(P5));
	y = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(y, z), x), _mm256_set1_ps(1.0f));
	__m256i n1 = _mm256_srai_epi32(n, 1), n2 = _mm256_sub_epi32(n, n1);
	__m256i bias = _mm256_set1_epi32(127);
	__m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
	__m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
	return _mm256_mul_ps(_mm256_mul_ps(y, s1), s2);
}

__attribute__((target("avx512f,avx512dq"))) static inline __m512 exp16(__m512 x) {
	x = _mm512_max_ps(_mm512_set1_ps(EXP_LO), x);
	x = _mm512_min_ps(_mm512_set1_ps(EXP_HI), x);
	__m512 fl = _mm512_roundscale_ps(_mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(LOG2E)), _mm512_set1_ps(0.5f)),
	                                 _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
	__m512i n = _mm512_cvttps_epi32(fl);
	x = _mm512_sub_ps(x, _mm512_mul_ps(fl, _mm512_set1_ps(C1)));
	x = _mm512_sub_ps(x, _mm512_mul_ps(fl, _mm512_set1_ps(C2)));
	__m512 z = _mm512_mul_ps(x, x);
	__m512 y = _mm512_set1_ps(P0);
	y = _mm512_add_ps(_mm512_mul_ps(y, x), _mm512_set1_ps(P1));
	y = _mm512_add_ps(_mm512_mul_ps(y, x), _mm512_set1_ps(P2));
	y = _mm512_add_ps(_mm512_mul_ps(y, x), _mm512_set1_ps(P3));
	y = _mm512_add_ps(_mm512_mul_ps(y, x), _mm512_set1_ps(P4));
	y = _mm512_add_ps(_mm512_mul_ps(y, x), _mm512_set1_ps(P5));
	y = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(y, z), x), _mm512_set1_ps(1.0f));
	__m512i n1 = _mm512_srai_epi32(n, 1), n2 = _mm512_sub_epi32(n, n1);
	__m512i bias = _mm512_set1_epi32(127);
	__m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
	__m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
	return _mm512_mul_ps(_mm512_mul_ps(y, s1), s2);
}
#pragma GCC pop_options

// The lane tree of sixteen partial sums l: halves h[e] = l[e] + l[e+8], quarters
// q[e] = h[e] + h[e+4], then (q0 + q2) + (q1 + q3).
static inline float tree16_ref(const float l[16]) {
	float h[8], q[4];
	for (int e = 0; e < 8; e++) h[e] = l[e] + l[e + 8];
	for (int e = 0; e < 4; e++) q[e] = h[e] + h[e + 4];
	return (q[0] + q[2]) + (q[1] + q[3]);
}

// tree16_ref of sixteen lanes held as two halves of eight (the AVX2 paths: lane e in lo for
// e < 8, in hi for the rest).
__attribute__((target("avx2"))) static inline float tree8x2(__m256 lo, __m256 hi) {
	__m256 h = _mm256_add_ps(lo, hi);                                              // h[e] = l[e] + l[e+8]
	__m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)); // q[e] = h[e] + h[e+4]
	__m128 c = _mm_add_ps(q, _mm_movehl_ps(q, q));                                 // q0 + q2, q1 + q3
	return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));                   // (q0 + q2) + (q1 + q3)
}

// tree16_ref of one vector's lanes.
__attribute__((target("avx512f,avx512dq"))) static inline float tree16(__m512 v) {
	__m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
	__m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
	__m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
	return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
}

// tree16 of four vectors at once: lane i of the result is tree16 of the i-th. Each step adds
// the same pairs of lanes as tree16, two or four vectors to a register: 14 instructions for
// the four sums instead of 32.
__attribute__((target("avx512f,avx512dq"))) static inline __m128 tree16x4(__m512 a, __m512 b, __m512 c, __m512 d) {
	// [a0..7 + a8..15 | b0..7 + b8..15], the same for c and d.
	__m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
	                          _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
	__m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(1, 0, 1, 0)),
	                          _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(3, 2, 3, 2)));
	// Each 128-bit lane: q[e] = h[e] + h[e+4] of one vector, a b c d in that order.
	__m512 q = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(2, 0, 2, 0)),
	                         _mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(3, 1, 3, 1)));
	// (q0 + q2) + (q1 + q3) in element 0 of each 128-bit lane.
	__m512 x = _mm512_add_ps(q, _mm512_permute_ps(q, _MM_SHUFFLE(1, 0, 3, 2)));
	__m512 y = _mm512_add_ps(x, _mm512_permute_ps(x, _MM_SHUFFLE(2, 3, 0, 1)));
	return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), y));
}

#endif
