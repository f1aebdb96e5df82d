// C interface of the emulator (emu.cc) for cgo. Errors come back as messages (NULL: success),
// valid until the next call.
#ifndef ROOKSCRIPT_EMU_H
#define ROOKSCRIPT_EMU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Launches kernel name with the given configuration. args holds one 64-bit slot per kernel
// parameter (pointers, or the value in the low bytes); sig is the host's idea of the
// parameter types, checked against the kernel's real signature.
const char* emu_launch(const char* name, const char* sig, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, size_t shared_bytes, const uint64_t* args);

// The signature of kernel name ("" if there is none) and the number of kernels compiled in.
const char* emu_signature(const char* name);
int emu_kernel_count(void);
const char* emu_kernel_name(int i);

// Device memory: guarded heap blocks. Without zero, the contents are 0xff bytes (NaN).
uint64_t emu_alloc(size_t bytes, int zero);
void emu_free(uint64_t p);
const char* emu_memcpy(uint64_t dst, uint64_t src, size_t bytes);
// emu_check_guards reports the first allocation whose guard bytes were overwritten.
const char* emu_check_guards(void);

// cublasSgemm semantics (column-major), including its argument checks.
const char* emu_sgemm(int transa, int transb, int m, int n, int k, float alpha, uint64_t a, int lda, uint64_t b,
                      int ldb, float beta, uint64_t c, int ldc);

#ifdef __cplusplus
}
#endif

#endif
