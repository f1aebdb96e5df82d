// Vectorisable inner loops of the CPU backend (kernels.c); each handles one chunk.
#ifndef ROOKSCRIPT_KERNELS_H
#define ROOKSCRIPT_KERNELS_H

// out = gelu(x), tanh approximation.
void rk_gelu(float *out, const float *x, long n);
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

// out = softmax(x·scale), returning log Σ e^{x·scale} (the row's log-sum-exp).
float rk_softmax(float *out, const float *x, long n, float scale);

// Decode attention of one query row (q: nh heads of hd) over n1 cached positions at k1, v1
// (a shared prefix), then n2 at k2, v2 (row stride ld), all heads; scratch holds
// nh·(n1 + n2) floats.
void rk_attention_decode(float *out, const float *q, const float *k1, const float *v1, long n1, const float *k2,
                         const float *v2, long n2, long nh, long hd, long ld, float scale, float *scratch);

// out[i][j] = Σ_k a[i][k]·w[j][k] (added to out when acc is set) for rows i < m and columns
// j0 <= j < j1; row strides lda, ldw, ldo (gemm_small.c). rk_gemm_nt needs AVX-512
// (rk_has_avx512); rk_gemm_nt_ref is its arithmetic in portable C, bit for bit.
void rk_gemm_nt(float *out, const float *a, const float *w, long m, long j0, long j1, long k, long lda, long ldw,
                long ldo, int acc);
void rk_gemm_nt_ref(float *out, const float *a, const float *w, long m, long j0, long j1, long k, long lda, long ldw,
                    long ldo, int acc);
int rk_has_avx512(void);
// Selects OpenBLAS's kernels for the processor's family when OpenBLAS fell back to its
// Prescott ones for a processor it does not know (blas_core.c); returns the kernels' name.
const char *rk_blas_fix_core(void);
// dst[c·ldd + r] = src[r·lds + c] for r < rows, c < cols.
void rk_transpose(float *dst, const float *src, long rows, long cols, long lds, long ldd);

// rk_has_avx2 reports whether the AVX2 paths run; rk_set_avx2(0) forces the scalar paths
// (tests use it to check that both agree bit for bit).
int rk_has_avx2(void);
void rk_set_avx2(int on);

#endif
