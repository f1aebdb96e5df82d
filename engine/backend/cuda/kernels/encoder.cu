// Token + position embeddings and their gradients.
#include "common.cuh"

// out[i] = wte[tok[i]] + wpe[pos[i]], rows of c floats.
extern "C" __global__ void rkcu_encoder_forward(float* out, const int* tok, const int* pos, const float* wte,
                                                const float* wpe, int n, int c) {
	RKCU_GRID_LOOP(i, (long long)n * c) {
		long long r = i / c, k = i - r * c;
		out[i] = wte[(long long)tok[r] * c + k] + wpe[(long long)pos[r] * c + k];
	}
}

// dwte[tok[i]] += dout[i]; dwpe[pos[i]] += dout[i]. One thread per channel walks the tokens in
// order, so rows that several tokens share (every position, repeated tokens) are summed in a
// fixed order without atomics: the same order as the CPU backend, hence the same bits.
extern "C" __global__ void rkcu_encoder_backward(float* dwte, float* dwpe, const float* dout, const int* tok,
                                                 const int* pos, int n, int c) {
	RKCU_GRID_LOOP(k, c) {
		for (int i = 0; i < n; i++) {
			float d = dout[(long long)i * c + k];
			dwte[(long long)tok[i] * c + k] += d;
			dwpe[(long long)pos[i] * c + k] += d;
		}
	}
}
