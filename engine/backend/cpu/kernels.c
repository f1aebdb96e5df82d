// Vectorised inner loops of the CPU backend. Go compiles float loops to scalar code, so the
// loops that touch every parameter (AdamW), every logit (log-softmax over the vocabulary) or
// every MLP activation (GELU) live here, with an AVX2 path and a portable scalar path chosen
// once at start-up, and for the hottest of them (GELU, the softmax and log-probability sums
// over the vocabulary) a sixteen-lane AVX-512 path. Go still decides the work split: each
// function handles one chunk.
//
// The paths perform the same float operations in the same order (no fused multiply-add, the
// same lane structure for sums), so they return bit-identical results and a run reproduces
// on any x86-64 machine. Contraction is off (the pragma below): in a function whose
// target has FMA the compiler would otherwise fuse a multiply and an add into one rounding.
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include "lanes.h"

#pragma GCC optimize("fp-contract=off")

// The paths this file runs (features.c): AVX2, and sixteen lanes (AVX-512) for the loops
// that have them.
static inline int avx2(void) { return rk_has_avx2(); }
static inline int avx512(void) { return rk_avx512_on(); }

// GELU, tanh approximation: ½x(1 + tanh u), u = √(2/π)(x + 0.044715x³), with
// tanh u = sign(u)(1 − e)/(1 + e), e = exp(−2|u|).
#define GELU_K 0.7978845608028654f
#define GELU_A 0.044715f

static inline float gelu_u(float v) { return GELU_K * (v + GELU_A * v * v * v); }

__attribute__((target("avx2"))) static inline __m256 gelu_u8(__m256 v) {
	__m256 c = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(GELU_A), v), v), v);
	return _mm256_mul_ps(_mm256_set1_ps(GELU_K), _mm256_add_ps(v, c));
}

__attribute__((target("avx2"))) static void gelu_avx2(float *out, const float *x, long n, long *done) {
	const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
	long i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_loadu_ps(x + i);
		__m256 u = gelu_u8(v);
		__m256 e = exp8(_mm256_mul_ps(_mm256_set1_ps(-2.0f), _mm256_andnot_ps(sign, u)));
		__m256 t = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
		t = _mm256_or_ps(t, _mm256_and_ps(sign, u));
		_mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, t)));
	}
	*done = i;
}

__attribute__((target("avx512f,avx512dq"))) static inline __m512 gelu_u16(__m512 v) {
	__m512 c = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(GELU_A), v), v), v);
	return _mm512_mul_ps(_mm512_set1_ps(GELU_K), _mm512_add_ps(v, c));
}

__attribute__((target("avx512f,avx512dq"))) static void gelu_avx512(float *out, const float *x, long n, long *done) {
	const __m512 sign = _mm512_set1_ps(-0.0f), one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
	long i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512 v = _mm512_loadu_ps(x + i);
		__m512 u = gelu_u16(v);
		__m512 e = exp16(_mm512_mul_ps(_mm512_set1_ps(-2.0f), _mm512_andnot_ps(sign, u)));
		__m512 t = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
		t = _mm512_or_ps(t, _mm512_and_ps(sign, u));
		_mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(one, t)));
	}
	*done = i;
}

// The widest vector path runs whole vectors, the scalar loop the rest (elementwise, so any
// split rounds alike).
void rk_gelu(float *out, const float *x, long n) {
	long i = 0;
	if (avx512())
		gelu_avx512(out, x, n, &i);
	else if (avx2())
		gelu_avx2(out, x, n, &i);
	for (; i < n; i++) {
		float v = x[i], u = gelu_u(v);
		float e = exp1(-2.0f * fabsf(u));
		float t = copysignf((1.0f - e) / (1.0f + e), u);
		out[i] = 0.5f * v * (1.0f + t);
	}
}

void rk_gelu_rows(float *out, const float *x, long m, long cols, long ld) {
	for (long i = 0; i < m; i++) rk_gelu(out + i * ld, x + i * ld, cols);
}

__attribute__((target("avx2"))) static void gelu_backward_avx2(float *dinp, const float *x, const float *dout, long n, long *done) {
	const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
	long i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_loadu_ps(x + i);
		__m256 v2 = _mm256_mul_ps(v, v);
		__m256 u = gelu_u8(v);
		__m256 e = exp8(_mm256_mul_ps(_mm256_set1_ps(-2.0f), _mm256_andnot_ps(sign, u)));
		__m256 d = _mm256_div_ps(one, _mm256_add_ps(one, e));
		__m256 t = _mm256_or_ps(_mm256_mul_ps(_mm256_sub_ps(one, e), d), _mm256_and_ps(sign, u));
		__m256 sech2 = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(4.0f), e), d), d);
		__m256 a = _mm256_mul_ps(half, _mm256_add_ps(one, t));
		__m256 poly = _mm256_add_ps(one, _mm256_mul_ps(_mm256_set1_ps(3.0f * GELU_A), v2));
		__m256 b = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(half, v), sech2), _mm256_set1_ps(GELU_K)), poly);
		_mm256_storeu_ps(dinp + i, _mm256_mul_ps(_mm256_loadu_ps(dout + i), _mm256_add_ps(a, b)));
	}
	*done = i;
}

__attribute__((target("avx512f,avx512dq"))) static void gelu_backward_avx512(float *dinp, const float *x, const float *dout, long n,
                                                                             long *done) {
	const __m512 sign = _mm512_set1_ps(-0.0f), one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
	long i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512 v = _mm512_loadu_ps(x + i);
		__m512 v2 = _mm512_mul_ps(v, v);
		__m512 u = gelu_u16(v);
		__m512 e = exp16(_mm512_mul_ps(_mm512_set1_ps(-2.0f), _mm512_andnot_ps(sign, u)));
		__m512 d = _mm512_div_ps(one, _mm512_add_ps(one, e));
		__m512 t = _mm512_or_ps(_mm512_mul_ps(_mm512_sub_ps(one, e), d), _mm512_and_ps(sign, u));
		__m512 sech2 = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(4.0f), e), d), d);
		__m512 a = _mm512_mul_ps(half, _mm512_add_ps(one, t));
		__m512 poly = _mm512_add_ps(one, _mm512_mul_ps(_mm512_set1_ps(3.0f * GELU_A), v2));
		__m512 b = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(half, v), sech2), _mm512_set1_ps(GELU_K)), poly);
		_mm512_storeu_ps(dinp + i, _mm512_mul_ps(_mm512_loadu_ps(dout + i), _mm512_add_ps(a, b)));
	}
	*done = i;
}

void rk_gelu_backward(float *dinp, const float *x, const float *dout, long n) {
	long i = 0;
	if (avx512())
		gelu_backward_avx512(dinp, x, dout, n, &i);
	else if (avx2())
		gelu_backward_avx2(dinp, x, dout, n, &i);
	for (; i < n; i++) {
		float v = x[i], v2 = v * v, u = gelu_u(v);
		float e = exp1(-2.0f * fabsf(u));
		float d = 1.0f / (1.0f + e);
		float t = copysignf((1.0f - e) * d, u);
		float sech2 = 4.0f * e * d * d; // 1 − tanh², without the cancellation near |t| = 1
		float a = 0.5f * (1.0f + t);
		float b = 0.5f * v * sech2 * GELU_K * (1.0f + 3.0f * GELU_A * v2);
		dinp[i] = dout[i] * (a + b);
	}
}

__attribute__((target("avx2"))) static void adamw_avx2(float *p, const float *g, float *m, float *v, long n, float b1, float b2,
                                                      float eps, float decay, float step, float isb, long *done) {
	const __m256 B1 = _mm256_set1_ps(b1), B2 = _mm256_set1_ps(b2), C1_ = _mm256_set1_ps(1.0f - b1),
	             C2_ = _mm256_set1_ps(1.0f - b2), E = _mm256_set1_ps(eps), D = _mm256_set1_ps(decay),
	             S = _mm256_set1_ps(step), I = _mm256_set1_ps(isb);
	long i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 gi = _mm256_loadu_ps(g + i);
		__m256 mi = _mm256_add_ps(_mm256_mul_ps(B1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(C1_, gi));
		__m256 vi = _mm256_add_ps(_mm256_mul_ps(B2, _mm256_loadu_ps(v + i)), _mm256_mul_ps(_mm256_mul_ps(C2_, gi), gi));
		_mm256_storeu_ps(m + i, mi);
		_mm256_storeu_ps(v + i, vi);
		__m256 den = _mm256_add_ps(_mm256_mul_ps(_mm256_sqrt_ps(vi), I), E);
		__m256 pi = _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(p + i), D), _mm256_div_ps(_mm256_mul_ps(S, mi), den));
		_mm256_storeu_ps(p + i, pi);
	}
	*done = i;
}

void rk_adamw(float *p, const float *g, float *m, float *v, long n, float b1, float b2, float eps,
              float decay, float step, float inv_sqrt_bc2) {
	long i = 0;
	if (avx2()) adamw_avx2(p, g, m, v, n, b1, b2, eps, decay, step, inv_sqrt_bc2, &i);
	for (; i < n; i++) {
		float gi = g[i];
		float mi = b1 * m[i] + (1.0f - b1) * gi;
		float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
		m[i] = mi;
		v[i] = vi;
		p[i] = p[i] * decay - step * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
	}
}

// Max is exact, so its order never matters; NaN must win so that it propagates.
static inline float max_nan(float a, float b) { return b > a || b != b ? b : a; }

// Eight running maxima and a mask of the lanes that met a NaN.
__attribute__((target("avx2"))) static float max_scaled_avx2(const float *x, long n, float scale, long *done) {
	const __m256 S = _mm256_set1_ps(scale);
	__m256 m = _mm256_set1_ps(-INFINITY), nan = _mm256_setzero_ps();
	long i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), S);
		m = _mm256_max_ps(m, v);
		nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
	}
	float l[8];
	_mm256_storeu_ps(l, m);
	float r = l[0];
	for (int j = 1; j < 8; j++) r = max_nan(r, l[j]);
	*done = i;
	return _mm256_movemask_ps(nan) ? NAN : r;
}

// Sixteen running maxima; max is exact, so the lanes change no result.
__attribute__((target("avx512f,avx512dq"))) static float max_scaled_avx512(const float *x, long n, float scale, long *done) {
	const __m512 S = _mm512_set1_ps(scale);
	__m512 m = _mm512_set1_ps(-INFINITY);
	__mmask16 nan = 0;
	long i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + i), S);
		m = _mm512_max_ps(m, v);
		nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
	}
	*done = i;
	return nan ? NAN : _mm512_reduce_max_ps(m);
}

float rk_max_scaled(const float *x, long n, float scale) {
	float m = x[0] * scale;
	long i = 1;
	if (avx512() && n >= 16) {
		m = max_scaled_avx512(x, n, scale, &i);
		if (m != m) return m;
	} else if (avx2() && n >= 16) {
		m = max_scaled_avx2(x, n, scale, &i);
		if (m != m) return m;
	}
	for (; i < n; i++) m = max_nan(m, x[i] * scale);
	return m;
}

// lo, hi += v's eight floats widened to double (lanes 0-3 in lo, 4-7 in hi): one step of the
// float64 lane sums below.
__attribute__((target("avx2"), always_inline)) static inline void add8d(__m256d *lo, __m256d *hi, __m256 v) {
	*lo = _mm256_add_pd(*lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
	*hi = _mm256_add_pd(*hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

// Sums over a row: eight float64 lanes, element i in lane i mod 8 (the tail in lane 0),
// lanes added in order. Both paths follow this structure exactly.
__attribute__((target("avx2"))) static void exp_sums_avx2(const float *x, long n, float scale, float m, double *lanes_s,
                                                         double *lanes_t, long *done) {
	__m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd(), t0 = _mm256_setzero_pd(), t1 = _mm256_setzero_pd();
	const __m256 S = _mm256_set1_ps(scale), M = _mm256_set1_ps(m);
	long i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 z = _mm256_mul_ps(_mm256_loadu_ps(x + i), S);
		__m256 e = exp8(_mm256_sub_ps(z, M));
		__m256 ez = _mm256_mul_ps(e, z);
		add8d(&s0, &s1, e);
		add8d(&t0, &t1, ez);
	}
	_mm256_storeu_pd(lanes_s, s0);
	_mm256_storeu_pd(lanes_s + 4, s1);
	_mm256_storeu_pd(lanes_t, t0);
	_mm256_storeu_pd(lanes_t + 4, t1);
	*done = i;
}

// The same eight float64 lanes from sixteen floats a step: the low eight elements, then the
// high eight, are the AVX2 path's two steps. A last group of eight (masked) is its last step.
__attribute__((target("avx512f,avx512dq"))) static void exp_sums_avx512(const float *x, long n, float scale, float m,
                                                                          double *lanes_s, double *lanes_t, long *done) {
	__m512d s = _mm512_setzero_pd(), t = _mm512_setzero_pd();
	const __m512 S = _mm512_set1_ps(scale), M = _mm512_set1_ps(m);
	long i = 0;
	for (; i + 8 <= n; i += 16) {
		__mmask16 k = i + 16 <= n ? 0xffff : 0xff;
		__m512 z = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), S);
		__m512 e = exp16(_mm512_sub_ps(z, M));
		__m512 ez = _mm512_mul_ps(e, z);
		s = _mm512_add_pd(s, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
		t = _mm512_add_pd(t, _mm512_cvtps_pd(_mm512_castps512_ps256(ez)));
		if (k == 0xff) break;
		s = _mm512_add_pd(s, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
		t = _mm512_add_pd(t, _mm512_cvtps_pd(_mm512_extractf32x8_ps(ez, 1)));
	}
	_mm512_storeu_pd(lanes_s, s);
	_mm512_storeu_pd(lanes_t, t);
	*done = n - n % 8;
}

void rk_exp_sums(const float *x, long n, float scale, float m, double *s_out, double *t_out) {
	double s[8] = {0}, t[8] = {0};
	long i = 0;
	if (avx512()) {
		exp_sums_avx512(x, n, scale, m, s, t, &i);
	} else if (avx2()) {
		exp_sums_avx2(x, n, scale, m, s, t, &i);
	} else {
		for (; i + 8 <= n; i += 8)
			for (int j = 0; j < 8; j++) {
				float z = x[i + j] * scale;
				float e = exp1(z - m);
				s[j] += (double)e;
				t[j] += (double)(e * z);
			}
	}
	for (; i < n; i++) {
		float z = x[i] * scale;
		float e = exp1(z - m);
		s[0] += (double)e;
		t[0] += (double)(e * z);
	}
	double ss = 0, tt = 0;
	for (int j = 0; j < 8; j++) {
		ss += s[j];
		tt += t[j];
	}
	*s_out = ss;
	*t_out = tt;
}

__attribute__((target("avx2"))) static void logprob_backward_avx2(float *x, long n, float scale, float lse, float glogp, float gent,
                                                                 float h, long *done) {
	const __m256 S = _mm256_set1_ps(scale), L = _mm256_set1_ps(lse), G = _mm256_set1_ps(-glogp),
	             GE = _mm256_set1_ps(gent), H = _mm256_set1_ps(h);
	long i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 lp = _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), S), L);
		__m256 p = exp8(lp);
		__m256 d = _mm256_sub_ps(_mm256_mul_ps(G, p), _mm256_mul_ps(_mm256_mul_ps(GE, p), _mm256_add_ps(lp, H)));
		_mm256_storeu_ps(x + i, _mm256_mul_ps(d, S));
	}
	*done = i;
}

void rk_logprob_backward(float *x, long n, float scale, float lse, float glogp, float gent, float h) {
	long i = 0;
	if (avx2()) logprob_backward_avx2(x, n, scale, lse, glogp, gent, h, &i);
	for (; i < n; i++) {
		float lp = x[i] * scale - lse;
		float p = exp1(lp);
		float d = -glogp * p - gent * p * (lp + h);
		x[i] = d * scale;
	}
}

__attribute__((target("avx2"))) static void exp_store_avx2(float *out, const float *x, long n, float scale, float m,
                                                          double *lanes, long *done) {
	__m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
	const __m256 S = _mm256_set1_ps(scale), M = _mm256_set1_ps(m);
	long i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 e = exp8(_mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), S), M));
		_mm256_storeu_ps(out + i, e);
		add8d(&s0, &s1, e);
	}
	_mm256_storeu_pd(lanes, s0);
	_mm256_storeu_pd(lanes + 4, s1);
	*done = i;
}

// exp_sums_avx512's lanes, storing each exponential.
__attribute__((target("avx512f,avx512dq"))) static void exp_store_avx512(float *out, const float *x, long n, float scale, float m,
                                                                           double *lanes, long *done) {
	__m512d s = _mm512_setzero_pd();
	const __m512 S = _mm512_set1_ps(scale), M = _mm512_set1_ps(m);
	long i = 0;
	for (; i + 8 <= n; i += 16) {
		__mmask16 k = i + 16 <= n ? 0xffff : 0xff;
		__m512 e = exp16(_mm512_sub_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), S), M));
		_mm512_mask_storeu_ps(out + i, k, e);
		s = _mm512_add_pd(s, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
		if (k == 0xff) break;
		s = _mm512_add_pd(s, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
	}
	_mm512_storeu_pd(lanes, s);
	*done = n - n % 8;
}

__attribute__((target("avx512f,avx512dq"))) static void scale_avx512(float *x, long n, float s, long *done) {
	const __m512 S = _mm512_set1_ps(s);
	long i = 0;
	for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), S));
	*done = i;
}

__attribute__((target("avx2"))) static void scale_avx2(float *x, long n, float s, long *done) {
	const __m256 S = _mm256_set1_ps(s);
	long i = 0;
	for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), S));
	*done = i;
}

float rk_softmax(float *out, const float *x, long n, float scale, double *sum_out) {
	float m = rk_max_scaled(x, n, scale);
	double s[8] = {0};
	long i = 0;
	if (avx512()) {
		exp_store_avx512(out, x, n, scale, m, s, &i);
	} else if (avx2()) {
		exp_store_avx2(out, x, n, scale, m, s, &i);
	} else {
		for (; i + 8 <= n; i += 8)
			for (int j = 0; j < 8; j++) {
				out[i + j] = exp1(x[i + j] * scale - m);
				s[j] += (double)out[i + j];
			}
	}
	for (; i < n; i++) {
		out[i] = exp1(x[i] * scale - m);
		s[0] += (double)out[i];
	}
	double sum = 0;
	for (int j = 0; j < 8; j++) sum += s[j];
	float inv = (float)(1.0 / sum);
	i = 0;
	if (avx512())
		scale_avx512(out, n, inv, &i);
	else if (avx2())
		scale_avx2(out, n, inv, &i);
	for (; i < n; i++) out[i] *= inv;
	*sum_out = sum;
	return m;
}

// Decode attention of one query row over its cache slot, all heads: for head h, scores
// s_j = scale·q_h·k_{j,h} over positions j < n, p = softmax(s), out_h = Σ_j p_j v_{j,h}.
// k and v point at position 0 of the slot with row stride ld; scratch holds n floats.
__attribute__((target("avx2"))) static float dot_avx2(const float *a, const float *b, long n, long *done) {
	__m256 acc = _mm256_setzero_ps();
	long i = 0;
	for (; i + 8 <= n; i += 8) acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
	float lanes[8];
	_mm256_storeu_ps(lanes, acc);
	*done = i;
	return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

// dot: eight lanes (element i in lane i mod 8), reduced pairwise, then the tail in order —
// the same arithmetic on both paths.
static float dot(const float *a, const float *b, long n) {
	long i = 0;
	float s;
	if (avx2()) {
		s = dot_avx2(a, b, n, &i);
	} else {
		float l[8] = {0};
		for (; i + 8 <= n; i += 8)
			for (int j = 0; j < 8; j++) l[j] += a[i + j] * b[i + j];
		s = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
	}
	for (; i < n; i++) s += a[i] * b[i];
	return s;
}

// The attention backward over a block of scores: t query rows of stride w, row r seeing its
// first n0 + r + 1 keys (a continuation's prefix of n0 keys, then causally its own), the rest
// of the row masked.

__attribute__((target("avx2"))) static void exp_shift_avx2(float *x, long n, float l, long *done) {
	const __m256 L = _mm256_set1_ps(l);
	long i = 0;
	for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), L)));
	*done = i;
}

void rk_attention_probs(float *p, long t, long w, long n0, const float *lse, long ls) {
	for (long r = 0; r < t; r++) {
		float *row = p + r * w;
		long n = n0 + r + 1, i = 0;
		float l = lse[r * ls];
		if (avx2()) exp_shift_avx2(row, n, l, &i);
		for (; i < n; i++) row[i] = exp1(row[i] - l);
		memset(row + n, 0, (size_t)(w - n) * sizeof(float));
	}
}

__attribute__((target("avx2"))) static void dscores_avx2(float *dp, const float *p, long n, float d, long *done) {
	const __m256 D = _mm256_set1_ps(d);
	long i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(dp + i, _mm256_mul_ps(_mm256_loadu_ps(p + i), _mm256_sub_ps(_mm256_loadu_ps(dp + i), D)));
	*done = i;
}

void rk_attention_dscores(float *dp, const float *p, long t, long w, long n0, const float *dy, const float *y, long ld,
                          long hd) {
	for (long r = 0; r < t; r++) {
		float *drow = dp + r * w;
		const float *prow = p + r * w;
		long n = n0 + r + 1, i = 0;
		float d = dot(dy + r * ld, y + r * ld, hd);
		if (avx2()) dscores_avx2(drow, prow, n, d, &i);
		for (; i < n; i++) drow[i] = prow[i] * (drow[i] - d);
		memset(drow + n, 0, (size_t)(w - n) * sizeof(float));
	}
}

// Column sums in row order, kept in registers across the rows for 32 columns at a time.
__attribute__((target("avx2"))) static void col_sums_avx2(float *acc, const float *x, long n, long ld, long cols, long *done) {
	long c = 0;
	for (; c + 32 <= cols; c += 32) {
		__m256 a0 = _mm256_loadu_ps(acc + c), a1 = _mm256_loadu_ps(acc + c + 8), a2 = _mm256_loadu_ps(acc + c + 16),
		       a3 = _mm256_loadu_ps(acc + c + 24);
		for (long i = 0; i < n; i++) {
			const float *row = x + i * ld + c;
			a0 = _mm256_add_ps(a0, _mm256_loadu_ps(row));
			a1 = _mm256_add_ps(a1, _mm256_loadu_ps(row + 8));
			a2 = _mm256_add_ps(a2, _mm256_loadu_ps(row + 16));
			a3 = _mm256_add_ps(a3, _mm256_loadu_ps(row + 24));
		}
		_mm256_storeu_ps(acc + c, a0);
		_mm256_storeu_ps(acc + c + 8, a1);
		_mm256_storeu_ps(acc + c + 16, a2);
		_mm256_storeu_ps(acc + c + 24, a3);
	}
	*done = c;
}

void rk_col_sums(float *acc, const float *x, long n, long ld, long cols) {
	long c = 0;
	if (avx2()) col_sums_avx2(acc, x, n, ld, cols, &c);
	for (; c < cols; c++) {
		float a = acc[c];
		for (long i = 0; i < n; i++) a += x[i * ld + c];
		acc[c] = a;
	}
}

// LayerNorm forward of one row, as layernorm.go states it: the mean is the row's sum in four
// double accumulators (element k in accumulator k mod 4, the tail in the first), (a + b) +
// (c + d), rounded, over c; the variance sums float(d·d), d = x − mean, in double in element
// order; rstd = float(1 / sqrt(var/c + eps)); out = ((x − mean)·rstd)·w + b.
static double ln_sum(const float *x, long c) {
	double a = 0, b = 0, s = 0, d = 0;
	long k = 0;
	for (; k + 4 <= c; k += 4) {
		a += x[k];
		b += x[k + 1];
		s += x[k + 2];
		d += x[k + 3];
	}
	for (; k < c; k++) a += x[k];
	return (a + b) + (s + d);
}

// rstd from a row's summed squared deviations v.
static inline float ln_rstd(double v, long c, float eps) { return (float)(1.0 / sqrt(v / (double)c + (double)eps)); }

// ln_finish writes a row's out from element k on, and its mean and rstd.
static void ln_finish(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b, long c,
                      float m, float r, long k) {
	for (; k < c; k++) out[k] = (x[k] - m) * r * w[k] + b[k];
	*mean = m;
	*rstd = r;
}

static void ln_row(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b, long c,
                   float eps) {
	float m = (float)ln_sum(x, c) / (float)c;
	double v = 0;
	for (long k = 0; k < c; k++) {
		float d = x[k] - m;
		v += (double)(d * d);
	}
	ln_finish(out, mean, rstd, x, w, b, c, m, ln_rstd(v, c, eps), 0);
}

// t[j] ← column j of the 8 × 8 block whose rows are t[0..7].
__attribute__((target("avx2"), always_inline)) static inline void transpose8(__m256 t[8]) {
	__m256 a[8], b[8];
	_Pragma("GCC unroll 4") for (int i = 0; i < 8; i += 2) {
		a[i] = _mm256_unpacklo_ps(t[i], t[i + 1]);
		a[i + 1] = _mm256_unpackhi_ps(t[i], t[i + 1]);
	}
	_Pragma("GCC unroll 2") for (int i = 0; i < 8; i += 4) {
		b[i] = _mm256_shuffle_ps(a[i], a[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
		b[i + 1] = _mm256_shuffle_ps(a[i], a[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
		b[i + 2] = _mm256_shuffle_ps(a[i + 1], a[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
		b[i + 3] = _mm256_shuffle_ps(a[i + 1], a[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
	}
	_Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
		t[i] = _mm256_permute2f128_ps(b[i], b[i + 4], 0x20);
		t[i + 4] = _mm256_permute2f128_ps(b[i], b[i + 4], 0x31);
	}
}

// Eight rows at once, row r in lane r: each lane's sums are its row's chains, in ln_row's
// order, and the eight chains run side by side (one row's chain of c dependent additions is
// what bounds the scalar loop).
__attribute__((target("avx2"))) static void ln_rows8_avx2(float *out, float *mean, float *rstd, const float *x,
                                                            const float *w, const float *b, long c, float eps) {
	double sum[8];
	__m256d acc[8];
	_Pragma("GCC unroll 8") for (int r = 0; r < 8; r++) acc[r] = _mm256_setzero_pd();
	long k = 0;
	for (; k + 4 <= c; k += 4)
		_Pragma("GCC unroll 8") for (int r = 0; r < 8; r++) acc[r] =
		    _mm256_add_pd(acc[r], _mm256_cvtps_pd(_mm_loadu_ps(x + r * c + k)));
	float m[8];
	for (int r = 0; r < 8; r++) {
		double l[4];
		_mm256_storeu_pd(l, acc[r]);
		for (long t = k; t < c; t++) l[0] += x[r * c + t];
		sum[r] = (l[0] + l[1]) + (l[2] + l[3]);
		m[r] = (float)sum[r] / (float)c;
	}
	// The variances: eight columns of the eight rows at a time, transposed so that each vector
	// holds one column (row r in lane r).
	const __m256 M = _mm256_loadu_ps(m);
	__m256d v0 = _mm256_setzero_pd(), v1 = _mm256_setzero_pd();
	for (k = 0; k + 8 <= c; k += 8) {
		__m256 t[8];
		_Pragma("GCC unroll 8") for (int r = 0; r < 8; r++) t[r] = _mm256_loadu_ps(x + r * c + k);
		transpose8(t);
		_Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {
			__m256 d = _mm256_sub_ps(t[j], M);
			add8d(&v0, &v1, _mm256_mul_ps(d, d));
		}
	}
	for (; k < c; k++) {
		__m256 d = _mm256_sub_ps(_mm256_setr_ps(x[k], x[c + k], x[2 * c + k], x[3 * c + k], x[4 * c + k], x[5 * c + k],
		                                        x[6 * c + k], x[7 * c + k]),
		                         M);
		add8d(&v0, &v1, _mm256_mul_ps(d, d));
	}
	double v[8];
	_mm256_storeu_pd(v, v0);
	_mm256_storeu_pd(v + 4, v1);
	for (int r = 0; r < 8; r++) {
		float rs = ln_rstd(v[r], c, eps);
		const float *xr = x + r * c;
		float *o = out + r * c;
		__m256 Mr = _mm256_set1_ps(m[r]), R = _mm256_set1_ps(rs);
		long e = 0;
		for (; e + 8 <= c; e += 8) {
			__m256 y = _mm256_mul_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + e), Mr), R), _mm256_loadu_ps(w + e));
			_mm256_storeu_ps(o + e, _mm256_add_ps(y, _mm256_loadu_ps(b + e)));
		}
		ln_finish(o, mean + r, rstd + r, xr, w, b, c, m[r], rs, e);
	}
}

// LayerNorm backward of one row, as layernorm.go states it: with dn = w·dout, the row's two
// sums s1 = Σ dn and s2 = Σ dn·(x − mean)·rstd in double in element order, then per element
// norm = (x − mean)·rstd, dw += dout·norm, db += dout and
// dinp += ((w·dout − s1/c) − norm·(s2/c))·rstd, the means rounded to float.
static void lnb_apply(float *di, float *dw, float *db, const float *d, const float *x, const float *w, long c, float m,
                      float r, float mean1, float mean2, long k) {
	for (; k < c; k++) {
		float norm = (x[k] - m) * r;
		dw[k] += d[k] * norm;
		db[k] += d[k];
		di[k] += (w[k] * d[k] - mean1 - norm * mean2) * r;
	}
}

__attribute__((target("avx2"))) static void lnb_apply8(float *di, float *dw, float *db, const float *d, const float *x,
                                                      const float *w, long c, float m, float r, double s1, double s2) {
	float mean1 = (float)(s1 / (double)c), mean2 = (float)(s2 / (double)c);
	const __m256 M = _mm256_set1_ps(m), R = _mm256_set1_ps(r), M1 = _mm256_set1_ps(mean1), M2 = _mm256_set1_ps(mean2);
	long k = 0;
	for (; k + 8 <= c; k += 8) {
		__m256 dv = _mm256_loadu_ps(d + k), norm = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + k), M), R);
		_mm256_storeu_ps(dw + k, _mm256_add_ps(_mm256_loadu_ps(dw + k), _mm256_mul_ps(dv, norm)));
		_mm256_storeu_ps(db + k, _mm256_add_ps(_mm256_loadu_ps(db + k), dv));
		__m256 g = _mm256_sub_ps(_mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(w + k), dv), M1), _mm256_mul_ps(norm, M2));
		_mm256_storeu_ps(di + k, _mm256_add_ps(_mm256_loadu_ps(di + k), _mm256_mul_ps(g, R)));
	}
	lnb_apply(di, dw, db, d, x, w, c, m, r, mean1, mean2, k);
}

static void lnb_sums(const float *x, const float *d, const float *w, long c, float m, float r, double *s1, double *s2) {
	double a = 0, b = 0;
	for (long k = 0; k < c; k++) {
		float dn = w[k] * d[k];
		a += dn;
		b += dn * (x[k] - m) * r;
	}
	*s1 = a;
	*s2 = b;
}

// The two sums of eight rows at once, row r in lane r (columns transposed as ln_rows8_avx2's).
__attribute__((target("avx2"))) static void lnb_sums8(const float *x, const float *d, const float *w, long c,
                                                     const float *mean, const float *rstd, double *s1, double *s2) {
	const __m256 M = _mm256_loadu_ps(mean), R = _mm256_loadu_ps(rstd);
	__m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd(), b0 = _mm256_setzero_pd(), b1 = _mm256_setzero_pd();
	long k = 0;
	for (; k + 8 <= c; k += 8) {
		__m256 tx[8], td[8];
		_Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) {
			tx[i] = _mm256_loadu_ps(x + i * c + k);
			td[i] = _mm256_loadu_ps(d + i * c + k);
		}
		transpose8(tx);
		transpose8(td);
		_Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {
			__m256 dn = _mm256_mul_ps(_mm256_set1_ps(w[k + j]), td[j]);
			__m256 t = _mm256_mul_ps(_mm256_mul_ps(dn, _mm256_sub_ps(tx[j], M)), R);
			add8d(&a0, &a1, dn);
			add8d(&b0, &b1, t);
		}
	}
	_mm256_storeu_pd(s1, a0);
	_mm256_storeu_pd(s1 + 4, a1);
	_mm256_storeu_pd(s2, b0);
	_mm256_storeu_pd(s2 + 4, b1);
	for (; k < c; k++)
		for (int i = 0; i < 8; i++) {
			float dn = w[k] * d[i * c + k];
			s1[i] += dn;
			s2[i] += dn * (x[i * c + k] - mean[i]) * rstd[i];
		}
}

void rk_layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *x, const float *w,
                           const float *mean, const float *rstd, long n, long c) {
	long i = 0;
	if (avx2())
		for (; i + 8 <= n; i += 8) {
			double s1[8], s2[8];
			lnb_sums8(x + i * c, dout + i * c, w, c, mean + i, rstd + i, s1, s2);
			for (int r = 0; r < 8; r++)
				lnb_apply8(dinp + (i + r) * c, dw, db, dout + (i + r) * c, x + (i + r) * c, w, c, mean[i + r], rstd[i + r],
				           s1[r], s2[r]);
		}
	for (; i < n; i++) {
		double s1, s2;
		lnb_sums(x + i * c, dout + i * c, w, c, mean[i], rstd[i], &s1, &s2);
		if (avx2())
			lnb_apply8(dinp + i * c, dw, db, dout + i * c, x + i * c, w, c, mean[i], rstd[i], s1, s2);
		else
			lnb_apply(dinp + i * c, dw, db, dout + i * c, x + i * c, w, c, mean[i], rstd[i], (float)(s1 / (double)c),
			          (float)(s2 / (double)c), 0);
	}
}

void rk_layernorm(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b, long n, long c,
                  float eps) {
	long i = 0;
	if (avx2())
		for (; i + 8 <= n; i += 8) ln_rows8_avx2(out + i * c, mean + i, rstd + i, x + i * c, w, b, c, eps);
	for (; i < n; i++) ln_row(out + i * c, mean + i, rstd + i, x + i * c, w, b, c, eps);
}

// rk_kv_write copies n rows' keys and values (rows of src, 3·c floats each: query, key,
// value) into the cache: row i's to position pos[i] of slot slot[i] (cap positions of c
// floats per slot). The destinations are cold, a new position of every slot each step: the
// lines of the rows KV_AHEAD on are fetched for writing while a row is copied. A 64-row decode
// step's writes take less time so than Go's copies of the same rows, and less with the fetches
// than without.
#define KV_AHEAD 4
void rk_kv_write(float *kc, float *vc, const float *src, const int *slot, const int *pos, long n, long c, long cap) {
	for (long i = 0; i < n + KV_AHEAD; i++) {
		if (i < n) {
			long d = ((long)slot[i] * cap + pos[i]) * c;
			for (long o = 0; o < c; o += 16) {
				__builtin_prefetch(kc + d + o, 1, 3);
				__builtin_prefetch(vc + d + o, 1, 3);
			}
		}
		long b = i - KV_AHEAD;
		if (b >= 0) {
			long d = ((long)slot[b] * cap + pos[b]) * c;
			memcpy(kc + d, src + b * 3 * c + c, c * sizeof(float));
			memcpy(vc + d, src + b * 3 * c + 2 * c, c * sizeof(float));
		}
	}
}
