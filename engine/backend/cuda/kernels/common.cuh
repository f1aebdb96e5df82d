// Helpers shared by every kernel file. The same source compiles with nvcc (to PTX) and, under
// the CPU emulation in ../emu/cuda_emu.h, with g++; nothing here may depend on which.
//
// Conventions: every kernel is extern "C" with an rkcu_ prefix (the name the host looks up;
// distinct from the CPU backend's rk_ C functions, which the emulator tests link beside);
// element counts that can exceed 2^31 are long long; reductions use a fixed partition and a
// fixed combination order and never float atomics, so results are bit-identical run to run.
#pragma once

#ifdef __CUDACC__
// Dynamic shared memory of the launch, as T*. The emulator defines its own version.
template <typename T>
__device__ __forceinline__ T* dynamic_smem() {
	extern __shared__ __align__(16) unsigned char rkcu_smem[];
	return reinterpret_cast<T*>(rkcu_smem);
}
#endif

#define RKCU_FULL_MASK 0xffffffffu

// Grid-stride loop over [0, n). Every kernel loops like this (or RKCU_WARP_LOOP, or over
// chunks), so no result depends on the grid size: a launch may cap its grid freely.
#define RKCU_GRID_LOOP(i, n) \
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)

// Grid-stride loop over items [0, n) with one warp per item; the whole warp iterates together.
#define RKCU_WARP_LOOP(item, n)                                                                   \
	for (long long item = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); item < (n); \
	     item += (long long)gridDim.x * (blockDim.x >> 5))

__device__ __forceinline__ int rkcu_lane() { return threadIdx.x & 31; }
__device__ __forceinline__ int rkcu_warp() { return threadIdx.x >> 5; }

// Max in which NaN wins, so that a NaN anywhere reaches the result (fmaxf would drop it).
__device__ __forceinline__ float rkcu_max_nan(float a, float b) { return (b > a || b != b) ? b : a; }

// Butterfly reductions: after them every lane holds the same value, combined in the same
// order on every lane and every run.
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(RKCU_FULL_MASK, v, o);
	return v;
}

__device__ __forceinline__ float warp_max_nan(float v) {
	for (int o = 16; o > 0; o >>= 1) v = rkcu_max_nan(v, __shfl_xor_sync(RKCU_FULL_MASK, v, o));
	return v;
}

// Block-wide sum; blockDim.x must be a multiple of 32. Every thread of the block must call it
// and gets the result. Each warp reduces the per-warp partials itself (the same operations on
// every warp), so no second broadcast through shared memory is needed.
template <typename T>
__device__ __forceinline__ T block_sum(T v) {
	__shared__ T part[32];
	v = warp_sum(v);
	if (rkcu_lane() == 0) part[rkcu_warp()] = v;
	__syncthreads();
	int warps = blockDim.x >> 5;
	v = rkcu_lane() < warps ? part[rkcu_lane()] : T(0);
	v = warp_sum(v);
	__syncthreads(); // part is reused by the next call
	return v;
}

__device__ __forceinline__ float block_max_nan(float v) {
	__shared__ float part[32];
	v = warp_max_nan(v);
	if (rkcu_lane() == 0) part[rkcu_warp()] = v;
	__syncthreads();
	int warps = blockDim.x >> 5;
	v = rkcu_lane() < warps ? part[rkcu_lane()] : -INFINITY;
	v = warp_max_nan(v);
	__syncthreads();
	return v;
}
