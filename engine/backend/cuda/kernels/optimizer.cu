// AdamW and the squared-norm reduction behind gradient clipping.
#include "common.cuh"

// One AdamW update with torch.optim.AdamW's arithmetic over a whole parameter buffer;
// decay = 1 − lr·wd, step = lr/bc1 and inv_sqrt_bc2 = 1/√bc2 come from the host, computed as
// the CPU backend computes them. nodecay holds nspans sorted, disjoint [start, end) pairs
// whose elements take the factor 1 (1 − lr·0) instead of decay: biases and LayerNorm gains
// in the same launch as the matrices.
extern "C" __global__ void rkcu_adamw(float* p, const float* g, float* m, float* v, long long n, const long long* nodecay,
                                      int nspans, float b1, float b2, float eps, float decay, float step,
                                      float inv_sqrt_bc2) {
	RKCU_GRID_LOOP(i, n) {
		// The first span that ends after i (a few cached loads: the table is tiny and every
		// thread reads the same entries).
		int lo = 0, hi = nspans;
		while (lo < hi) {
			int mid = (lo + hi) >> 1;
			if (nodecay[2 * mid + 1] <= i) lo = mid + 1;
			else hi = mid;
		}
		float d = lo < nspans && i >= nodecay[2 * lo] ? 1.0f : decay;
		float gi = g[i];
		float mi = b1 * m[i] + (1.0f - b1) * gi;
		float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
		m[i] = mi;
		v[i] = vi;
		p[i] = p[i] * d - step * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
	}
}

// Σx² in double over many spans of x in one launch (every tensor of a gradient at once).
// spans holds first[count + 1], off[count], len[count]: span t is x[off[t], off[t] + len[t]),
// cut into chunks of chunk elements, numbered first[t] .. first[t+1] − 1 over all spans. A
// block takes chunks in a grid-stride loop and writes partial[k] = Σ over chunk k, its threads
// striding the chunk and combined by block_sum; the host adds each span's partials in order.
// The partition depends on the sizes, chunk and the block size only, never on the grid, so a
// span's sum has the same bits in any launch, alone or among others.
extern "C" __global__ void rkcu_sumsq(double* partial, const float* x, const long long* spans, int count, int chunk) {
	const long long* first = spans;
	const long long* off = spans + count + 1;
	const long long* len = off + count;
	long long chunks = first[count];
	for (long long k = blockIdx.x; k < chunks; k += gridDim.x) {
		// The span of chunk k: first[t] ≤ k < first[t + 1] (spans without chunks are skipped).
		int t = 0, hi = count;
		while (hi - t > 1) {
			int mid = (t + hi) >> 1;
			if (first[mid] <= k) t = mid;
			else hi = mid;
		}
		long long lo = off[t] + (k - first[t]) * chunk;
		long long end = off[t] + len[t];
		if (lo + chunk < end) end = lo + chunk;
		double s = 0.0;
		for (long long i = lo + threadIdx.x; i < end; i += blockDim.x) {
			double xi = x[i];
			s += xi * xi;
		}
		s = block_sum(s);
		if (threadIdx.x == 0) partial[k] = s;
	}
}
