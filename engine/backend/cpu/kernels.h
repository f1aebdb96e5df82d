// The C side of the CPU backend: the inner loops (kernels.c), decode attention
// (decode_attention.c) and the forward's product (gemm_small.c), each handling one chunk; the
// processor's features and the switches on them (features.c), which those files ask and which
// asks none of them; OpenBLAS's kernel family (blas_core.c).
#ifndef ROOKSCRIPT_KERNELS_H
#define ROOKSCRIPT_KERNELS_H

// out = gelu(x), tanh approximation.
void rk_gelu(float *out, const float *x, long n);
// rk_gelu over m rows of cols elements, row stride ld (out's and x's).
void rk_gelu_rows(float *out, const float *x, long m, long cols, long ld);
// dinp = gelu'(x)·dout.
void rk_gelu_backward(float *dinp, const float *x, const float *dout, long n);
// One AdamW update (torch.optim.AdamW arithmetic) over n elements.
void rk_adamw(float *p, const float *g, float *m, float *v, long n, float b1, float b2,
              float eps, float decay, float step, float inv_sqrt_bc2);
// max over i of x[i]·scale (NaN if any element is NaN).
float rk_max_scaled(const float *x, long n, float scale);
// s = Σ e^{x·scale − m}, t = Σ e^{x·scale − m}·(x·scale), in double.
void rk_exp_sums(const float *x, long n, float scale, float m, double *s, double *t);
// x ← scale·(−glogp·p − gent·p·(log p + h)) with log p = x·scale − lse; the caller adds the
// target's glogp·scale.
void rk_logprob_backward(float *x, long n, float scale, float lse, float glogp, float gent, float h);

// out = softmax(x·scale): returns m = max x·scale and writes s = Σ e^{x·scale − m}, summed
// as rk_exp_sums sums (the row's log-sum-exp is m + log s).
float rk_softmax(float *out, const float *x, long n, float scale, double *s);

// Decode attention of one query row (q: nh heads of hd) over n1 cached positions at k1, v1
// (a shared prefix), then n2 at k2, v2 (row stride ld), all heads; scratch holds
// nh·(n1 + n2) floats. lse, if not NULL, receives each head's log-sum-exp of the scaled
// scores (nh floats). The training forward runs it too, row by row over a packed batch, so
// that a row's attention is the same sums whether it is decoded or trained on.
void rk_attention_decode(float *out, const float *q, const float *k1, const float *v1, long n1, const float *k2,
                         const float *v2, long n2, long nh, long hd, long ld, float scale, float *scratch, float *lse);

// rk_attention_decode, fetching into L2 meanwhile the nn floats of keys at nk and of values at
// nv (nk and nv NULL: none): the next row's own, which it reads from memory.
void rk_attention_decode_ahead(float *out, const float *q, const float *k1, const float *v1, long n1, const float *k2,
                               const float *v2, long n2, long nh, long hd, long ld, float scale, float *scratch,
                               float *lse, const float *nk, const float *nv, long nn);

// rk_attention_decode_ahead in sixteen lanes (AVX-512, decode_attention.c), which it runs when
// rk_decode16 says the processor has it (and rk_set_decode16 has not switched it off);
// rk_attention_decode_ref is its arithmetic in portable C, bit for bit.
void rk_attention_decode16(float *out, const float *q, const float *k1, const float *v1, long n1, const float *k2,
                           const float *v2, long n2, long nh, long hd, long ld, float scale, float *scratch, float *lse,
                           const float *nk, const float *nv, long nn);
void rk_attention_decode_ref(float *out, const float *q, const float *k1, const float *v1, long n1, const float *k2,
                             const float *v2, long n2, long nh, long hd, long ld, float scale, float *scratch, float *lse);
// rk_attention_decode16's arithmetic in eight-float halves (AVX2 and FMA), bit for bit.
void rk_attention_decode8(float *out, const float *q, const float *k1, const float *v1, long n1, const float *k2,
                          const float *v2, long n2, long nh, long hd, long ld, float scale, float *scratch, float *lse,
                          const float *nk, const float *nv, long nn);
int rk_decode16(void);
void rk_set_decode16(int on);

// rk_attention_decode for R query rows of one sequence (the training forward's): row i, at
// q + i·ldq, attends over its first n + i positions (n1 of them at k1, v1, the rest at k2, v2),
// writing out + i·ldo and lse + i·nh (lse may be NULL): each row exactly as
// rk_attention_decode computes it, several rows sharing each key and value loaded where the
// sixteen-lane path runs with heads of 16, 32, 48 or 64 channels. scratch holds 4·nh·(n + R)
// floats.
void rk_attention_rows(float *out, long ldo, const float *q, long ldq, long R, const float *k1, const float *v1, long n1,
                       const float *k2, const float *v2, long n, long nh, long hd, long ld, float scale, float *scratch,
                       float *lse);

// The attention backward over a score block of t query rows (row stride w) whose row r sees
// its first n0 + r + 1 keys: a continuation of n0 prefix rows, causally (n0 = 0 for a
// sequence of its own). rk_attention_probs recomputes the probabilities from the scores and
// the forward's log-sum-exps (lse[r·ls]), the masked rest 0; rk_attention_dscores turns dP
// into dS = P ⊙ (dP − D_r) in place, D_r = dy_r·y_r over hd channels (dy, y: row stride ld).
void rk_attention_probs(float *p, long t, long w, long n0, const float *lse, long ls);
void rk_attention_dscores(float *dp, const float *p, long t, long w, long n0, const float *dy, const float *y, long ld,
                          long hd);

// LayerNorm forward of n rows of c channels (layernorm.go states the arithmetic): out, and
// each row's mean and 1/σ.
void rk_layernorm(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b, long n, long c,
                  float eps);
// Its backward over n rows: dinp += the input gradient, and each row's dw, db terms added into
// dw, db in row order (layernorm.go states the arithmetic).
void rk_layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *x, const float *w,
                           const float *mean, const float *rstd, long n, long c);

// acc[c] += Σ_i x[i·ld + c] for c < cols, each column summed over its n rows in order.
void rk_col_sums(float *acc, const float *x, long n, long ld, long cols);

// out[i][j] = res[i][j] + (bias[j] + Σ_k a[i][k]·w[j][k]) for rows i < m and columns
// j0 <= j < j1; row strides lda, ldw, ldo (res has out's; it may be out itself). res and bias
// may be NULL for none (gemm_small.c). Every path sums a[i]·w[j] in the same order: element k
// in lane k mod 16, fused multiply-adds in k order, the lanes added by lanes.h's tree.
// rk_gemm_nt needs AVX-512 (rk_has_avx512); scratch, of rk_gemm_nt_scratch(k) floats, or
// NULL, lets it copy blocks of a and w where their strides would thrash L1. rk_gemm_nt8 needs
// AVX2 and FMA (rk_has_avx2_fma); rk_gemm_nt_ref is the arithmetic in portable C.
void rk_gemm_nt(float *out, const float *a, const float *w, long m, long j0, long j1, long k, long lda, long ldw,
                long ldo, const float *res, const float *bias, float *scratch);
long rk_gemm_nt_scratch(long k);
void rk_gemm_nt8(float *out, const float *a, const float *w, long m, long j0, long j1, long k, long lda, long ldw,
                 long ldo, const float *res, const float *bias);
void rk_gemm_nt_ref(float *out, const float *a, const float *w, long m, long j0, long j1, long k, long lda, long ldw,
                    long ldo, const float *res, const float *bias);

// The processor's features (features.c). rk_has_avx2 reports whether the AVX2 paths run;
// rk_set_avx2(0) forces the scalar paths (tests use it to check that both agree bit for bit).
// rk_has_avx512 says whether the processor has AVX-512 (F and DQ: the sixteen-lane kernels);
// rk_set_avx512(0) leaves the AVX2 paths where kernels.c has sixteen-lane ones (tests compare
// the two); rk_avx512_on says whether kernels.c runs its sixteen-lane paths. rk_has_avx2_fma
// says whether the processor has AVX2 and FMA (the eight-lane paths' need).
int rk_has_avx2(void);
void rk_set_avx2(int on);
int rk_has_avx512(void);
void rk_set_avx512(int on);
int rk_avx512_on(void);
int rk_has_avx2_fma(void);

// rk_cpu_features returns the RK_* bits of the features the processor and the operating
// system support: those that decide OpenBLAS's kernel family (blasfamily.go).
enum {
	RK_AVX2 = 1 << 0,
	RK_FMA = 1 << 1,
	RK_AVX512F = 1 << 2,
	RK_AVX512BW = 1 << 3,
	RK_AVX512DQ = 1 << 4,
	RK_AVX512VL = 1 << 5,
	RK_AVX512BF16 = 1 << 6,
};
int rk_cpu_features(void);

// OpenBLAS's kernel family (blas_core.c): rk_blas_set_core makes OpenBLAS run the kernels of
// family core, as OPENBLAS_CORETYPE=core at load would have, and rk_blas_own_core makes it
// run those it chooses itself at load; each returns the family OpenBLAS then runs.
const char *rk_blas_set_core(const char *core);
const char *rk_blas_own_core(void);

// Copies n rows' keys and values into the KV cache (kernels.c).
void rk_kv_write(float *kc, float *vc, const float *src, const int *slot, const int *pos, long n, long c, long cap);

#endif
