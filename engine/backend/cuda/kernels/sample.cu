// Sampling on the device: a token per row from the sampler's distribution, drawn as the CPU
// sampler draws it (engine/rollout, drawFrom), with Philox's uniform for the row's stream and
// position, so that the same probabilities, seed, stream and position give the same token on
// every backend; its logprob as the training forward computes it.
#include "common.cuh"
#include "philox.cuh"

#define RKCU_DRAW_CHUNK 1024 // rollout.DrawChunk
#define RKCU_DRAW_CHUNKS 64  // the most chunks a row may have: v ≤ 65536

__device__ __forceinline__ int rkcu_chunk_end(int c, int v) {
	return (c + 1) * RKCU_DRAW_CHUNK < v ? (c + 1) * RKCU_DRAW_CHUNK : v;
}

// One block per draw (blockDim a multiple of 32, at most 1024), draw d from row dist_rows[d]
// of probs (row d where dist_rows is null: the samples of one prompt draw from its one
// prefill row). Greedy takes the most probable
// token, the lowest id among equals (a NaN is never the most probable unless it is the first,
// as rollout.Argmax). Otherwise: each chunk of RKCU_DRAW_CHUNK tokens summed in order in
// double, a thread a chunk; then one thread adds the chunk sums in order, walks to u·total
// over whole chunks and within the chunk it ends in, and falls back to the last token with
// mass before that point when rounding leaves the walk short. tokens[d] is the token and
// logp[d] = logits[row, token]·inv_temp − lse[row] (--fmad=false: the product is rounded
// first, as in rkcu_logprobs_forward and the CPU). streams holds each draw's stream as two
// words, low first; positions its position.
extern "C" __global__ void rkcu_sample(int* tokens, float* logp, const float* probs, const float* logits, const float* lse,
                                       const int* dist_rows, const int* streams, const int* positions, int draws, int v,
                                       long long seed, int greedy, float inv_temp) {
	__shared__ double partial[RKCU_DRAW_CHUNKS];
	__shared__ int best_tok[32];
	__shared__ float best_p[32];
	for (int d = blockIdx.x; d < draws; d += gridDim.x) {
		int r = dist_rows ? dist_rows[d] : d;
		const float* p = probs + (long long)r * v;
		int tok = 0;
		if (greedy) {
			float bp = -INFINITY;
			int bt = v; // none yet
			for (int k = threadIdx.x; k < v; k += blockDim.x) {
				if (p[k] > bp || (p[k] == bp && k < bt)) bp = p[k], bt = k; // a NaN never replaces
			}
			for (int o = 16; o > 0; o >>= 1) {
				float op = __shfl_xor_sync(RKCU_FULL_MASK, bp, o);
				int ot = __shfl_xor_sync(RKCU_FULL_MASK, bt, o);
				if (op > bp || (op == bp && ot < bt)) bp = op, bt = ot;
			}
			if (rkcu_lane() == 0) best_p[rkcu_warp()] = bp, best_tok[rkcu_warp()] = bt;
			__syncthreads();
			if (threadIdx.x == 0) {
				for (int w = 1; w < (int)(blockDim.x >> 5); w++) {
					if (best_p[w] > bp || (best_p[w] == bp && best_tok[w] < bt)) bp = best_p[w], bt = best_tok[w];
				}
				tok = (p[0] != p[0] || bt == v) ? 0 : bt;
			}
		} else {
			int n = (v + RKCU_DRAW_CHUNK - 1) / RKCU_DRAW_CHUNK;
			for (int c = threadIdx.x; c < n; c += blockDim.x) {
				double s = 0.0;
				for (int k = c * RKCU_DRAW_CHUNK; k < rkcu_chunk_end(c, v); k++) s += (double)p[k];
				partial[c] = s;
			}
			__syncthreads();
			if (threadIdx.x == 0) {
				unsigned long long stream = (unsigned int)streams[2 * d] | (unsigned long long)(unsigned int)streams[2 * d + 1] << 32;
				double total = 0.0;
				for (int c = 0; c < n; c++) total += partial[c];
				double target = rkcu_uniform((unsigned long long)seed, stream, (unsigned int)positions[d]) * total, acc = 0.0;
				int c = 0;
				for (; c < n - 1 && acc + partial[c] <= target; c++) acc += partial[c];
				int last = -1;
				for (int k = c * RKCU_DRAW_CHUNK; k < rkcu_chunk_end(c, v); k++) {
					if (p[k] > 0) {
						acc += (double)p[k];
						last = k;
						if (acc > target) break;
					}
				}
				for (int k = c * RKCU_DRAW_CHUNK - 1; last < 0 && k >= 0; k--) {
					if (p[k] > 0) last = k;
				}
				tok = last < 0 ? 0 : last;
			}
		}
		if (threadIdx.x == 0) {
			tokens[d] = tok;
			logp[d] = logits[(long long)r * v + tok] * inv_temp - lse[r];
		}
		__syncthreads(); // partial and best_* are reused by the next draw
	}
}
