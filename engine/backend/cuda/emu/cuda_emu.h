// A small CUDA emulator: enough of the CUDA C++ dialect for the kernels in ../kernels to
// compile as ordinary C++ and run on the CPU with CUDA's execution model.
//
//   - A launch runs its blocks one after another. Within a block every CUDA thread is its own
//     OS thread (from a pool of pthreads kept between launches), so threads really run
//     concurrently and interleave as the OS schedules them.
//   - __syncthreads() is a real barrier over the block's threads; __syncwarp() and the warp
//     shuffles are barriers over the 32 threads of a warp. A thread that returns from the
//     kernel leaves both barriers, as on Volta and later GPUs.
//   - Static __shared__ variables are static storage, shared by the block's threads (blocks run
//     one at a time, and launches are serialised). Dynamic shared memory is a per-launch
//     buffer, filled with 0xff bytes (NaN as float) before every block, so a kernel that reads
//     shared memory it did not write sees NaN, not a previous block's data.
//   - Shuffles exchange values through a double-buffered per-warp slot array: write own slot,
//     barrier, read the source lane's slot. They must be called with the full mask by all 32
//     lanes of a complete warp (as the kernels do); anything else aborts with a message.
//   - A launch that does not finish within a timeout (a __syncthreads in divergent code, a
//     shuffle by part of a warp) aborts with the kernel's name instead of hanging.
//
// What it cannot show is listed in docs/CUDA.md.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

struct uint3 {
	unsigned x, y, z;
};

struct dim3 {
	unsigned x, y, z;
	dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

namespace emu {

[[noreturn]] void fatal(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Seconds a launch may run before the emulator declares it deadlocked (a __syncthreads in
// divergent code, a shuffle made by part of a warp).
constexpr int kDeadlockSeconds = 120;

// A reusable barrier for a changing set of threads: leave() removes a thread that has exited
// the kernel, completing the phase if everyone else is already waiting. Arrivals are counted
// under a mutex; waiters sleep on the generation counter (a futex on Linux), so a release
// wakes them without a convoy on the mutex.
class Barrier {
  public:
	void reset(int n) {
		std::lock_guard<std::mutex> lk(mu_);
		expected_ = n;
		arrived_ = 0;
	}
	// wait blocks until every expected thread has arrived; on_complete (if any) runs in the
	// last thread to arrive, before the others are released.
	void wait(const std::function<void()>* on_complete = nullptr) {
		unsigned g;
		{
			std::lock_guard<std::mutex> lk(mu_);
			g = gen_.load(std::memory_order_relaxed);
			if (++arrived_ >= expected_) {
				if (on_complete) (*on_complete)();
				release();
				return;
			}
		}
		while (gen_.load(std::memory_order_acquire) == g) gen_.wait(g, std::memory_order_acquire);
	}
	void leave() {
		std::lock_guard<std::mutex> lk(mu_);
		if (--expected_ > 0 && arrived_ >= expected_) release();
	}

  private:
	void release() {
		arrived_ = 0;
		gen_.fetch_add(1, std::memory_order_release);
		gen_.notify_all();
	}
	std::mutex mu_;
	int expected_ = 0, arrived_ = 0;
	std::atomic<unsigned> gen_{0};
};

// A lane's contribution to a shuffle, tagged with the lane's shuffle count in the block so
// that a reader can tell a value written for this shuffle from a stale one (a lane that has
// exited or skipped the shuffle).
struct Slot {
	uint64_t bits;
	uint64_t seq;
};

constexpr uint64_t kNoShuffle = ~0ull;

// The state of one launch, shared by its threads.
struct Launch {
	const char* kernel;
	dim3 grid, block;
	int nthreads, nwarps;
	Barrier block_barrier;                 // __syncthreads
	std::unique_ptr<Barrier[]> warp_barrier; // __syncwarp and shuffles
	Barrier end_of_block;                  // all threads, exited or not, between blocks
	std::function<void()> between_blocks;  // run by the last thread to finish a block
	const std::function<void()>* body;
	std::vector<Slot> slots[2];            // shuffle exchange, double-buffered
	std::vector<unsigned char> dyn_shared; // dynamic shared memory
};

// Per-thread identity.
struct ThreadState {
	Launch* launch = nullptr;
	int tid = 0, lane = 0, warp = 0;
	uint64_t shuffles = 0; // shuffles this thread has made in the current block
};

inline thread_local ThreadState self;

}  // namespace emu

// The built-in variables.
inline thread_local uint3 threadIdx, blockIdx;
inline thread_local dim3 blockDim, gridDim;
constexpr int warpSize = 32;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __shared__ static

inline void __syncthreads() {
	emu::Launch* l = emu::self.launch;
	l->block_barrier.wait();
}

inline void __syncwarp(unsigned mask = 0xffffffffu) {
	emu::Launch* l = emu::self.launch;
	if (mask != 0xffffffffu) emu::fatal("%s: __syncwarp with a partial mask is not emulated", l->kernel);
	l->warp_barrier[emu::self.warp].wait();
}

template <typename T>
T* dynamic_smem() {
	return reinterpret_cast<T*>(emu::self.launch->dyn_shared.data());
}

namespace emu {

// shuffle returns the value of v held by lane src(lane) of the caller's warp.
template <typename T, typename Src>
T shuffle(unsigned mask, T v, Src src, const char* name) {
	static_assert(sizeof(T) <= sizeof(uint64_t), "shuffle of a type wider than 8 bytes");
	Launch* l = self.launch;
	int base = self.warp * 32;
	if (mask != 0xffffffffu) fatal("%s: %s with mask %#x; only full-warp shuffles are emulated", l->kernel, name, mask);
	if (base + 32 > l->nthreads)
		fatal("%s: %s in a partial warp (block of %d threads)", l->kernel, name, l->nthreads);
	uint64_t seq = self.shuffles++;
	std::vector<Slot>& slots = l->slots[seq & 1];
	uint64_t bits = 0;
	memcpy(&bits, &v, sizeof(T));
	slots[base + self.lane] = Slot{bits, seq};
	l->warp_barrier[self.warp].wait();
	int s = src(self.lane);
	if (s < 0 || s > 31) return v; // outside the segment: own value, as CUDA does
	if (slots[base + s].seq != seq)
		fatal("%s: %s reads lane %d, which did not take part (exited or diverged)", l->kernel, name, s);
	T out;
	memcpy(&out, &slots[base + s].bits, sizeof(T));
	return out;
}

}  // namespace emu

template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
	return emu::shuffle(mask, v, [=](int lane) { return (lane ^ lane_mask) < ((lane / width) + 1) * width ? lane ^ lane_mask : lane; }, "__shfl_xor_sync");
}

template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
	return emu::shuffle(mask, v, [=](int lane) { return (lane % width) + (int)delta < width ? lane + (int)delta : lane; }, "__shfl_down_sync");
}

template <typename T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
	return emu::shuffle(mask, v, [=](int lane) { return (lane % width) >= (int)delta ? lane - (int)delta : lane; }, "__shfl_up_sync");
}

template <typename T>
T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32) {
	return emu::shuffle(mask, v, [=](int lane) { return (lane / width) * width + (src_lane % width); }, "__shfl_sync");
}

// Math: the CUDA names the kernels use. The device's expf/logf/tanhf are accurate to a few
// ulp and so are glibc's, but they are not the same functions (see docs/CUDA.md); the fast
// intrinsics map to the accurate functions here, hiding their larger device error.
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __int_as_float(int i) {
	float f;
	memcpy(&f, &i, 4);
	return f;
}
inline int __float_as_int(float f) {
	int i;
	memcpy(&i, &f, 4);
	return i;
}

namespace emu {

// run executes body for every thread of every block of the launch; see the file comment.
void run(const char* kernel, dim3 grid, dim3 block, size_t shared_bytes, const std::function<void()>& body);

}  // namespace emu
