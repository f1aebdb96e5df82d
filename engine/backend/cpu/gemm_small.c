// A GEMM without packing: out = a·wᵀ (+ out), a (m, k), w (n, k), both row-major — a linear
// layer's forward, y = x·wᵀ, for a decode step (one token per sequence), an LM-head chunk or
// a training batch.
//
// OpenBLAS packs the weight matrix into its panel layout on every call; at a few dozen rows
// that copy costs as much as the multiplication, and a decode step does it for every weight
// of the model. Here the weights are read once, in place: out[i][j] is a dot product of two
// contiguous rows, a[i] and w[j], computed in sixteen float lanes (element k in lane k mod 16,
// fused multiply-adds in k order, the last partial vector masked) and reduced by a fixed tree.
// Tiles of up to 6 rows of a × 4 rows of w keep 24 accumulators in registers, so each vector
// loaded from w serves 6 rows and each from a serves 4 columns; the 4 rows of w (16 KB at
// k = 1024) stay in L1 while every tile of a streams past them from L2.
//
// rk_gemm_nt_ref is the same arithmetic in portable C (fmaf, the same lanes and tree): the
// tests check the vector kernel against it bit for bit. Callers split the columns; a column's
// result does not depend on the split.
#include <immintrin.h>
#include <math.h>

#include "kernels.h"

static int cpu_avx512 = -1;

int rk_has_avx512(void) {
	if (cpu_avx512 < 0) {
		__builtin_cpu_init();
		cpu_avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
	}
	return cpu_avx512;
}

// Lane sums of one accumulator: halves, quarters, eighths, then the last pair.
__attribute__((target("avx512f,avx512dq"))) static inline float reduce16(__m512 v) {
	__m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
	__m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
	__m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
	return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
}

// One tile: MR rows of a (at a, stride lda) by NR rows of w (at w, stride ldw) into out
// (stride ldo). MR and NR are constants at every call site, so the loops unroll.
#define UNROLL _Pragma("GCC unroll 8")

#define TILE(MR, NR)                                                                                                  \
	__attribute__((target("avx512f,avx512dq"))) static void tile_##MR##x##NR(                                       \
	    float *out, const float *a, const float *w, long k, long lda, long ldw, long ldo, int acc) {                \
		__m512 s[MR][NR];                                                                                       \
		UNROLL for (int i = 0; i < MR; i++)                                                                            \
			UNROLL for (int j = 0; j < NR; j++) s[i][j] = _mm512_setzero_ps();                                     \
		long kk = 0;                                                                                            \
		for (; kk + 16 <= k; kk += 16) {                                                                        \
			__m512 wv[NR];                                                                                  \
			UNROLL for (int j = 0; j < NR; j++) wv[j] = _mm512_loadu_ps(w + j * ldw + kk);                        \
			UNROLL for (int i = 0; i < MR; i++) {                                                                  \
				__m512 av = _mm512_loadu_ps(a + i * lda + kk);                                          \
				UNROLL for (int j = 0; j < NR; j++) s[i][j] = _mm512_fmadd_ps(av, wv[j], s[i][j]);            \
			}                                                                                               \
		}                                                                                                       \
		if (kk < k) {                                                                                           \
			__mmask16 m = (__mmask16)((1u << (k - kk)) - 1);                                                \
			__m512 wv[NR];                                                                                  \
			UNROLL for (int j = 0; j < NR; j++) wv[j] = _mm512_maskz_loadu_ps(m, w + j * ldw + kk);               \
			UNROLL for (int i = 0; i < MR; i++) {                                                                  \
				__m512 av = _mm512_maskz_loadu_ps(m, a + i * lda + kk);                                 \
				UNROLL for (int j = 0; j < NR; j++) s[i][j] = _mm512_fmadd_ps(av, wv[j], s[i][j]);            \
			}                                                                                               \
		}                                                                                                       \
		UNROLL for (int i = 0; i < MR; i++)                                                                            \
			UNROLL for (int j = 0; j < NR; j++) {                                                                  \
				float r = reduce16(s[i][j]);                                                            \
				out[i * ldo + j] = acc ? out[i * ldo + j] + r : r;                                      \
			}                                                                                               \
	}

TILE(6, 4)
TILE(5, 4)
TILE(4, 4)
TILE(3, 4)
TILE(2, 4)
TILE(1, 4)
TILE(6, 1)
TILE(5, 1)
TILE(4, 1)
TILE(3, 1)
TILE(2, 1)
TILE(1, 1)

typedef void (*tile_fn)(float *, const float *, const float *, long, long, long, long, int);
static const tile_fn tiles4[7] = {0, tile_1x4, tile_2x4, tile_3x4, tile_4x4, tile_5x4, tile_6x4};
static const tile_fn tiles1[7] = {0, tile_1x1, tile_2x1, tile_3x1, tile_4x1, tile_5x1, tile_6x1};

// The rows of a are taken in blocks of about 512 KB, each block once against the whole column
// range: the block stays in L2 while the columns' rows of w stream past it.
void rk_gemm_nt(float *out, const float *a, const float *w, long m, long j0, long j1, long k, long lda, long ldw,
                long ldo, int acc) {
	long mb = (512 * 1024 / 4 / (k > 0 ? k : 1)) / 6 * 6;
	if (mb < 6) mb = 6;
	for (long i0 = 0; i0 < m; i0 += mb) {
		long i1 = i0 + mb < m ? i0 + mb : m;
		long j = j0;
		// While a group of 4 rows of w meets every tile of a, the next group is fetched into L2,
		// a share before each tile. A decode step reads each weight once, from memory, and the
		// processor's prefetcher does not run ahead from one row of w to the next: at 8 rows
		// the step waited on memory for a quarter of its time.
		long lines = (k + 15) / 16, total = 4 * lines, ntiles = (i1 - i0 + 5) / 6;
		long share = (total + ntiles - 1) / ntiles;
		for (; j + 4 <= j1; j += 4) {
			const float *next = j + 8 <= j1 ? w + (j + 4) * ldw : 0;
			long q = next ? 0 : total, r = 0, c = 0; // line q of the next group: row r, line c
			for (long i = i0; i < i1; i += 6) {
				for (long e = q + share < total ? q + share : total; q < e; q++) {
					_mm_prefetch((const char *)(next + r * ldw + c * 16), _MM_HINT_T1);
					if (++c == lines) c = 0, r++;
				}
				long mr = i1 - i < 6 ? i1 - i : 6;
				tiles4[mr](out + i * ldo + j, a + i * lda, w + j * ldw, k, lda, ldw, ldo, acc);
			}
		}
		for (; j < j1; j++)
			for (long i = i0; i < i1; i += 6) {
				long mr = i1 - i < 6 ? i1 - i : 6;
				tiles1[mr](out + i * ldo + j, a + i * lda, w + j * ldw, k, lda, ldw, ldo, acc);
			}
	}
}

void rk_gemm_nt_ref(float *out, const float *a, const float *w, long m, long j0, long j1, long k, long lda, long ldw,
                    long ldo, int acc) {
	for (long i = 0; i < m; i++)
		for (long j = j0; j < j1; j++) {
			float l[16] = {0};
			for (long kk = 0; kk < k; kk++) l[kk % 16] = fmaf(a[i * lda + kk], w[j * ldw + kk], l[kk % 16]);
			float h[8], q[4];
			for (int e = 0; e < 8; e++) h[e] = l[e] + l[e + 8];
			for (int e = 0; e < 4; e++) q[e] = h[e] + h[e + 4];
			float r = (q[0] + q[2]) + (q[1] + q[3]);
			out[i * ldo + j] = acc ? out[i * ldo + j] + r : r;
		}
}

