// Log-softmax over the vocabulary, gathered at the target token, and its backward.
#include "common.cuh"

// One block per row (blockDim a multiple of 32). With z = logits·inv_temp:
// lse = log Σ e^z, logp = z[target] − lse and, if ent is not null, H = lse − Σ e^{z−m}z / Σ e^{z−m}.
// The exponentials are float, their sums double (each thread strides the row in order, then a
// fixed butterfly), as the CPU backend does.
extern "C" __global__ void rkcu_logprobs_forward(float* lse, float* logp, float* ent, const float* logits,
                                                 const int* targets, int rows, int v, float inv_temp) {
	for (int r = blockIdx.x; r < rows; r += gridDim.x) {
		const float* x = logits + (long long)r * v;
		float m = -INFINITY;
		for (int k = threadIdx.x; k < v; k += blockDim.x) m = rkcu_max_nan(m, x[k] * inv_temp);
		m = block_max_nan(m);
		double s = 0.0, t = 0.0;
		for (int k = threadIdx.x; k < v; k += blockDim.x) {
			float z = x[k] * inv_temp;
			float e = expf(z - m);
			s += (double)e;
			t += (double)(e * z);
		}
		s = block_sum(s);
		t = block_sum(t);
		if (threadIdx.x == 0) {
			float l = m + (float)log(s);
			lse[r] = l;
			logp[r] = x[targets[r]] * inv_temp - l;
			if (ent) ent[r] = l - (float)(t / s);
		}
	}
}

// Overwrites logits with dL/dlogits given dL/dlogp and, if dent is not null, dL/dH:
// dL/dz_k = dlogp·(1[k = target] − p_k) − dent·p_k·(log p_k + H), dL/dlogits = inv_temp·dL/dz.
extern "C" __global__ void rkcu_logprobs_backward(float* logits, const float* lse, const float* ent, const float* dlogp,
                                                  const float* dent, const int* targets, int rows, int v,
                                                  float inv_temp) {
	for (int r = blockIdx.y; r < rows; r += gridDim.y) {
		float* x = logits + (long long)r * v;
		float l = lse[r], gl = dlogp[r];
		float ge = 0.0f, h = 0.0f;
		if (dent) {
			ge = dent[r];
			h = ent[r];
		}
		int tgt = targets[r];
		for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < v; k += gridDim.x * blockDim.x) {
			float lp = x[k] * inv_temp - l;
			float p = expf(lp);
			float d = -gl * p - ge * p * (lp + h);
			float g = d * inv_temp;
			if (k == tgt) g += gl * inv_temp;
			x[k] = g;
		}
	}
}

// The sampler's distribution, one block per row: probs = softmax(logits·inv_temp) and
// lse = log Σ e^{logits·inv_temp}, summed in double like rkcu_logprobs_forward.
extern "C" __global__ void rkcu_softmax(float* probs, float* lse, const float* logits, int rows, int v, float inv_temp) {
	for (int r = blockIdx.x; r < rows; r += gridDim.x) {
		const float* x = logits + (long long)r * v;
		float* p = probs + (long long)r * v;
		float m = -INFINITY;
		for (int k = threadIdx.x; k < v; k += blockDim.x) m = rkcu_max_nan(m, x[k] * inv_temp);
		m = block_max_nan(m);
		double s = 0.0;
		for (int k = threadIdx.x; k < v; k += blockDim.x) {
			float e = expf(x[k] * inv_temp - m);
			p[k] = e; // this thread rescales its own elements below
			s += (double)e;
		}
		s = block_sum(s);
		float inv = (float)(1.0 / s);
		for (int k = threadIdx.x; k < v; k += blockDim.x) p[k] *= inv;
		if (threadIdx.x == 0) lse[r] = m + (float)log(s);
	}
}
