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
