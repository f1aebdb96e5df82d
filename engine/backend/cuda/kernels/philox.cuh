// Philox4x32-10, the sampler's generator: the CUDA twin of package engine/philox (whose doc
// says why a counter-based one), held to Random123's known answers and to the Go code's
// uniforms by the emulator's tests.
#pragma once

struct rkcu_u32x4 {
	unsigned int w[4];
};

// The block of counter c under key (k0, k1): ten rounds of two 32×32→64-bit products whose
// halves are exchanged and xored with the key, the key bumped between rounds.
__device__ __forceinline__ rkcu_u32x4 rkcu_philox(rkcu_u32x4 c, unsigned int k0, unsigned int k1) {
	for (int r = 0; r < 10; r++) {
		if (r > 0) {
			k0 += 0x9E3779B9u;
			k1 += 0xBB67AE85u;
		}
		unsigned long long p0 = 0xD2511F53ull * c.w[0], p1 = 0xCD9E8D57ull * c.w[2];
		c = rkcu_u32x4{{(unsigned int)(p1 >> 32) ^ c.w[1] ^ k0, (unsigned int)p1, (unsigned int)(p0 >> 32) ^ c.w[3] ^ k1,
		                (unsigned int)p0}};
	}
	return c;
}

// The uniform in [0, 1) of position pos of stream under seed, as philox.Uniform: the top 53
// bits of the block's first two words of counter (pos, 0, stream low, stream high).
__device__ __forceinline__ double rkcu_uniform(unsigned long long seed, unsigned long long stream, unsigned int pos) {
	rkcu_u32x4 c = rkcu_philox(rkcu_u32x4{{pos, 0u, (unsigned int)stream, (unsigned int)(stream >> 32)}},
	                           (unsigned int)seed, (unsigned int)(seed >> 32));
	return (double)((((unsigned long long)c.w[0] << 32) | c.w[1]) >> 11) * 0x1p-53;
}
