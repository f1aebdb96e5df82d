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

// Decode attention of one query row (q: nh heads of hd) over n cached positions k, v (row
// stride ld), all heads; scratch holds n floats.
void rk_attention_decode(float *out, const float *q, const float *k, const float *v, long n, long nh, long hd,
                         long ld, float scale, float *scratch);

// rk_has_avx2 reports whether the AVX2 paths run; rk_set_avx2(0) forces the scalar paths
// (tests use it to check that both agree bit for bit).
int rk_has_avx2(void);
void rk_set_avx2(int on);

#endif
