// A GEMM without packing: out = a·wᵀ (+ bias, + a residual), a (m, k), w (n, k), both
// row-major — a linear layer's forward, y = x·wᵀ + b, for a decode step (one token per
// sequence), a prefill, an LM-head chunk or a training batch; with a residual, a block's
// projection and the residual add after it in one pass over the output.
//
// Its order of summation is the contract of DESIGN §6.1: out[i][j] is a dot product of two
// contiguous rows, a[i] and w[j], computed in sixteen float lanes (element k in lane k mod 16,
// fused multiply-adds in k order, the last partial vector masked) and reduced by a fixed tree
// (lanes.h), then bias[j] + sum, then res + that. Nothing in it depends on m, on the other
// rows, on the columns a caller asks for or on how it blocks k: every forward product runs it,
// at every row count, so a row's output is the same bits in a decode step of 8 rows and in a
// training batch of 2000.
//
// OpenBLAS packs the weight matrix into its panel layout on every call; at a few dozen rows
// that copy costs as much as the multiplication, and a decode step does it for every weight
// of the model. Here the weights are read once, in place. Tiles of 6 rows of a × 4 rows of w,
// or 4 × 6 (or 8 × 3 at eight rows), keep 24 accumulators in registers, so that each vector
// loaded from w serves 6 (or 4) rows and each from a serves 4 (or 6) columns; the rows of w (at
// most 24 KB where the blocks are copied: a longer k is then taken in blocks) stay in L1 while
// every tile of a streams past them from L2. At a training batch's rows it runs at OpenBLAS's
// rate (k = 768) or close to it (k = 3072, its blocks copied: rk_gemm_nt's comment), as
// BenchmarkGemmSmall shows.
//
// rk_gemm_nt_ref is the same arithmetic in portable C (fmaf, the same lanes and tree), and
// rk_gemm_nt8 in AVX2 (a processor without AVX-512): the tests check the vector kernels
// against it bit for bit. Callers split the columns or the rows; no result depends on the
// split.
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "lanes.h"

// One tile: MR rows of a (at a, stride lda) by NR rows of w (at w, stride ldw), over k
// elements that are one block of the whole product's: the first block starts the
// accumulators, a later one resumes them from lanes (MR·NR·16 floats), a block that is not
// the last leaves them there, and the last one writes the sums into out (stride ldo), each as
// res[i][j] + (bias[j] + sum) when there is a residual res (same stride; it may be out) and a
// bias. The lanes see the same fused multiply-adds in the same order however k is blocked. MR
// and NR are constants at every call site, so the loops unroll.
//
// AREG set, each vector of a goes into a register once and serves the NR columns from there;
// otherwise GCC folds the load into each of the NR multiply-adds, which load it NR times. Where
// the tile's rows of a stay in L1, that costs: with AREG an 8-row decode step's products at
// k = 768, its LM head and the step take less time. Where they come from L2 (k = 3072), the
// down projection took more time with it in the step (though less alone, on an input not just
// written), and so did the 4 × 6 and 6 × 4 tiles at 64 rows: those keep the folded loads.
#define UNROLL _Pragma("GCC unroll 8")

#define TILE(MR, NR) TILE_(MR, NR, , 0)

#define TILE_(MR, NR, SUFFIX, AREG)                                                                                   \
	__attribute__((target("avx512f,avx512dq"))) static void tile_##MR##x##NR##SUFFIX(                               \
	    float *out, const float *a, const float *w, long k, long lda, long ldw, long ldo, const float *res, const float *bias, \
	    float *lanes, int first, int last, const char *pf, long npf) {                                          \
		__m512 s[MR][NR];                                                                                       \
		long per = (npf + k / 16) / (k / 16 + 1); /* prefetches per vector step, all issued by the end */     \
		UNROLL for (int i = 0; i < MR; i++)                                                                            \
			UNROLL for (int j = 0; j < NR; j++) s[i][j] =                                                          \
			    first ? _mm512_setzero_ps() : _mm512_load_ps(lanes + (i * NR + j) * 16);                         \
		long kk = 0;                                                                                            \
		for (; kk + 16 <= k; kk += 16) {                                                                        \
			for (long e = per; e > 0 && npf > 0; e--, npf--, pf += 64) _mm_prefetch(pf, _MM_HINT_T1);      \
			__m512 wv[NR];                                                                                  \
			UNROLL for (int j = 0; j < NR; j++) wv[j] = _mm512_loadu_ps(w + j * ldw + kk);                        \
			UNROLL for (int i = 0; i < MR; i++) {                                                                  \
				__m512 av = _mm512_loadu_ps(a + i * lda + kk);                                          \
				if (AREG) __asm__("" : "+v"(av)); /* may change av: GCC keeps it, not its load */  \
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
		for (; npf > 0; npf--, pf += 64) _mm_prefetch(pf, _MM_HINT_T1);                                         \
		if (!last) {                                                                                            \
			UNROLL for (int i = 0; i < MR; i++)                                                                    \
				UNROLL for (int j = 0; j < NR; j++) _mm512_store_ps(lanes + (i * NR + j) * 16, s[i][j]);      \
			return;                                                                                         \
		}                                                                                                       \
		if (NR < 4 && MR % 4 == 0) { /* four rows of a column per reduction */                                 \
			UNROLL for (int i = 0; i + 4 <= MR; i += 4)                                                            \
				UNROLL for (int j = 0; j < NR; j++) {                                                          \
					__m128 r = tree16x4(s[i][j], s[i + 1 < MR ? i + 1 : 0][j], s[i + 2 < MR ? i + 2 : 0][j],       \
					                    s[i + 3 < MR ? i + 3 : 0][j]);                                   \
					if (bias) r = _mm_add_ps(_mm_set1_ps(bias[j]), r);                                   \
					float l[4];                                                                          \
					_mm_storeu_ps(l, r);                                                                 \
					for (int e = 0; e < 4; e++)                                                          \
						out[(i + e) * ldo + j] = res ? res[(i + e) * ldo + j] + l[e] : l[e];         \
				}                                                                                        \
			return;                                                                                          \
		}                                                                                                       \
		UNROLL for (int i = 0; i < MR; i++) {                                                                          \
			int j = 0;                                                                                      \
			UNROLL for (; j + 4 <= NR; j += 4) {                                                                   \
				__m128 r = tree16x4(s[i][j], s[i][j + 1 < NR ? j + 1 : 0], s[i][j + 2 < NR ? j + 2 : 0],      \
				                    s[i][j + 3 < NR ? j + 3 : 0]);                                      \
				if (bias) r = _mm_add_ps(_mm_loadu_ps(bias + j), r);                                        \
				if (res) r = _mm_add_ps(_mm_loadu_ps(res + i * ldo + j), r);                                \
				_mm_storeu_ps(out + i * ldo + j, r);                                                        \
			}                                                                                               \
			UNROLL for (; j < NR; j++) {                                                                           \
				float r = tree16(s[i][j]);                                                              \
				if (bias) r = bias[j] + r;                                                              \
				out[i * ldo + j] = res ? res[i * ldo + j] + r : r;                                      \
			}                                                                                               \
		}                                                                                                       \
	}

TILE(8, 3)
TILE_(8, 3, r, 1)
TILE(4, 6)
TILE(3, 6)
TILE(2, 6)
TILE(1, 6)
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

typedef void (*tile_fn)(float *, const float *, const float *, long, long, long, long, const float *, const float *,
                        float *, int, int, const char *, long);
static const tile_fn tiles3[9] = {0, 0, 0, 0, 0, 0, 0, 0, tile_8x3};
static const tile_fn tiles3r[9] = {0, 0, 0, 0, 0, 0, 0, 0, tile_8x3r}; // rows of a in L1: AREG
static const tile_fn tiles6[5] = {0, tile_1x6, tile_2x6, tile_3x6, tile_4x6};
static const tile_fn tiles4[7] = {0, tile_1x4, tile_2x4, tile_3x4, tile_4x4, tile_5x4, tile_6x4};
static const tile_fn tiles1[7] = {0, tile_1x1, tile_2x1, tile_3x1, tile_4x1, tile_5x1, tile_6x1};

// K blocking: above KBLOCK_MIN, a product that copies its blocks (a prefill's or a training
// batch's rows, with scratch) takes k in blocks of KBLOCK, so that the 6 rows of w of a column
// group and the 4 rows of a tile (20 KB) share L1 while every tile of the row block meets the
// group: whole, at k = 3072, they would not fit, and w would come again from L2 for each tile.
// The tiles' accumulators wait in lanes between blocks: at most KBLOCK_TILES tiles of 4 rows,
// the rows of a block of a. A product without copies (a decode step's, at most ntCopyRows
// rows) takes k whole: in blocks, its few rows would read the weights from memory once per row
// block and move every tile's lanes to memory and back at every block of k, where a decode
// step waits on memory already (BenchmarkDecode124M).
#define KBLOCK 512
#define KBLOCK_MIN 1024
#define KBLOCK_TILES 16
#define KBLOCK8 768      // the AVX2 kernel's k blocks
#define KBLOCK8_TILES 16 // and its tiles of 3 rows
#define AREG_MAX_K (32 * 1024 / (8 * 4)) // 8 rows of a in 32 KB of L1: the 8 × 3 tile loads a into registers (TILE)

// groups runs columns j, j+nr, … while a whole group of nr fits before j1, each group against
// every tile of mr rows of a in [i0, i1), and returns the first column left over. While a
// group of w meets the tiles, the next group is fetched into L2, a share by each tile, spread
// over its k loop: a decode step reads each weight once, from memory, and the processor's
// prefetcher does not run ahead from one row of w to the next (at 8 rows the step waited on
// memory for much of its time). Issued in a burst before each tile, the share filled the
// line-fill buffers and the prefetch instructions themselves stalled.
__attribute__((target("avx512f,avx512dq"))) static long groups(const tile_fn *tiles, int mr, int nr, float *out,
                                                                 const float *a, const float *w, long i0, long i1,
                                                                 long j, long j1, long k, long kc, long lda,
                                                                 long ldw, long ldo, const float *res,
                                                                 const float *bias, float (*lanes)[24 * 16],
                                                                 float *wbuf) {
	// The next group's rows, as one run of cache lines from the first's start to the last's end
	// (exactly its rows when ldw = k, as for a model's weights).
	long total = ((nr - 1) * ldw + k) * 4 / 64 + 1, ntiles = (i1 - i0 + mr - 1) / mr;
	long calls = ntiles * ((k + kc - 1) / kc);
	long share = (total + calls - 1) / calls;
	for (; j + nr <= j1; j += nr) {
		const char *next = j + 2 * nr <= j1 ? (const char *)(w + (j + nr) * ldw) : 0;
		long q = next ? 0 : total; // lines of the next group prefetched so far
		for (long k0 = 0; k0 < k || k0 == 0; k0 += kc) {
			long kn = k - k0 < kc ? k - k0 : kc;
			int first = k0 == 0, last = k0 + kn >= k;
			const float *wg = w + j * ldw + k0;
			long lw = ldw;
			if (wbuf) { // the group's block of w, its rows one after the other
				for (int r = 0; r < nr; r++) memcpy(wbuf + r * kn, wg + r * ldw, kn * sizeof(float));
				wg = wbuf;
				lw = kn;
			}
			for (long i = i0, t = 0; i < i1; i += mr, t++) {
				long n = q + share < total ? share : total - q;
				long m = i1 - i < mr ? i1 - i : mr;
				tiles[m](out + i * ldo + j, a + i * lda + k0, wg, kn, lda, lw, ldo, res ? res + i * ldo + j : 0,
				         bias ? bias + j : 0, lanes[t % KBLOCK_TILES], first, last, next ? next + q * 64 : 0, n);
				q += n;
			}
		}
	}
	return j;
}

// The rows of a are taken in blocks, each block once against the whole column range: the
// block stays in L2 while the columns' rows of w stream past it, and each weight row comes
// from memory once per block. Without scratch (a decode step's few rows) a block holds up to
// about 1.5 MB of a, all of a decode step's at k = 3072. With scratch (a prefill's or a
// training batch's rows) it holds at most 640 KB, and with k blocks at most KBLOCK_TILES tiles:
// every column group reads the whole block, so a block larger than L2 (with w's group and the
// lanes beside it) would evict itself on every pass. The columns go in groups of 6 against
// tiles of 4 rows (a vector of a serves 6 columns: a third less of a read from L2 than with
// tiles of 6 × 4, the stream that bounds a product whose rows of a come from L2), what is
// left in groups of 4 against tiles of 6 rows, then one by one. A block of exactly 8 rows (a decode step of one prompt's 8
// samples, which waits on memory) goes first in groups of 3 against one tile of all 8 rows:
// each vector of w is loaded once and serves every row, and the 8 rows of a (24 KB at
// k = 768) stay in L1, where with tiles of 4 × 6 they and a group of w (18 KB) did not both
// fit. That makes such a decode step faster; at 64 rows, where the products are bound by
// arithmetic rather than memory, the same tiles are slower (BenchmarkDecode124M's rows=8 and
// rows=64).
//
// With scratch (rk_gemm_nt_scratch(k) floats), a k-blocked product first copies each block of
// rows of a to a row stride of k + 16, and each group's block of w to consecutive rows. At
// k = 3072 the rows of both are 12 KB apart, a multiple of 4 KB: every row of a tile and of a
// group falls in the same sets of L1 at each k, more of them than its ways, so the copied
// product is faster (BenchmarkGemmSmall's small and copied at 2304x3072x768). The copies move
// numbers, not sums: the result is the same bits.
__attribute__((target("avx512f,avx512dq"))) void rk_gemm_nt(float *out, const float *a, const float *w, long m,
                                                              long j0, long j1, long k, long lda, long ldw, long ldo,
                                                              const float *res, const float *bias, float *scratch) {
	long kc = scratch && k > KBLOCK_MIN ? KBLOCK : (k > 0 ? k : 1); // K blocking, above
	long mb = ((scratch ? 640 : 1536) * 1024 / 4 / (k > 0 ? k : 1)) / 12 * 12;
	if (mb < 12) mb = 12;
	if (kc < k && mb > 4 * KBLOCK_TILES) mb = 4 * KBLOCK_TILES;
	float lanes[KBLOCK_TILES][24 * 16] __attribute__((aligned(64)));
	float *abuf = 0, *wbuf = 0;
	const tile_fn *tiles8 = k <= AREG_MAX_K ? tiles3r : tiles3; // a block of exactly 8 rows
	if (scratch && kc < k) {
		abuf = scratch;
		wbuf = scratch + 4 * KBLOCK_TILES * (k + 16);
	}
	for (long i0 = 0; i0 < m; i0 += mb) {
		long i1 = i0 + mb < m ? i0 + mb : m;
		const float *ab = a;
		long la = lda;
		if (abuf) {
			for (long i = i0; i < i1; i++) memcpy(abuf + (i - i0) * (k + 16), a + i * lda, k * sizeof(float));
			ab = abuf - i0 * (k + 16); // row i of a at ab + i·la
			la = k + 16;
		}
		long j = j0;
		if (i1 - i0 == 8) j = groups(tiles8, 8, 3, out, ab, w, i0, i1, j, j1, k, kc, la, ldw, ldo, res, bias, lanes, wbuf);
		j = groups(tiles6, 4, 6, out, ab, w, i0, i1, j, j1, k, kc, la, ldw, ldo, res, bias, lanes, kc < k ? wbuf : 0);
		j = groups(tiles4, 6, 4, out, ab, w, i0, i1, j, j1, k, kc, la, ldw, ldo, res, bias, lanes, wbuf);
		for (; j < j1; j++)
			for (long i = i0; i < i1; i += 6) {
				long mr = i1 - i < 6 ? i1 - i : 6;
				tiles1[mr](out + i * ldo + j, ab + i * la, w + j * ldw, k, la, ldw, ldo, res ? res + i * ldo + j : 0,
				           bias ? bias + j : 0, lanes[0], 1, 1, 0, 0);
			}
	}
}

long rk_gemm_nt_scratch(long k) { return 4 * KBLOCK_TILES * (k + 16) + 6 * KBLOCK; }

// The same arithmetic in eight-float halves (AVX2 and FMA, for processors without AVX-512):
// lane e of the sixteen is lane e mod 8 of the low half (e < 8) or of the high one, so the
// halves added are the tree's first level, and the rest of the tree follows in a 128-bit
// register. Tiles of 3 rows of a × 2 rows of w: twelve accumulators of the sixteen registers,
// each half of a step taken on its own so that two vectors of w and one of a are live
// beside them (10 loads for 12 FMAs). Blocks of k and rows as in the sixteen-lane kernel,
// and the next pair of w's rows fetched into L2 by the first tile of a pair. Even on a processor
// that runs a 512-bit FMA as two 256-bit halves (AMD's Zen 4), and so has the same FMA rate on
// either path, GPT-2 124M's decode steps and forward take longer on this path than on the
// sixteen-lane one (BenchmarkGemmSmall's avx2 variant); with tiles of 2 × 2, whose
// accumulators the compiler kept on the stack, far longer. The prefetch and the k blocks each
// shorten the 8-row step. Where k needs no blocks and there are more than 8 rows, the columns
// go in blocks whose rows of w (384 KB) stay in L2, and each tile of a, in L1, meets a whole
// block, rather than each pair of w's rows meeting every tile of a from L2: a faster decode step
// at 64 rows and forward on the AVX2 path (at 8 rows slower, so not there).
// The halves' sixteen lanes are added by lanes.h's tree8x2.

// One tile as TILE's (lanes, first and last resume a block's accumulators); pf, when set, is
// the next pair of w's rows at this block's k, fetched into L2 a line of each per step.
#define TILE8(MR, NR)                                                                                                  \
	__attribute__((target("avx2,fma"))) static void tile8_##MR##x##NR(float *out, const float *a, const float *w, long k, \
	                                                                   long lda, long ldw, long ldo, const float *res,      \
	                                                                   const float *bias, const float *pf, float *lanes,  \
	                                                                   int first, int last) {                             \
		__m256 lo[MR][NR], hi[MR][NR];                                                                                 \
		UNROLL for (int i = 0; i < MR; i++)                                                                            \
			UNROLL for (int j = 0; j < NR; j++) {                                                                  \
				lo[i][j] = first ? _mm256_setzero_ps() : _mm256_load_ps(lanes + (i * NR + j) * 16);            \
				hi[i][j] = first ? _mm256_setzero_ps() : _mm256_load_ps(lanes + (i * NR + j) * 16 + 8);        \
			}                                                                                                      \
		long kk = 0;                                                                                                   \
		for (; kk + 16 <= k; kk += 16) { /* each half on its own: NR + 1 registers beside the accumulators */          \
			if (pf)                                                                                                \
				UNROLL for (int j = 0; j < NR; j++) _mm_prefetch((const char *)(pf + j * ldw + kk), _MM_HINT_T1);     \
			__m256 wv[NR];                                                                                         \
			UNROLL for (int j = 0; j < NR; j++) wv[j] = _mm256_loadu_ps(w + j * ldw + kk);                         \
			UNROLL for (int i = 0; i < MR; i++) {                                                                  \
				__m256 av = _mm256_loadu_ps(a + i * lda + kk);                                                 \
				__asm__("" : "+x"(av)); /* one load of av for all NR columns, not one folded into each */    \
				UNROLL for (int j = 0; j < NR; j++) lo[i][j] = _mm256_fmadd_ps(av, wv[j], lo[i][j]);           \
			}                                                                                                      \
			UNROLL for (int j = 0; j < NR; j++) wv[j] = _mm256_loadu_ps(w + j * ldw + kk + 8);                     \
			UNROLL for (int i = 0; i < MR; i++) {                                                                  \
				__m256 av = _mm256_loadu_ps(a + i * lda + kk + 8);                                             \
				__asm__("" : "+x"(av));                                                                        \
				UNROLL for (int j = 0; j < NR; j++) hi[i][j] = _mm256_fmadd_ps(av, wv[j], hi[i][j]);           \
			}                                                                                                      \
		}                                                                                                              \
		if (kk < k) { /* the last partial vector: masked lanes load 0, and fma(0, 0, l) = l */                        \
			__m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);                                               \
			__m256i ml = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(k - kk)), idx);                                \
			__m256i mh = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(k - kk - 8)), idx);                            \
			__m256 wl[NR], wh[NR];                                                                                 \
			UNROLL for (int j = 0; j < NR; j++) {                                                                  \
				wl[j] = _mm256_maskload_ps(w + j * ldw + kk, ml);                                              \
				wh[j] = _mm256_maskload_ps(w + j * ldw + kk + 8, mh);                                          \
			}                                                                                                      \
			UNROLL for (int i = 0; i < MR; i++) {                                                                  \
				__m256 al = _mm256_maskload_ps(a + i * lda + kk, ml), ah = _mm256_maskload_ps(a + i * lda + kk + 8, mh); \
				UNROLL for (int j = 0; j < NR; j++) {                                                          \
					lo[i][j] = _mm256_fmadd_ps(al, wl[j], lo[i][j]);                                       \
					hi[i][j] = _mm256_fmadd_ps(ah, wh[j], hi[i][j]);                                       \
				}                                                                                              \
			}                                                                                                      \
		}                                                                                                              \
		if (!last) {                                                                                                   \
			UNROLL for (int i = 0; i < MR; i++)                                                                    \
				UNROLL for (int j = 0; j < NR; j++) {                                                          \
					_mm256_store_ps(lanes + (i * NR + j) * 16, lo[i][j]);                                  \
					_mm256_store_ps(lanes + (i * NR + j) * 16 + 8, hi[i][j]);                              \
				}                                                                                              \
			return;                                                                                                \
		}                                                                                                              \
		UNROLL for (int i = 0; i < MR; i++)                                                                            \
			UNROLL for (int j = 0; j < NR; j++) {                                                                  \
				float r = tree8x2(lo[i][j], hi[i][j]);                                                         \
				if (bias) r = bias[j] + r;                                                                     \
				out[i * ldo + j] = res ? res[i * ldo + j] + r : r;                                             \
			}                                                                                                      \
	}

TILE8(3, 2)
TILE8(2, 2)
TILE8(1, 2)
TILE8(3, 1)
TILE8(2, 1)
TILE8(1, 1)

typedef void (*tile8_fn)(float *, const float *, const float *, long, long, long, long, const float *, const float *,
                         const float *, float *, int, int);
static const tile8_fn tiles8[4][3] = {{0, 0, 0}, {0, tile8_1x1, tile8_1x2}, {0, tile8_2x1, tile8_2x2}, {0, tile8_3x1, tile8_3x2}};

__attribute__((target("avx2,fma"))) void rk_gemm_nt8(float *out, const float *a, const float *w, long m, long j0, long j1,
                                                       long k, long lda, long ldw, long ldo, const float *res,
                                                       const float *bias) {
	long kc = k > KBLOCK_MIN ? KBLOCK8 : (k > 0 ? k : 1);
	long mb = (512 * 1024 / 4 / (k > 0 ? k : 1)) / 3 * 3;
	if (mb < 3) mb = 3;
	if (kc < k && mb > 3 * KBLOCK8_TILES) mb = 3 * KBLOCK8_TILES;
	float lanes[KBLOCK8_TILES][6 * 16] __attribute__((aligned(32)));
	if (kc >= k && m > 8) { // w's columns in blocks held in L2, each tile of a against a whole block
		long nb = (384 * 1024 / 4 / (k > 0 ? k : 1)) / 2 * 2;
		if (nb < 2) nb = 2;
		for (long i0 = 0; i0 < m; i0 += mb) {
			long i1 = i0 + mb < m ? i0 + mb : m;
			for (long jb = j0; jb < j1; jb += nb) {
				long jbe = jb + nb < j1 ? jb + nb : j1;
				for (long i = i0; i < i1; i += 3) {
					int mr = i1 - i < 3 ? i1 - i : 3;
					for (long j = jb; j < jbe; j += 2) {
						int nr = j + 2 <= jbe ? 2 : 1;
						const float *next = i == i0 && j + 4 <= j1 ? w + (j + 2) * ldw : 0;
						tiles8[mr][nr](out + i * ldo + j, a + i * lda, w + j * ldw, k, lda, ldw, ldo,
						               res ? res + i * ldo + j : 0, bias ? bias + j : 0, next, lanes[0], 1, 1);
					}
				}
			}
		}
		return;
	}
	for (long i0 = 0; i0 < m; i0 += mb) {
		long i1 = i0 + mb < m ? i0 + mb : m;
		for (long j = j0; j < j1; j += 2) {
			int nr = j + 2 <= j1 ? 2 : 1;
			const float *next = j + 4 <= j1 ? w + (j + 2) * ldw : 0;
			for (long k0 = 0; k0 < k || k0 == 0; k0 += kc) {
				long kn = k - k0 < kc ? k - k0 : kc;
				for (long i = i0, t = 0; i < i1; i += 3, t++) {
					int mr = i1 - i < 3 ? i1 - i : 3;
					tiles8[mr][nr](out + i * ldo + j, a + i * lda + k0, w + j * ldw + k0, kn, lda, ldw, ldo,
					               res ? res + i * ldo + j : 0, bias ? bias + j : 0, i == i0 && next ? next + k0 : 0,
					               lanes[t % KBLOCK8_TILES], k0 == 0, k0 + kn >= k);
				}
			}
		}
	}
}

void rk_gemm_nt_ref(float *out, const float *a, const float *w, long m, long j0, long j1, long k, long lda, long ldw,
                    long ldo, const float *res, const float *bias) {
	for (long i = 0; i < m; i++)
		for (long j = j0; j < j1; j++) {
			float l[16] = {0};
			for (long kk = 0; kk < k; kk++) l[kk % 16] = fmaf(a[i * lda + kk], w[j * ldw + kk], l[kk % 16]);
			float r = tree16_ref(l);
			if (bias) r = bias[j] + r;
			out[i * ldo + j] = res ? res[i * ldo + j] + r : r;
		}
}
