// OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernel family from the processor's
// model number when it loads, by a table that a release fixes: it does not know processors
// newer than itself, and then runs kernels narrower than the processor's (its Prescott ones,
// or its Haswell ones on an AVX-512 processor). blasfamily.go chooses the family by the
// processor's features instead; these two calls apply a choice, before the first BLAS call or
// between two, never during one.
#include <stdlib.h>

#include "kernels.h"

extern void gotoblas_dynamic_init(void);
extern void gotoblas_dynamic_quit(void);
extern char *openblas_get_corename(void);

// OpenBLAS reads OPENBLAS_CORETYPE when it initialises its kernel table; unset, it consults
// its own table.
const char *rk_blas_set_core(const char *core) {
	setenv("OPENBLAS_CORETYPE", core, 1);
	gotoblas_dynamic_quit();
	gotoblas_dynamic_init();
	unsetenv("OPENBLAS_CORETYPE");
	return openblas_get_corename();
}

const char *rk_blas_own_core(void) {
	gotoblas_dynamic_quit();
	gotoblas_dynamic_init();
	return openblas_get_corename();
}
