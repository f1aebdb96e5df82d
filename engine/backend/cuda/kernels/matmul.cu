// The forward's matrix products, batch-invariant: out = res + (bias + inp·wᵀ), inp (n, c),
// w (oc, c), row-major (res and bias may be null), and with gelu also gelu(out) into gelu (the
// MLP's activation, rkcu_gelu_forward's bits, in the product's pass rather than a launch and a
// pass of its own). Every output element is one sum,
// acc = fmaf(inp[i][k], w[j][k], acc) for k = 0, 1, …, c−1 from acc = 0, then bias[j] + acc,
// then res[i][j] + that: its order depends on nothing but its own row and column — not on n,
// on the row's place in the batch, on the tile it falls in or on the grid. So the sampler's
// products (a decode step's few rows) and the training forward's (thousands) give a row the
// same bits (DESIGN §6.1), which cuBLAS does not promise: its algorithm, and with it the order
// of a sum (split-K, tile shapes), depends on the sizes. The backward keeps cuBLAS.
//
// Blocks of 256 threads take tiles of 64 × 64 outputs, 4 × 4 per thread (rkcu_matmul_nt), or
// of 16 × 16, one per thread (rkcu_matmul_nt16: a decode step's few rows make too few large
// tiles to fill the GPU); k runs in steps of K staged in shared memory (transposed, so that a
// thread's rows or columns are adjacent). The tile and the step change which thread computes an
// element and when its inputs arrive, never its sum. Loads past the matrix read 0:
// fmaf(0, 0, acc) = acc, as acc is never −0.
//
// Each step waits for its loads (a __syncthreads after them), so a block pays the latency of a
// load from memory once per step, and a decode step's products have too few blocks (64 rows ×
// 768 columns make 192 tiles of 16) to hide it behind each other. The 16 × 16 tiles take steps
// of 64, so each block pays that latency fewer times than in steps of 16; longer steps gain
// little more.
#include "common.cuh"

// R rows and columns per thread: tiles of 16R × 16R; K: k per shared-memory step.
template <int R, int K>
__device__ void rkcu_matmul_tiles(float* out, float* gelu, const float* res, const float* inp, const float* w,
                                  const float* bias, int n, int c, int oc) {
	const int T = 16 * R;
	__shared__ float as[K][T + 1]; // + 1: a step's k of one row fall in different banks
	__shared__ float ws[K][T + 1];
	int tx = threadIdx.x % 16, ty = threadIdx.x / 16; // this thread's columns tx·R.., rows ty·R..
	int tilesN = (oc + T - 1) / T;
	long long tiles = (long long)((n + T - 1) / T) * tilesN;
	for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
		int i0 = (int)(tile / tilesN) * T, j0 = (int)(tile % tilesN) * T;
		float acc[R][R];
		for (int r = 0; r < R; r++)
			for (int s = 0; s < R; s++) acc[r][s] = 0.0f;
		for (int k0 = 0; k0 < c; k0 += K) {
			for (int e = threadIdx.x; e < T * K; e += blockDim.x) {
				int row = e / K, kk = e % K, k = k0 + kk;
				int i = i0 + row, j = j0 + row;
				as[kk][row] = i < n && k < c ? inp[(long long)i * c + k] : 0.0f;
				ws[kk][row] = j < oc && k < c ? w[(long long)j * c + k] : 0.0f;
			}
			__syncthreads();
			for (int kk = 0; kk < K; kk++) {
				float a[R], b[R];
				for (int r = 0; r < R; r++) a[r] = as[kk][ty * R + r];
				for (int s = 0; s < R; s++) b[s] = ws[kk][tx * R + s];
				for (int r = 0; r < R; r++)
					for (int s = 0; s < R; s++) acc[r][s] = fmaf(a[r], b[s], acc[r][s]);
			}
			__syncthreads(); // the next step overwrites as and ws
		}
		for (int r = 0; r < R; r++) {
			int i = i0 + ty * R + r;
			if (i >= n) break;
			for (int s = 0; s < R; s++) {
				int j = j0 + tx * R + s;
				if (j >= oc) break;
				float v = acc[r][s];
				if (bias) v = bias[j] + v;
				long long o = (long long)i * oc + j;
				out[o] = v = res ? res[o] + v : v;
				if (gelu) gelu[o] = rkcu_gelu(v);
			}
		}
	}
}

extern "C" __global__ void rkcu_matmul_nt(float* out, float* gelu, const float* res, const float* inp, const float* w,
                                          const float* bias, int n, int c, int oc) {
	rkcu_matmul_tiles<4, 16>(out, gelu, res, inp, w, bias, n, c, oc);
}

extern "C" __global__ void rkcu_matmul_nt16(float* out, float* gelu, const float* res, const float* inp, const float* w,
                                            const float* bias, int n, int c, int oc) {
	rkcu_matmul_tiles<1, 64>(out, gelu, res, inp, w, bias, n, c, oc);
}
