// Decode attention in sixteen float lanes (AVX-512): one query row over the cached keys and
// values of its slot, all heads. A decode step runs it for every row and layer over the whole
// context, so it is most of a step's work besides the weight products. The training forward
// runs the same arithmetic over a packed batch (rk_attention_rows, several rows of a sequence
// at once): a row's attention is the same bits decoded or trained on (DESIGN §6.1).
//
// For head h of hd channels and positions j < n:
//
//	s_j = scale · q_h·k_{j,h}     channel e in lane e mod 16, fused multiply-adds in channel
//	                             order, the lanes summed by a fixed tree (as gemm_small.c's dots)
//	p   = softmax(s)              max; e^{s_j − max} (lanes.h's exp1 and exp16: the same
//	                             operations in every path); the sum with position j in lane j mod 16, the
//	                             lanes summed by the same tree; each p_j = e_j · (1 / sum)
//	out_h = Σ_j p_j v_{j,h}       per channel, fused multiply-adds in position order
//
// Positions j < n1 come from one place (a prompt shared by a group's slots, or a packed
// prefix) and the rest from another; position j's lanes are the same wherever the split falls.
// Keys are read position by position, every head of a position at once (each cached row once,
// in address order); values head by head, the head's channels accumulating in registers over
// the positions. rk_attention_decode8 is the same arithmetic in eight-float halves (AVX2) and
// rk_attention_decode_ref in portable C (fmaf, the same lanes and trees): the tests check the
// vector code against it bit for bit.
#include <immintrin.h>
#include <math.h>

#include "kernels.h"
#include "lanes.h"

// No multiply and add fused into one rounding but the explicit ones: the dots' fused
// multiply-adds are intrinsics, and exp16 must round as lanes.h's exp1 does.
#pragma GCC optimize("fp-contract=off")

static int decode16_on = 1; // tests switch it off to run the other paths

void rk_set_decode16(int on) { decode16_on = on; }

int rk_decode16(void) { return decode16_on && rk_has_avx512(); }

static inline __mmask16 tail(long left) { return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1); }

// One head's dot over hd channels: full vectors, then the masked tail.
__attribute__((target("avx512f,avx512dq"), always_inline)) static inline __m512 dot16(const float *q, const float *k, long hd) {
	__m512 acc = _mm512_setzero_ps();
	long e = 0;
	for (; e + 16 <= hd; e += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + e), _mm512_loadu_ps(k + e), acc);
	if (e < hd) {
		__mmask16 m = tail(hd - e);
		acc = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(m, q + e), _mm512_maskz_loadu_ps(m, k + e), acc, m);
	}
	return acc;
}

// Keys are fetched KEYS_AHEAD rows ahead of the dots. Without it, much of the kernel's time in
// a decode step went to waiting on the key loads (a profile of BenchmarkDecode124M): the rows
// come from memory, written steps ago, and the processor's own prefetch did not run ahead of
// them. With it decode steps of 64 and of 8 rows take less time. Fetching the values ahead
// too, in the scores' pass or in their own, gained nothing more.
#define KEYS_AHEAD 4

__attribute__((always_inline)) static inline void prefetch_row(const float *r, long floats) {
	for (long o = 0; o < floats; o += 16) _mm_prefetch((const char *)(r + o), _MM_HINT_T0);
}

// The next row's own keys or values (the next row of a run of one prompt's rows, which the
// same worker attends: decodeRuns), fetched into L2 while this row runs, a share at each step
// of a loop: written in earlier steps, they come from memory, and this row's work hides the
// wait, while the prompt they share is still in L2 from the run's first row. GPT-2 124M's
// decode attention at 64 rows (8 prompts × 8 samples) takes less time with it, in runs, on
// both the sixteen-lane and the AVX2 path (BenchmarkDecode124M/rows=64).
struct ahead {
	const char *p;
	long left, per;
};

static inline struct ahead ahead_over(const float *p, long floats, long steps) {
	long lines = p ? (floats + 15) / 16 : 0;
	return (struct ahead){(const char *)p, lines, steps > 0 ? (lines + steps - 1) / steps : lines};
}

__attribute__((always_inline)) static inline void ahead_step(struct ahead *a) {
	for (long e = 0; e < a->per && a->left > 0; e++, a->left--, a->p += 64) _mm_prefetch(a->p, _MM_HINT_T1);
}

__attribute__((always_inline)) static inline void ahead_rest(struct ahead *a) {
	for (; a->left > 0; a->left--, a->p += 64) _mm_prefetch(a->p, _MM_HINT_T1);
}

// Four heads' dots for heads of 64 channels (GPT-2's): each head's dot is dot16's operations in
// dot16's order, the four chains of fused multiply-adds interleaved so that all four are in
// flight at once. Through four dot16 calls, one chain after another, a decode row of GPT-2 124M
// with its keys and values in L2 took longer (BenchmarkDecodeAttention), and so did a decode
// step's attention at 8 and at 64 rows (BenchmarkDecode124M).
__attribute__((target("avx512f,avx512dq"), always_inline)) static inline __m128 dots4x64(const float *q, const float *k) {
	__m512 acc[4];
	_Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) acc[i] = _mm512_setzero_ps();
	_Pragma("GCC unroll 4") for (int e = 0; e < 64; e += 16)
		_Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)
			acc[i] = _mm512_fmadd_ps(_mm512_loadu_ps(q + i * 64 + e), _mm512_loadu_ps(k + i * 64 + e), acc[i]);
	return tree16x4(acc[0], acc[1], acc[2], acc[3]);
}

// Scores of every head against one cached key row, four heads per reduction (the callers pass
// hd = 64 as a constant, so the choice of dots is made at compile time).
__attribute__((target("avx512f,avx512dq"), always_inline)) static inline void scores(float *s, long n, long j, const float *q,
                                                                       const float *k, long nh, long hd, float scale) {
	long h = 0;
	for (; h + 4 <= nh; h += 4) {
		__m128 r = hd == 64 ? dots4x64(q + h * 64, k + h * 64)
		                    : tree16x4(dot16(q + h * hd, k + h * hd, hd), dot16(q + (h + 1) * hd, k + (h + 1) * hd, hd),
		                               dot16(q + (h + 2) * hd, k + (h + 2) * hd, hd), dot16(q + (h + 3) * hd, k + (h + 3) * hd, hd));
		__m128 x = _mm_mul_ps(_mm_set1_ps(scale), r);
		_mm_store_ss(s + h * n + j, x);
		_mm_store_ss(s + (h + 1) * n + j, _mm_shuffle_ps(x, x, 1));
		_mm_store_ss(s + (h + 2) * n + j, _mm_shuffle_ps(x, x, 2));
		_mm_store_ss(s + (h + 3) * n + j, _mm_shuffle_ps(x, x, 3));
	}
	for (; h < nh; h++) s[h * n + j] = scale * tree16(dot16(q + h * hd, k + h * hd, hd));
}

// out_h = Σ_j p_j v_{j,h} for three heads of 64 channels at once (twelve independent chains of
// fused multiply-adds in registers): positions j < n1 from v1, the rest from v2; p holds the
// three heads' probabilities at a stride of n. av's lines are fetched a share per position.
__attribute__((target("avx512f,avx512dq"))) static void weigh3x64(float *out, const float *p, long n, const float *v1,
                                                                   long n1, const float *v2, long ld, struct ahead *av) {
	__m512 a[12];
	_Pragma("GCC unroll 12") for (int i = 0; i < 12; i++) a[i] = _mm512_setzero_ps();
	for (long j = 0; j < n; j++) {
		ahead_step(av);
		const float *v = j < n1 ? v1 + j * ld : v2 + (j - n1) * ld;
		__m512 x[3] = {_mm512_set1_ps(p[j]), _mm512_set1_ps(p[n + j]), _mm512_set1_ps(p[2 * n + j])};
		_Pragma("GCC unroll 12") for (int i = 0; i < 12; i++) a[i] = _mm512_fmadd_ps(x[i / 4], _mm512_loadu_ps(v + 16 * i), a[i]);
	}
	_Pragma("GCC unroll 12") for (int i = 0; i < 12; i++) _mm512_storeu_ps(out + 16 * i, a[i]);
}

// out_h's channels e0 .. e0+63 (masked past hd) over m positions.
__attribute__((target("avx512f,avx512dq"))) static inline void weigh64(__m512 a[4], const __mmask16 t[4], const float *p,
                                                                        const float *v, long m, long ld) {
	for (long j = 0; j < m; j++, v += ld) {
		__m512 x = _mm512_set1_ps(p[j]);
		for (int i = 0; i < 4; i++) a[i] = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(t[i], v + 16 * i), a[i]);
	}
}

// One head's scores sh[0 .. n) become its probabilities, and *lse (if not NULL) its
// log-sum-exp.
__attribute__((target("avx512f,avx512dq"))) static inline void softmax16(float *sh, long n, float *lse) {
	__m512 mx = _mm512_set1_ps(-INFINITY), nan = _mm512_setzero_ps();
	for (long j = 0; j < n; j += 16) {
		__m512 x = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail(n - j), sh + j);
		mx = _mm512_max_ps(mx, x);
		nan = _mm512_or_ps(nan, _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), _mm512_set1_ps(1.0f)));
	}
	float m = _mm512_reduce_max_ps(mx);
	if (_mm512_reduce_add_ps(nan) != 0) m = NAN;
	__m512 M = _mm512_set1_ps(m), sum = _mm512_setzero_ps();
	for (long j = 0; j < n; j += 16) {
		__mmask16 t = tail(n - j);
		__m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(t, sh + j), M));
		_mm512_mask_storeu_ps(sh + j, t, e);
		sum = _mm512_mask_add_ps(sum, t, sum, e);
	}
	float total = tree16(sum);
	if (lse) *lse = m + logf(total);
	__m512 inv = _mm512_set1_ps(1.0f / total);
	for (long j = 0; j < n; j += 16) {
		__mmask16 t = tail(n - j);
		_mm512_mask_storeu_ps(sh + j, t, _mm512_mul_ps(_mm512_maskz_loadu_ps(t, sh + j), inv));
	}
}

__attribute__((target("avx512f,avx512dq"))) void rk_attention_decode16(float *out, const float *q, const float *k1,
                                                                       const float *v1, long n1, const float *k2,
                                                                       const float *v2, long n2, long nh, long hd,
                                                                       long ld, float scale, float *s, float *lse,
                                                                       const float *nk, const float *nv, long nn) {
	long n = n1 + n2;
	struct ahead ak = ahead_over(nk, nn, n), av = ahead_over(nv, nn, (nh + 2) / 3 * n);
	for (long j = 0; j < n; j++) {
		ahead_step(&ak);
		long a = j + KEYS_AHEAD;
		if (a < n) prefetch_row(a < n1 ? k1 + a * ld : k2 + (a - n1) * ld, nh * hd);
		const float *k = j < n1 ? k1 + j * ld : k2 + (j - n1) * ld;
		if (hd == 64) // GPT-2's head size: the dots unrolled and interleaved, unmasked
			scores(s, n, j, q, k, nh, 64, scale);
		else
			scores(s, n, j, q, k, nh, hd, scale);
	}
	for (long h = 0; h < nh; h++) softmax16(s + h * n, n, lse ? lse + h : 0);
	long h = 0;
	if (hd == 64)
		for (; h + 3 <= nh; h += 3)
			weigh3x64(out + h * 64, s + h * n, n, v1 + h * 64, n1, v2 + h * 64, ld, &av);
	for (; h < nh; h++)
		for (long e0 = 0; e0 < hd; e0 += 64) {
			__mmask16 t[4];
			for (int i = 0; i < 4; i++) t[i] = hd - e0 > 16 * i ? tail(hd - e0 - 16 * i) : 0;
			__m512 a[4];
			for (int i = 0; i < 4; i++) a[i] = _mm512_setzero_ps();
			weigh64(a, t, s + h * n, v1 + h * hd + e0, n1, ld);
			weigh64(a, t, s + h * n + n1, v2 + h * hd + e0, n2, ld);
			for (int i = 0; i < 4; i++) _mm512_mask_storeu_ps(out + h * hd + e0 + 16 * i, t[i], a[i]);
		}
	ahead_rest(&ak);
	ahead_rest(&av);
}

// The same arithmetic in eight-float halves (AVX2 and FMA, for processors without AVX-512), as
// rk_gemm_nt8 takes the products' lanes: lane e of the sixteen is lane e mod 8 of lo (e < 8)
// or of hi, and tree8x2 adds them as tree16 does. A processor without AVX-512 thus samples
// and trains on the same bits as one with it.

// One head's dot over hd channels in the sixteen lanes; a tail short of sixteen channels goes
// lane by lane, as the masked vector does.
__attribute__((target("avx2,fma"), always_inline)) static inline float dot8x2(const float *q, const float *k, long hd) {
	__m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
	long e = 0;
	for (; e + 16 <= hd; e += 16) {
		lo = _mm256_fmadd_ps(_mm256_loadu_ps(q + e), _mm256_loadu_ps(k + e), lo);
		hi = _mm256_fmadd_ps(_mm256_loadu_ps(q + e + 8), _mm256_loadu_ps(k + e + 8), hi);
	}
	if (e == hd) return tree8x2(lo, hi);
	float l[16];
	_mm256_storeu_ps(l, lo);
	_mm256_storeu_ps(l + 8, hi);
	for (; e < hd; e++) l[e % 16] = fmaf(q[e], k[e], l[e % 16]);
	return tree16_ref(l);
}

// The mask of a half's first left lanes (none for left ≤ 0, all eight from 8): the positions
// a half of sixteen holds before the scores end.
__attribute__((target("avx2"), always_inline)) static inline __m256 below8(long left) {
	const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
	return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)(left < 8 ? (left > 0 ? left : 0) : 8)), idx));
}

// softmax16's arithmetic in halves: the max (NaN if any score is), e^{s_j − max} with position
// j in lane j mod 16 of the sum, tree8x2, then each e_j · (1 / sum).
__attribute__((target("avx2,fma"))) static void softmax8x2(float *sh, long n, float *lse) {
	const __m256 ninf = _mm256_set1_ps(-INFINITY);
	__m256 mlo = ninf, mhi = ninf, nan = _mm256_setzero_ps();
	for (long j = 0; j < n; j += 16) {
		__m256 tl = below8(n - j), th = below8(n - j - 8);
		__m256 xl = _mm256_blendv_ps(ninf, _mm256_maskload_ps(sh + j, _mm256_castps_si256(tl)), tl);
		__m256 xh = _mm256_blendv_ps(ninf, _mm256_maskload_ps(sh + j + 8, _mm256_castps_si256(th)), th);
		mlo = _mm256_max_ps(mlo, xl);
		mhi = _mm256_max_ps(mhi, xh);
		nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_cmp_ps(xl, xl, _CMP_UNORD_Q), _mm256_cmp_ps(xh, xh, _CMP_UNORD_Q)));
	}
	float l[16];
	_mm256_storeu_ps(l, mlo);
	_mm256_storeu_ps(l + 8, mhi);
	float m = l[0];
	for (int e = 1; e < 16; e++) m = l[e] > m ? l[e] : m;
	if (_mm256_movemask_ps(nan)) m = NAN;
	__m256 M = _mm256_set1_ps(m), slo = _mm256_setzero_ps(), shi = _mm256_setzero_ps();
	for (long j = 0; j < n; j += 16) {
		__m256 tl = below8(n - j), th = below8(n - j - 8);
		__m256 el = exp8(_mm256_sub_ps(_mm256_maskload_ps(sh + j, _mm256_castps_si256(tl)), M));
		__m256 eh = exp8(_mm256_sub_ps(_mm256_maskload_ps(sh + j + 8, _mm256_castps_si256(th)), M));
		_mm256_maskstore_ps(sh + j, _mm256_castps_si256(tl), el);
		_mm256_maskstore_ps(sh + j + 8, _mm256_castps_si256(th), eh);
		slo = _mm256_blendv_ps(slo, _mm256_add_ps(slo, el), tl);
		shi = _mm256_blendv_ps(shi, _mm256_add_ps(shi, eh), th);
	}
	float total = tree8x2(slo, shi);
	if (lse) *lse = m + logf(total);
	__m256 inv = _mm256_set1_ps(1.0f / total);
	for (long j = 0; j < n; j += 8) {
		__m256i t = _mm256_castps_si256(below8(n - j));
		_mm256_maskstore_ps(sh + j, t, _mm256_mul_ps(_mm256_maskload_ps(sh + j, t), inv));
	}
}

// out_h's channels e0 .. e0+7 over the positions: a chain of fused multiply-adds per channel
// in position order, from zero.
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 weigh8(const float *p, const float *v1, long n1,
                                                                              const float *v2, long n, long ld) {
	__m256 a = _mm256_setzero_ps();
	for (long j = 0; j < n; j++) {
		const float *v = j < n1 ? v1 + j * ld : v2 + (j - n1) * ld;
		a = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_loadu_ps(v), a);
	}
	return a;
}

__attribute__((target("avx2,fma"))) void rk_attention_decode8(float *out, const float *q, const float *k1, const float *v1,
                                                             long n1, const float *k2, const float *v2, long n2, long nh,
                                                             long hd, long ld, float scale, float *s, float *lse,
                                                             const float *nk, const float *nv, long nn) {
	long n = n1 + n2;
	struct ahead ak = ahead_over(nk, nn, n), av = ahead_over(nv, nn, nh * n);
	for (long j = 0; j < n; j++) {
		ahead_step(&ak);
		long a = j + KEYS_AHEAD;
		if (a < n) {
			const float *r = a < n1 ? k1 + a * ld : k2 + (a - n1) * ld;
			for (long o = 0; o < nh * hd; o += 16) _mm_prefetch((const char *)(r + o), _MM_HINT_T0);
		}
		const float *k = j < n1 ? k1 + j * ld : k2 + (j - n1) * ld;
		if (hd == 64) // GPT-2's head size: the dots unrolled
			for (long h = 0; h < nh; h++) s[h * n + j] = scale * dot8x2(q + h * 64, k + h * 64, 64);
		else
			for (long h = 0; h < nh; h++) s[h * n + j] = scale * dot8x2(q + h * hd, k + h * hd, hd);
	}
	for (long h = 0; h < nh; h++) softmax8x2(s + h * n, n, lse ? lse + h : 0);
	for (long h = 0; h < nh; h++) {
		const float *p = s + h * n;
		long e = 0;
		if (hd == 64) { // eight chains side by side
			__m256 a[8];
			_Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) a[i] = _mm256_setzero_ps();
			for (long j = 0; j < n; j++) {
				ahead_step(&av);
				const float *v = (j < n1 ? v1 + j * ld : v2 + (j - n1) * ld) + h * 64;
				__m256 x = _mm256_set1_ps(p[j]);
				_Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) a[i] = _mm256_fmadd_ps(x, _mm256_loadu_ps(v + 8 * i), a[i]);
			}
			_Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) _mm256_storeu_ps(out + h * 64 + 8 * i, a[i]);
			continue;
		}
		for (; e + 8 <= hd; e += 8) _mm256_storeu_ps(out + h * hd + e, weigh8(p, v1 + h * hd + e, n1, v2 + h * hd + e, n, ld));
		for (; e < hd; e++) {
			float a = 0;
			for (long j = 0; j < n; j++) a = fmaf(p[j], (j < n1 ? v1 + j * ld : v2 + (j - n1) * ld)[h * hd + e], a);
			out[h * hd + e] = a;
		}
	}
	ahead_rest(&ak);
	ahead_rest(&av);
}

static inline float max_or_nan(float a, float b) { return b > a || b != b ? b : a; }

void rk_attention_decode_ref(float *out, const float *q, const float *k1, const float *v1, long n1, const float *k2,
                             const float *v2, long n2, long nh, long hd, long ld, float scale, float *s, float *lse) {
	long n = n1 + n2;
	for (long j = 0; j < n; j++) {
		const float *k = j < n1 ? k1 + j * ld : k2 + (j - n1) * ld;
		for (long h = 0; h < nh; h++) {
			float l[16] = {0};
			for (long e = 0; e < hd; e++) l[e % 16] = fmaf(q[h * hd + e], k[h * hd + e], l[e % 16]);
			s[h * n + j] = scale * tree16_ref(l);
		}
	}
	for (long h = 0; h < nh; h++) {
		float *sh = s + h * n;
		float m = -INFINITY;
		for (long j = 0; j < n; j++) m = max_or_nan(m, sh[j]);
		float l[16] = {0};
		for (long j = 0; j < n; j++) {
			sh[j] = exp1(sh[j] - m);
			l[j % 16] += sh[j];
		}
		float total = tree16_ref(l);
		if (lse) lse[h] = m + logf(total);
		float inv = 1.0f / total;
		for (long j = 0; j < n; j++) sh[j] *= inv;
	}
	for (long h = 0; h < nh; h++)
		for (long e = 0; e < hd; e++) {
			float a = 0;
			for (long j = 0; j < n; j++) {
				const float *v = j < n1 ? v1 + j * ld : v2 + (j - n1) * ld;
				a = fmaf(s[h * n + j], v[h * hd + e], a);
			}
			out[h * hd + e] = a;
		}
}

// The widest path the processor runs (features.c), the same arithmetic in each, so that a
// row's attention is the same bits on any x86-64 machine.
void rk_attention_decode_ahead(float *out, const float *q, const float *k1, const float *v1, long n1, const float *k2,
                               const float *v2, long n2, long nh, long hd, long ld, float scale, float *scratch,
                               float *lse, const float *nk, const float *nv, long nn) {
	if (rk_decode16())
		rk_attention_decode16(out, q, k1, v1, n1, k2, v2, n2, nh, hd, ld, scale, scratch, lse, nk, nv, nn);
	else if (rk_has_avx2() && rk_has_avx2_fma())
		rk_attention_decode8(out, q, k1, v1, n1, k2, v2, n2, nh, hd, ld, scale, scratch, lse, nk, nv, nn);
	else
		rk_attention_decode_ref(out, q, k1, v1, n1, k2, v2, n2, nh, hd, ld, scale, scratch, lse);
}

void rk_attention_decode(float *out, const float *q, const float *k1, const float *v1, long n1, const float *k2,
                         const float *v2, long n2, long nh, long hd, long ld, float scale, float *scratch, float *lse) {
	rk_attention_decode_ahead(out, q, k1, v1, n1, k2, v2, n2, nh, hd, ld, scale, scratch, lse, 0, 0, 0);
}

// Up to four query rows of one sequence at once (the training forward's rows), heads of
// 16·HV channels: row i (at q + i·ldq) attends over its first n + i positions, the first n1
// of them at k1, v1 and the rest at k2, v2. Each row gets rk_attention_decode16's arithmetic
// exactly — the same dots, trees, softmax and position-ordered sums — but every key and value
// vector loaded serves all the rows: a head's query vectors of the four rows stay in
// registers while its keys stream past, and its value vectors feed four rows' accumulators.
// s holds 4·nh·(n + 3) floats; lse (if not NULL) receives row i's head h at lse[i·nh + h].
#define ROWS16(HV)                                                                                                     \
	__attribute__((target("avx512f,avx512dq"))) static void rows16_##HV(                                          \
	    float *out, long ldo, const float *q, long ldq, long R, const float *k1, const float *v1, long n1,        \
	    const float *k2, const float *v2, long n, long nh, long ld, float scale, float *s, float *lse) {           \
		const long hd = 16 * HV, nmax = n + R - 1; /* the last row's positions */                              \
		const __m128 S = _mm_set1_ps(scale);                                                                   \
		for (long h = 0; h < nh; h++) {                                                                        \
			__m512 qv[4][HV];                                                                              \
			_Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)                                            \
				_Pragma("GCC unroll 4") for (int e = 0; e < HV; e++) qv[i][e] =                        \
				    i < R ? _mm512_loadu_ps(q + i * ldq + h * hd + 16 * e) : _mm512_setzero_ps();       \
			float *sh = s + h * nmax; /* row i's scores of head h at sh + i·nh·nmax */                    \
			for (long j = 0; j < nmax; j++) {                                                              \
				const float *k = (j < n1 ? k1 + j * ld : k2 + (j - n1) * ld) + h * hd;                 \
				__m512 kv[HV], d[4];                                                                   \
				_Pragma("GCC unroll 4") for (int e = 0; e < HV; e++) kv[e] = _mm512_loadu_ps(k + 16 * e); \
				_Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {                                  \
					d[i] = _mm512_setzero_ps();                                                    \
					_Pragma("GCC unroll 4") for (int e = 0; e < HV; e++) d[i] =                    \
					    _mm512_fmadd_ps(qv[i][e], kv[e], d[i]);                                     \
				}                                                                                      \
				float l[4];                                                                            \
				_mm_storeu_ps(l, _mm_mul_ps(S, tree16x4(d[0], d[1], d[2], d[3])));                    \
				for (long i = 0; i < R; i++) sh[i * nh * nmax + j] = l[i];                             \
			}                                                                                              \
			for (long i = 0; i < R; i++) softmax16(sh + i * nh * nmax, n + i, lse ? lse + i * nh + h : 0); \
			__m512 a[4][HV];                                                                               \
			_Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)                                            \
				_Pragma("GCC unroll 4") for (int e = 0; e < HV; e++) a[i][e] = _mm512_setzero_ps();    \
			long j = 0;                                                                                    \
			if (R == 4)                                                                                    \
				for (; j < n; j++) {                                                                   \
					const float *v = (j < n1 ? v1 + j * ld : v2 + (j - n1) * ld) + h * hd;         \
					__m512 vv[HV];                                                                 \
					_Pragma("GCC unroll 4") for (int e = 0; e < HV; e++) vv[e] = _mm512_loadu_ps(v + 16 * e); \
					_Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {                          \
						__m512 p = _mm512_set1_ps(sh[i * nh * nmax + j]);                      \
						_Pragma("GCC unroll 4") for (int e = 0; e < HV; e++) a[i][e] =         \
						    _mm512_fmadd_ps(p, vv[e], a[i][e]);                                 \
					}                                                                              \
				}                                                                                      \
			for (; j < nmax; j++) { /* positions some rows do not see (all, for R < 4) */                  \
				const float *v = (j < n1 ? v1 + j * ld : v2 + (j - n1) * ld) + h * hd;                 \
				__m512 vv[HV];                                                                         \
				_Pragma("GCC unroll 4") for (int e = 0; e < HV; e++) vv[e] = _mm512_loadu_ps(v + 16 * e); \
				_Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {                                  \
					if (i >= R || j >= n + i) continue;                                            \
					__m512 p = _mm512_set1_ps(sh[i * nh * nmax + j]);                              \
					_Pragma("GCC unroll 4") for (int e = 0; e < HV; e++) a[i][e] =                 \
					    _mm512_fmadd_ps(p, vv[e], a[i][e]);                                         \
				}                                                                                      \
			}                                                                                              \
			for (long i = 0; i < R; i++)                                                                   \
				_Pragma("GCC unroll 4") for (int e = 0; e < HV; e++)                                   \
				    _mm512_storeu_ps(out + i * ldo + h * hd + 16 * e, a[i][e]);                         \
		}                                                                                                      \
	}

ROWS16(1)
ROWS16(2)
ROWS16(3)
ROWS16(4)

typedef void (*rows_fn)(float *, long, const float *, long, long, const float *, const float *, long, const float *,
                        const float *, long, long, long, float, float *, float *);
static const rows_fn rows16[5] = {0, rows16_1, rows16_2, rows16_3, rows16_4};

void rk_attention_rows(float *out, long ldo, const float *q, long ldq, long R, const float *k1, const float *v1, long n1,
                       const float *k2, const float *v2, long n, long nh, long hd, long ld, float scale, float *scratch,
                       float *lse) {
	if (rk_decode16() && hd % 16 == 0 && hd <= 64) {
		for (long i = 0; i < R; i += 4) {
			long r = R - i < 4 ? R - i : 4;
			rows16[hd / 16](out + i * ldo, ldo, q + i * ldq, ldq, r, k1, v1, n1, k2, v2, n + i, nh, ld, scale, scratch,
			                lse ? lse + i * nh : 0);
		}
		return;
	}
	for (long i = 0; i < R; i++) {
		long m = n + i, m1 = n1 < m ? n1 : m; // positions: m1 from k1, v1, the rest from k2, v2
		rk_attention_decode(out + i * ldo, q + i * ldq, k1, v1, m1, k2, v2, m - m1, nh, hd, ld, scale, scratch,
		                    lse ? lse + i * nh : 0);
	}
}
