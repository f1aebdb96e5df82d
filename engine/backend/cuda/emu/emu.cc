// The emulator's runtime and the CUDA kernels themselves, compiled as C++.
#include "cuda_emu.h"

#include <pthread.h>

#include <cstdarg>
#include <map>
#include <string>
#include <type_traits>
#include <utility>

// The kernels: exactly the translation unit nvcc compiles to PTX.
#include "../kernels/module.cu"
// And the emulator's self-test kernels.
#include "selftest.h"

#include "emu.h"

namespace emu {

void fatal(const char* fmt, ...) {
	// The first thread to fail reports; any other waits here for the abort.
	static std::mutex mu;
	mu.lock();
	va_list ap;
	va_start(ap, fmt);
	fputs("cuda emulator: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	fflush(stderr);
	abort();
}

// deadlock_seconds is kDeadlockSeconds, or ROOKSCRIPT_EMU_TIMEOUT if set (tests of the
// deadlock check shorten it).
static int deadlock_seconds() {
	static const int s = [] {
		const char* v = getenv("ROOKSCRIPT_EMU_TIMEOUT");
		int n = v ? atoi(v) : 0;
		return n > 0 ? n : kDeadlockSeconds;
	}();
	return s;
}

// The thread pool: worker t plays CUDA thread t of every launch. Workers are created on
// first need and kept, so a launch costs wake-ups, not thread creation.
class Pool {
  public:
	void run(Launch& l) {
		grow(l.nthreads);
		{
			std::lock_guard<std::mutex> lk(done_mu_);
			launch_ = &l;
			remaining_ = l.nthreads;
		}
		for (int t = 0; t < l.nthreads; t++) {
			workers_[t]->go.fetch_add(1, std::memory_order_release);
			workers_[t]->go.notify_one();
		}
		std::unique_lock<std::mutex> lk(done_mu_);
		int limit = deadlock_seconds();
		if (!done_cv_.wait_for(lk, std::chrono::seconds(limit), [&] { return remaining_ == 0; }))
			fatal("%s: the launch did not finish within %d s: a __syncthreads or shuffle that not every "
			      "thread reaches (divergent code)?",
			      l.kernel, limit);
		launch_ = nullptr;
	}

  private:
	struct Worker {
		std::atomic<unsigned> go{0};
		pthread_t th;
		Pool* pool;
		int id;
	};

	void grow(int n) {
		while ((int)workers_.size() < n) {
			int id = (int)workers_.size();
			workers_.push_back(std::make_unique<Worker>());
			pthread_attr_t attr;
			pthread_attr_init(&attr);
			pthread_attr_setstacksize(&attr, 256 << 10); // kernels need little stack
			Worker* w = workers_[id].get();
			w->pool = this;
			w->id = id;
			int err = pthread_create(&w->th, &attr, &Pool::main, w);
			pthread_attr_destroy(&attr);
			if (err != 0) fatal("cannot create emulator thread %d: %s", id, strerror(err));
			pthread_detach(workers_[id]->th);
		}
	}

	static void* main(void* p) {
		Worker& w = *static_cast<Worker*>(p); // not via workers_, which the launcher may be growing
		Pool* pool = w.pool;
		int id = w.id;
		unsigned seen = 0;
		for (;;) {
			while (w.go.load(std::memory_order_acquire) == seen) w.go.wait(seen, std::memory_order_acquire);
			seen = w.go.load(std::memory_order_acquire);
			Launch* l;
			{
				std::lock_guard<std::mutex> lk(pool->done_mu_);
				l = pool->launch_;
			}
			play(*l, id);
			std::lock_guard<std::mutex> lk(pool->done_mu_);
			if (--pool->remaining_ == 0) pool->done_cv_.notify_one();
		}
		return nullptr;
	}

	// play runs CUDA thread t through every block of the launch.
	static void play(Launch& l, int t) {
		self.launch = &l;
		self.tid = t;
		self.lane = t % 32;
		self.warp = t / 32;
		threadIdx = uint3{t % l.block.x, (t / l.block.x) % l.block.y, t / (l.block.x * l.block.y)};
		blockDim = l.block;
		gridDim = l.grid;
		for (unsigned z = 0; z < l.grid.z; z++)
			for (unsigned y = 0; y < l.grid.y; y++)
				for (unsigned x = 0; x < l.grid.x; x++) {
					blockIdx = uint3{x, y, z};
					self.shuffles = 0;
					(*l.body)();
					l.block_barrier.leave();
					l.warp_barrier[self.warp].leave();
					l.end_of_block.wait(&l.between_blocks);
				}
		self.launch = nullptr;
	}

	std::vector<std::unique_ptr<Worker>> workers_; // grown only by the launching thread
	std::mutex done_mu_;
	std::condition_variable done_cv_;
	Launch* launch_ = nullptr;
	int remaining_ = 0;
};

// Never destroyed: its workers outlive any static destructor that runs at process exit.
static Pool& pool = *new Pool;

void run(const char* kernel, dim3 grid, dim3 block, size_t shared_bytes, const std::function<void()>& body) {
	Launch l;
	l.kernel = kernel;
	l.grid = grid;
	l.block = block;
	l.body = &body;
	l.nthreads = (int)(block.x * block.y * block.z);
	l.nwarps = (l.nthreads + 31) / 32;
	l.warp_barrier.reset(new Barrier[l.nwarps]);
	l.dyn_shared.resize(shared_bytes);
	// Before each block: fresh barriers and shuffle slots, poisoned dynamic shared memory.
	l.between_blocks = [&l] {
		l.block_barrier.reset(l.nthreads);
		for (int w = 0; w < l.nwarps; w++) l.warp_barrier[w].reset(std::min(32, l.nthreads - 32 * w));
		for (auto& sl : l.slots) sl.assign(l.nwarps * 32, Slot{0, kNoShuffle});
		std::fill(l.dyn_shared.begin(), l.dyn_shared.end(), 0xff);
	};
	l.between_blocks();
	l.end_of_block.reset(l.nthreads);
	pool.run(l);
}

// Kernel registry: each entry unpacks 64-bit argument slots into the kernel's parameter types.
template <typename T>
constexpr char sig_char() {
	if constexpr (std::is_pointer_v<T>) {
		using E = std::remove_cv_t<std::remove_pointer_t<T>>;
		if constexpr (std::is_same_v<E, float>) return 'F';
		else if constexpr (std::is_same_v<E, int>) return 'I';
		else if constexpr (std::is_same_v<E, long long>) return 'L';
		else if constexpr (std::is_same_v<E, double>) return 'D';
		else return '?';
	} else if constexpr (std::is_same_v<T, float>) return 'f';
	else if constexpr (std::is_same_v<T, int>) return 'i';
	else if constexpr (std::is_same_v<T, long long>) return 'l';
	else return '?';
}

template <typename T>
T unpack(uint64_t v) {
	if constexpr (std::is_pointer_v<T>) {
		return reinterpret_cast<T>(static_cast<uintptr_t>(v));
	} else {
		T t;
		memcpy(&t, &v, sizeof(T)); // little-endian: the value sits in the low bytes
		return t;
	}
}

struct Entry {
	std::string sig;
	std::function<void(const uint64_t*)> call;
};

template <typename... A, size_t... I>
void invoke(void (*k)(A...), const uint64_t* a, std::index_sequence<I...>) {
	k(unpack<A>(a[I])...);
}

template <typename... A>
Entry entry(void (*k)(A...)) {
	return Entry{std::string{sig_char<A>()...}, [k](const uint64_t* a) { invoke(k, a, std::index_sequence_for<A...>{}); }};
}

#define RK_KERNEL(k) {#k, entry(k)}

static const std::map<std::string, Entry>& registry() {
	static const std::map<std::string, Entry> r = {
	    RK_KERNEL(rkcu_fill),
	    RK_KERNEL(rkcu_copy),
	    RK_KERNEL(rkcu_add),
	    RK_KERNEL(rkcu_add_to),
	    RK_KERNEL(rkcu_scale),
	    RK_KERNEL(rkcu_add_i32),
	    RK_KERNEL(rkcu_gelu_forward),
	    RK_KERNEL(rkcu_gelu_backward),
	    RK_KERNEL(rkcu_gather_rows),
	    RK_KERNEL(rkcu_scatter_rows),
	    RK_KERNEL(rkcu_column_sums),
	    RK_KERNEL(rkcu_accumulate_partials),
	    RK_KERNEL(rkcu_encoder_forward),
	    RK_KERNEL(rkcu_encoder_backward),
	    RK_KERNEL(rkcu_layernorm_forward),
	    RK_KERNEL(rkcu_layernorm_backward),
	    RK_KERNEL(rkcu_attention_forward),
	    RK_KERNEL(rkcu_attention_backward_dq),
	    RK_KERNEL(rkcu_attention_backward_dkv),
	    RK_KERNEL(rkcu_kv_write),
	    RK_KERNEL(rkcu_attention_decode),
	    RK_KERNEL(rkcu_logprobs_forward),
	    RK_KERNEL(rkcu_logprobs_backward),
	    RK_KERNEL(rkcu_softmax),
	    RK_KERNEL(rkcu_adamw),
	    RK_KERNEL(rkcu_sumsq),
	    RK_KERNEL(rkcu_matmul_nt),
	    RK_KERNEL(rkcu_matmul_nt16),
	    RK_KERNEL(rkcu_sample),
	};
	return r;
}

static const std::map<std::string, Entry>& selftests() {
	static const std::map<std::string, Entry> r = {
	    RK_KERNEL(emutest_early_exit),
	    RK_KERNEL(emutest_unwritten_shared),
	    RK_KERNEL(emutest_shuffle_exited),
	    RK_KERNEL(emutest_deadlock),
	    RK_KERNEL(emutest_philox),
	    RK_KERNEL(emutest_uniform),
	};
	return r;
}

// Device memory: each block has kGuard bytes of a known pattern on both sides, checked after
// every launch and GEMM, so a kernel writing past either end of a buffer is caught.
constexpr size_t kGuard = 256;
constexpr unsigned char kGuardByte = 0xa5;

struct Allocation {
	size_t bytes;
	unsigned char* base; // start of the front guard
};

static std::mutex mem_mu;
static std::map<uint64_t, Allocation> allocations; // by data address

// owner returns the allocation holding [p, p+bytes), or nullptr.
static const Allocation* owner(uint64_t p, size_t bytes) {
	auto it = allocations.upper_bound(p);
	if (it == allocations.begin()) return nullptr;
	--it;
	if (p + bytes > it->first + it->second.bytes) return nullptr;
	return &it->second;
}

static thread_local std::string last_error; // per calling thread: callers copy it at once
static std::mutex launch_mu; // static __shared__ storage is global: one launch at a time

static const char* error(std::string msg) {
	last_error = std::move(msg);
	return last_error.c_str();
}

static std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static std::string format(const char* fmt, ...) {
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	return buf;
}

// check_guards_locked reports the first damaged guard, and restores it so that one overrun
// is reported once.
static const char* check_guards_locked(const char* after) {
	for (auto& [addr, a] : allocations) {
		unsigned char* front = a.base;
		unsigned char* back = a.base + kGuard + a.bytes;
		for (size_t i = 0; i < kGuard; i++) {
			if (front[i] != kGuardByte || back[i] != kGuardByte) {
				bool before = front[i] != kGuardByte;
				memset(front, kGuardByte, kGuard);
				memset(back, kGuardByte, kGuard);
				return error(format("%s wrote outside a %zu-byte buffer (%zu bytes %s it)", after, a.bytes,
				                    before ? kGuard - i : i + 1, before ? "before" : "after"));
			}
		}
	}
	return nullptr;
}

}  // namespace emu

using namespace emu;

extern "C" {

const char* emu_launch(const char* name, const char* sig, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, size_t shared_bytes, const uint64_t* args) {
	std::lock_guard<std::mutex> lk(launch_mu);
	auto it = registry().find(name);
	if (it == registry().end()) {
		it = selftests().find(name);
		if (it == selftests().end()) return error(format("no kernel %s", name));
	}
	const Entry& e = it->second;
	if (e.sig != sig) return error(format("%s: launched with argument types %s, the kernel takes %s", name, sig, e.sig.c_str()));
	// The limits every CUDA device since compute capability 3.0 shares; 48 KiB is the dynamic
	// shared memory a kernel gets without opting in to more.
	unsigned long threads = (unsigned long)bx * by * bz;
	if (gx == 0 || gy == 0 || gz == 0 || threads == 0)
		return error(format("%s: empty launch grid (%u,%u,%u) block (%u,%u,%u)", name, gx, gy, gz, bx, by, bz));
	if (bx > 1024 || by > 1024 || bz > 64 || threads > 1024)
		return error(format("%s: block (%u,%u,%u) exceeds the device limits", name, bx, by, bz));
	if (gx > 2147483647u || gy > 65535 || gz > 65535)
		return error(format("%s: grid (%u,%u,%u) exceeds the device limits", name, gx, gy, gz));
	if (shared_bytes > 48 * 1024)
		return error(format("%s: %zu bytes of dynamic shared memory, more than 48 KiB", name, shared_bytes));
	{
		std::lock_guard<std::mutex> mk(mem_mu);
		for (size_t i = 0; i < e.sig.size(); i++) {
			char c = e.sig[i];
			if ((c == 'F' || c == 'I' || c == 'L' || c == 'D') && args[i] != 0 && owner(args[i], 0) == nullptr)
				return error(format("%s: argument %zu (%#llx) is not inside any allocation", name, i,
				                    (unsigned long long)args[i]));
		}
	}
	run(name, dim3(gx, gy, gz), dim3(bx, by, bz), shared_bytes, [&] { e.call(args); });
	std::lock_guard<std::mutex> mk(mem_mu);
	return check_guards_locked(name);
}

const char* emu_signature(const char* name) {
	auto it = registry().find(name);
	return it == registry().end() ? "" : it->second.sig.c_str();
}

int emu_kernel_count(void) { return (int)registry().size(); }

const char* emu_kernel_name(int i) {
	auto it = registry().begin();
	std::advance(it, i);
	return it->first.c_str();
}

uint64_t emu_alloc(size_t bytes, int zero) {
	unsigned char* base = static_cast<unsigned char*>(malloc(bytes + 2 * kGuard));
	if (!base) fatal("out of memory allocating %zu bytes", bytes);
	memset(base, kGuardByte, kGuard);
	memset(base + kGuard, zero ? 0 : 0xff, bytes);
	memset(base + kGuard + bytes, kGuardByte, kGuard);
	uint64_t p = (uint64_t)(uintptr_t)(base + kGuard);
	std::lock_guard<std::mutex> lk(mem_mu);
	allocations[p] = Allocation{bytes, base};
	return p;
}

void emu_free(uint64_t p) {
	std::lock_guard<std::mutex> lk(mem_mu);
	auto it = allocations.find(p);
	if (it == allocations.end()) fatal("free of %#llx, which is not an allocation", (unsigned long long)p);
	free(it->second.base);
	allocations.erase(it);
}

const char* emu_memcpy(uint64_t dst, uint64_t src, size_t bytes) {
	std::lock_guard<std::mutex> lk(mem_mu);
	// One side is device memory (inside an allocation), the other host memory.
	if (owner(dst, bytes) == nullptr && owner(src, bytes) == nullptr)
		return error(format("copy of %zu bytes outside any allocation", bytes));
	memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
	return nullptr;
}

const char* emu_check_guards(void) {
	std::lock_guard<std::mutex> lk(mem_mu);
	return check_guards_locked("a copy");
}

const char* emu_sgemm(int transa, int transb, int m, int n, int k, float alpha, uint64_t a, int lda, uint64_t b,
                      int ldb, float beta, uint64_t c, int ldc) {
	// cuBLAS rejects these with CUBLAS_STATUS_INVALID_VALUE.
	if (m < 0 || n < 0 || k < 0) return error(format("sgemm: negative size m=%d n=%d k=%d", m, n, k));
	if (lda < std::max(1, transa ? k : m) || ldb < std::max(1, transb ? n : k) || ldc < std::max(1, m))
		return error(format("sgemm: leading dimensions lda=%d ldb=%d ldc=%d too small for %c%c m=%d n=%d k=%d", lda,
		                    ldb, ldc, transa ? 'T' : 'N', transb ? 'T' : 'N', m, n, k));
	{
		std::lock_guard<std::mutex> lk(mem_mu);
		// The last element each operand reaches must lie in the same allocation as its first.
		auto span = [](int rows, int cols, int ld) { return ((size_t)(cols - 1) * ld + rows) * sizeof(float); };
		if (m > 0 && n > 0) {
			if (k > 0 && (owner(a, span(transa ? k : m, transa ? m : k, lda)) == nullptr ||
			              owner(b, span(transb ? n : k, transb ? k : n, ldb)) == nullptr))
				return error("sgemm: an input matrix extends past its allocation");
			if (owner(c, span(m, n, ldc)) == nullptr) return error("sgemm: the output extends past its allocation");
		}
	}
	const float* A = reinterpret_cast<const float*>(a);
	const float* B = reinterpret_cast<const float*>(b);
	float* C = reinterpret_cast<float*>(c);
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++) {
			float acc = 0.0f;
			for (int l = 0; l < k; l++) {
				float x = transa ? A[l + (size_t)i * lda] : A[i + (size_t)l * lda];
				float y = transb ? B[j + (size_t)l * ldb] : B[l + (size_t)j * ldb];
				acc += x * y;
			}
			float* out = &C[i + (size_t)j * ldc];
			// As in cuBLAS, C is not read when beta is 0 (so NaN there does not propagate).
			*out = beta == 0.0f ? alpha * acc : alpha * acc + beta * *out;
		}
	std::lock_guard<std::mutex> lk(mem_mu);
	return check_guards_locked("sgemm");
}

}  // extern "C"
