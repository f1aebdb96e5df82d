// LayerNorm over the last dimension, one warp per row.
#include "common.cuh"

// Saves each row's mean and 1/std for the backward. Block: whole warps; each warp takes rows
// in a grid-stride loop (the whole warp iterates together, as its shuffles require).
extern "C" __global__ void rkcu_layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                                                  const float* b, int n, int c, float eps) {
	int lane = rkcu_lane();
	RKCU_WARP_LOOP(row, n) {
	const float* x = inp + (long long)row * c;
	float s = 0.0f;
	for (int i = lane; i < c; i += 32) s += x[i];
	float m = warp_sum(s) / (float)c;
	float v = 0.0f;
	for (int i = lane; i < c; i += 32) {
		float d = x[i] - m;
		v += d * d;
	}
	float r = 1.0f / sqrtf(warp_sum(v) / (float)c + eps);
	float* o = out + (long long)row * c;
	for (int i = lane; i < c; i += 32) o[i] = (x[i] - m) * r * w[i] + b[i];
	if (lane == 0) {
		mean[row] = m;
		rstd[row] = r;
	}
	}
}

// Backward, phase 1. Chunk k is rows [k·rows_per_chunk, (k+1)·rows_per_chunk); blocks take
// chunks in a grid-stride loop, and warp w of a block takes the chunk's rows w, w + warps, ...
// dinp += the row's input gradient (each row is one warp's, so no conflicts). dw and db are
// summed per warp in dynamic shared memory (2c floats per warp), then over the warps in warp
// order into partial[k, 0:c) (dw) and partial[k, c:2c) (db); rkcu_accumulate_partials adds
// the chunks in chunk order. The sums depend on rows_per_chunk, never on the grid.
extern "C" __global__ void rkcu_layernorm_backward(float* dinp, float* partial, const float* dout, const float* inp,
                                                   const float* w, const float* mean, const float* rstd, int n, int c,
                                                   int rows_per_chunk) {
	float* acc = dynamic_smem<float>();
	int warps = blockDim.x >> 5, warp = rkcu_warp(), lane = rkcu_lane();
	float* dw = acc + (long long)warp * 2 * c;
	float* db = dw + c;
	int chunks = (n + rows_per_chunk - 1) / rows_per_chunk;
	for (int k = blockIdx.x; k < chunks; k += gridDim.x) {
		for (int i = lane; i < c; i += 32) {
			dw[i] = 0.0f;
			db[i] = 0.0f;
		}
		int lo = k * rows_per_chunk;
		int hi = lo + rows_per_chunk < n ? lo + rows_per_chunk : n;
		for (int row = lo + warp; row < hi; row += warps) {
			const float* x = inp + (long long)row * c;
			const float* d = dout + (long long)row * c;
			float m = mean[row], r = rstd[row];
			// dnorm = w·dout and the two row means the LayerNorm Jacobian needs.
			float s1 = 0.0f, s2 = 0.0f;
			for (int i = lane; i < c; i += 32) {
				float dn = w[i] * d[i];
				s1 += dn;
				s2 += dn * (x[i] - m) * r;
			}
			float mean1 = warp_sum(s1) / (float)c, mean2 = warp_sum(s2) / (float)c;
			float* di = dinp + (long long)row * c;
			for (int i = lane; i < c; i += 32) {
				float norm = (x[i] - m) * r;
				dw[i] += d[i] * norm;
				db[i] += d[i];
				di[i] += (w[i] * d[i] - mean1 - norm * mean2) * r;
			}
		}
		__syncthreads();
		for (int i = threadIdx.x; i < 2 * c; i += blockDim.x) {
			float s = 0.0f;
			for (int j = 0; j < warps; j++) s += acc[(long long)j * 2 * c + i];
			partial[(long long)k * 2 * c + i] = s;
		}
		__syncthreads(); // acc is zeroed again for the next chunk
	}
}
