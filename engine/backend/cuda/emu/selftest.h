// Kernels that test the emulator itself (emu_test.go), some of them broken on purpose. They
// are compiled only here, never into the PTX, and are not in the kernel table.

// Threads beyond n leave before the barrier: the barrier completes with the rest.
extern "C" __global__ void emutest_early_exit(float* out, int n) {
	__shared__ float buf[1024];
	int t = threadIdx.x;
	if (t >= n) return;
	buf[t] = (float)t;
	__syncthreads();
	out[t] = buf[n - 1 - t];
}

// Reads dynamic shared memory no thread wrote: NaN in the emulator.
extern "C" __global__ void emutest_unwritten_shared(float* out) {
	out[threadIdx.x] = dynamic_smem<float>()[threadIdx.x];
}

// Broken: the upper half-warp exits, the lower half reduces across it.
extern "C" __global__ void emutest_shuffle_exited(float* out) {
	if (threadIdx.x >= 16) return;
	out[threadIdx.x] = warp_sum((float)threadIdx.x);
}

// Broken: half of the warp shuffles while the other half waits at __syncthreads: deadlock.
extern "C" __global__ void emutest_deadlock(float* out) {
	if (threadIdx.x < 16) {
		out[threadIdx.x] = warp_sum(1.0f);
	} else {
		__syncthreads();
	}
}

// Philox4x32-10 blocks of the device's generator (kernels/philox.cuh), for its known-answer
// test: in holds n counters and keys (six words each), out gets n blocks (four words each).
extern "C" __global__ void emutest_philox(int* out, const int* in, int n) {
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		const unsigned int* x = (const unsigned int*)in + 6 * i;
		rkcu_u32x4 b = rkcu_philox(rkcu_u32x4{{x[0], x[1], x[2], x[3]}}, x[4], x[5]);
		for (int k = 0; k < 4; k++) out[4 * i + k] = (int)b.w[k];
	}
}

// The device's uniforms (kernels/philox.cuh): in holds n (seed, stream) pairs and positions
// (five words each: seed low, high, stream low, high, position), out gets n uniforms.
extern "C" __global__ void emutest_uniform(double* out, const int* in, int n) {
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		const unsigned int* x = (const unsigned int*)in + 5 * i;
		out[i] = rkcu_uniform(x[0] | (unsigned long long)x[1] << 32, x[2] | (unsigned long long)x[3] << 32, x[4]);
	}
}
