// OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernels from the processor's model
// number when it loads. A release does not know processors newer than itself — 0.3.21 does
// not know Sapphire or Emerald Rapids — and then falls back to its Prescott (SSE3) kernels,
// a quarter of the speed of the AVX-512 ones on the same machine. rk_blas_fix_core undoes
// that fallback: when OpenBLAS chose Prescott on its own (no OPENBLAS_CORETYPE in the
// environment) on a processor with AVX-512 or AVX2, it selects the newest kernels of that
// family OpenBLAS has, AVX2's when avx512 is 0 (the engine capped at AVX2). It must run before
// the first BLAS call.
#include <stdlib.h>
#include <strings.h>

#include "kernels.h"

extern void gotoblas_dynamic_init(void);
extern void gotoblas_dynamic_quit(void);
extern char *openblas_get_corename(void);

// set_core makes OpenBLAS run the kernels of the family want, as OPENBLAS_CORETYPE at load
// would have, and returns the family it then runs.
static const char *set_core(const char *want) {
	setenv("OPENBLAS_CORETYPE", want, 1);
	gotoblas_dynamic_quit();
	gotoblas_dynamic_init();
	unsetenv("OPENBLAS_CORETYPE");
	return openblas_get_corename();
}

const char *rk_blas_fix_core(int avx512) {
	const char *core = openblas_get_corename();
	if (core == 0 || strcasecmp(core, "prescott") != 0 || getenv("OPENBLAS_CORETYPE") != 0) return core;
	__builtin_cpu_init();
	const char *want = 0;
	if (avx512 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
	    __builtin_cpu_supports("avx512dq"))
		want = __builtin_cpu_supports("avx512bf16") ? "Cooperlake" : "SkylakeX";
	else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		want = "Haswell";
	if (want == 0) return core;
	return set_core(want);
}

// rk_blas_cap_avx2 makes OpenBLAS run its Haswell (AVX2) kernels where it chose AVX-512 ones
// (SkylakeX, Cooperlake, Sapphire Rapids), unless OPENBLAS_CORETYPE named them: the engine's
// kernels capped at AVX2 (capability.go) run the BLAS of the same machine without AVX-512.
const char *rk_blas_cap_avx2(void) {
	const char *core = openblas_get_corename();
	if (core == 0 || getenv("OPENBLAS_CORETYPE") != 0) return core;
	if (strcasecmp(core, "skylakex") != 0 && strcasecmp(core, "cooperlake") != 0 && strcasecmp(core, "sapphirerapids") != 0)
		return core;
	return set_core("Haswell");
}
