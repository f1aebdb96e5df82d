// Memory-bound kernels over flat arrays and rows: fill, copy, add, scale, GELU, row gather and
// scatter and the two-phase column sums behind bias and LayerNorm gradients.
#include "common.cuh"

extern "C" __global__ void rkcu_fill(float* out, float v, long long n) {
	RKCU_GRID_LOOP(i, n) out[i] = v;
}

extern "C" __global__ void rkcu_copy(float* out, const float* in, long long n) {
	RKCU_GRID_LOOP(i, n) out[i] = in[i];
}

extern "C" __global__ void rkcu_add(float* out, const float* a, const float* b, long long n) {
	RKCU_GRID_LOOP(i, n) out[i] = a[i] + b[i];
}

extern "C" __global__ void rkcu_add_to(float* dst, const float* src, long long n) {
	RKCU_GRID_LOOP(i, n) dst[i] += src[i];
}

// Integers plus v: a decode step's positions, advanced on the device.
extern "C" __global__ void rkcu_add_i32(int* x, int v, long long n) {
	RKCU_GRID_LOOP(i, n) x[i] += v;
}

extern "C" __global__ void rkcu_scale(float* x, float s, long long n) {
	RKCU_GRID_LOOP(i, n) x[i] *= s;
}

// GELU, tanh approximation, written as the CPU backend's scalar path writes it:
// ½x(1 + tanh u), u = √(2/π)(x + 0.044715x³), tanh u = sign(u)(1 − e)/(1 + e), e = exp(−2|u|).
#define RKCU_GELU_K 0.7978845608028654f
#define RKCU_GELU_A 0.044715f

__device__ __forceinline__ float rkcu_gelu_u(float v) { return RKCU_GELU_K * (v + RKCU_GELU_A * v * v * v); }

__device__ __forceinline__ float rkcu_gelu(float v) {
	float u = rkcu_gelu_u(v), e = expf(-2.0f * fabsf(u));
	float t = copysignf((1.0f - e) / (1.0f + e), u);
	return 0.5f * v * (1.0f + t);
}

extern "C" __global__ void rkcu_gelu_forward(float* out, const float* x, long long n) {
	RKCU_GRID_LOOP(i, n) out[i] = rkcu_gelu(x[i]);
}

// dinp = gelu'(x)·dout, with 1 − tanh² computed as 4e/(1 + e)² (no cancellation near |t| = 1).
extern "C" __global__ void rkcu_gelu_backward(float* dinp, const float* x, const float* dout, long long n) {
	RKCU_GRID_LOOP(i, n) {
		float v = x[i], v2 = v * v, u = rkcu_gelu_u(v);
		float e = expf(-2.0f * fabsf(u));
		float d = 1.0f / (1.0f + e);
		float t = copysignf((1.0f - e) * d, u);
		float sech2 = 4.0f * e * d * d;
		float a = 0.5f * (1.0f + t);
		float b = 0.5f * v * sech2 * RKCU_GELU_K * (1.0f + 3.0f * RKCU_GELU_A * v2);
		dinp[i] = dout[i] * (a + b);
	}
}

// dst[i] = src[rows[i]] for i < nrows, rows of c floats.
extern "C" __global__ void rkcu_gather_rows(float* dst, const float* src, const int* rows, int nrows, int c) {
	RKCU_GRID_LOOP(i, (long long)nrows * c) {
		long long r = i / c, k = i - r * c;
		dst[i] = src[(long long)rows[r] * c + k];
	}
}

// dst[rows[i]] = src[i]; rows must be distinct (they are: scored rows strictly increase).
extern "C" __global__ void rkcu_scatter_rows(float* dst, const float* src, const int* rows, int nrows, int c) {
	RKCU_GRID_LOOP(i, (long long)nrows * c) {
		long long r = i / c, k = i - r * c;
		dst[(long long)rows[r] * c + k] = src[i];
	}
}

// Phase 1 of a deterministic column sum: for chunk k (blocks take chunks along y in a
// grid-stride loop), partial[k, j] = Σ of column j over rows [k·rows_per_chunk, (k+1)·rows_per_chunk)
// in row order.
extern "C" __global__ void rkcu_column_sums(float* partial, const float* x, int n, int c, int rows_per_chunk) {
	int chunks = (n + rows_per_chunk - 1) / rows_per_chunk;
	for (int k = blockIdx.y; k < chunks; k += gridDim.y) {
		int lo = k * rows_per_chunk;
		int hi = lo + rows_per_chunk < n ? lo + rows_per_chunk : n;
		for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < c; j += gridDim.x * blockDim.x) {
			float s = 0.0f;
			for (int r = lo; r < hi; r++) s += x[(long long)r * c + j];
			partial[(long long)k * c + j] = s;
		}
	}
}

// Phase 2: dst[j] += Σ_k partial[k·ld + j] over the chunks in order.
extern "C" __global__ void rkcu_accumulate_partials(float* dst, const float* partial, int chunks, int ld, int ncols) {
	RKCU_GRID_LOOP(j, ncols) {
		float s = 0.0f;
		for (int k = 0; k < chunks; k++) s += partial[(long long)k * ld + j];
		dst[j] += s;
	}
}
