// The machine's FMA peak (floor.go's fmaPeak), on every thread of the pool at once: chains of
// fused multiply-adds, each independent of the others, more of them than any x86 core's FMA
// units times their latency (two units, four or five cycles), so that the units never wait.
// x·m + c with m just below 1 stays near 1: no overflow, no denormals; the chains' sum, stored
// to a volatile, keeps the compiler from dropping them.
#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define CHAINS(F) F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11)
#define MORE(F) F(12) F(13) F(14) F(15)

// 16 chains of 16 lanes: AVX-512 has 32 registers.
__attribute__((target("avx512f"))) static float fma16(long iters) {
	__m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f), s = _mm512_setzero_ps();
#define DECL(i) __m512 a##i = _mm512_set1_ps(1.0f + (i) * 1e-3f);
#define STEP(i) a##i = _mm512_fmadd_ps(a##i, m, c);
#define SUM(i) s = _mm512_add_ps(s, a##i);
	CHAINS(DECL) MORE(DECL)
	for (long n = 0; n < iters; n++) {
		CHAINS(STEP) MORE(STEP)
	}
	CHAINS(SUM) MORE(SUM)
	return _mm512_reduce_add_ps(s);
#undef DECL
#undef STEP
#undef SUM
}

// 12 chains of 8 lanes: AVX2 has 16 registers, two of them m and c.
__attribute__((target("avx2,fma"))) static float fma8(long iters) {
	__m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f), s = _mm256_setzero_ps();
#define DECL(i) __m256 a##i = _mm256_set1_ps(1.0f + (i) * 1e-3f);
#define STEP(i) a##i = _mm256_fmadd_ps(a##i, m, c);
#define SUM(i) s = _mm256_add_ps(s, a##i);
	CHAINS(DECL)
	for (long n = 0; n < iters; n++) {
		CHAINS(STEP)
	}
	CHAINS(SUM)
	float v[8];
	_mm256_storeu_ps(v, s);
	return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

// fma_rate runs iters steps of the kernel of lanes lanes (16: AVX-512, 8: AVX2 and FMA) and
// returns its floating-point operations per second of this thread's time on a CPU, so that
// another process's time slices do not lower it; 0 where the processor lacks the kernel.
static double fma_rate(int lanes, long iters) {
	volatile float sink = 0;
	double flop = 0;
	struct timespec t0, t1;
	__builtin_cpu_init();
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	if (lanes == 16 && __builtin_cpu_supports("avx512f")) {
		sink = fma16(iters);
		flop = 2.0 * 16 * 16 * iters;
	} else if (lanes == 8 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
		sink = fma8(iters);
		flop = 2.0 * 12 * 8 * iters;
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
	(void)sink;
	return flop / ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec) + 1e-9);
}

struct job {
	pthread_t thread;
	int lanes;
	long iters;
	double rate;
};

static void *run_job(void *p) {
	struct job *j = p;
	j->rate = fma_rate(j->lanes, j->iters);
	return NULL;
}

// rk_fma_peak runs the kernel on threads threads at once, each for about ms milliseconds, and
// returns the sum of their rates in FLOP/s; 0 where the processor lacks the kernel or a thread
// could not start.
double rk_fma_peak(int threads, int lanes, int ms) {
	struct job *jobs = calloc(threads, sizeof *jobs);
	double sum = 0, flop_per_iter = lanes == 16 ? 2.0 * 16 * 16 : 2.0 * 12 * 8;
	long iters = (long)(fma_rate(lanes, 1 << 16) / flop_per_iter * ms / 1e3) + 1;
	int started = 0;
	for (; jobs && started < threads; started++) {
		jobs[started].lanes = lanes;
		jobs[started].iters = iters;
		if (pthread_create(&jobs[started].thread, NULL, run_job, &jobs[started]) != 0) {
			break;
		}
	}
	for (int i = 0; i < started; i++) {
		pthread_join(jobs[i].thread, NULL);
		sum += jobs[i].rate;
	}
	free(jobs);
	return started == threads ? sum : 0;
}
