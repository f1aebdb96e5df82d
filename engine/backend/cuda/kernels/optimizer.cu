// AdamW and the squared-norm reduction behind gradient clipping.
#include "common.cuh"

// One AdamW update with torch.optim.AdamW's arithmetic; decay = 1 − lr·wd, step = lr/bc1 and
// inv_sqrt_bc2 = 1/√bc2 come from the host, computed as the CPU backend computes them.
extern "C" __global__ void rkcu_adamw(float* p, const float* g, float* m, float* v, long long n, float b1, float b2,
                                      float eps, float decay, float step, float inv_sqrt_bc2) {
	RKCU_GRID_LOOP(i, n) {
		float gi = g[i];
		float mi = b1 * m[i] + (1.0f - b1) * gi;
		float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
		m[i] = mi;
		v[i] = vi;
		p[i] = p[i] * decay - step * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
	}
}

// Σx² in double, phase 1: partial[k] = Σ over elements [k·chunk, (k+1)·chunk), blocks taking
// chunks in a grid-stride loop. The partition depends on n and chunk only, never on the grid
// or the device.
extern "C" __global__ void rkcu_sumsq_partial(double* partial, const float* x, long long n, int chunk) {
	long long chunks = (n + chunk - 1) / chunk;
	for (long long k = blockIdx.x; k < chunks; k += gridDim.x) {
		long long lo = k * chunk;
		long long hi = lo + chunk < n ? lo + chunk : n;
		double s = 0.0;
		for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x) {
			double xi = x[i];
			s += xi * xi;
		}
		s = block_sum(s);
		if (threadIdx.x == 0) partial[k] = s;
	}
}

// Phase 2, one block: out[0] = Σ partial[0..k).
extern "C" __global__ void rkcu_sumsq_final(double* out, const double* partial, int k) {
	double s = 0.0;
	for (int i = threadIdx.x; i < k; i += blockDim.x) s += partial[i];
	s = block_sum(s);
	if (threadIdx.x == 0) out[0] = s;
}
