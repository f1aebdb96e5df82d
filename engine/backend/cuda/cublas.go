//go:build cuda

package cuda

/*
#include <stddef.h>

// The three cuBLAS entry points the backend calls, with their C signatures (cublas_api.h;
// unchanged from CUDA 11 to 13). cublasStatus_t and cublasOperation_t are C enums (int).
typedef int (*rk_create_fn)(void **handle);
typedef int (*rk_version_fn)(void *handle, int *version);
typedef int (*rk_sgemm_fn)(void *handle, int transa, int transb, int m, int n, int k,
                           const float *alpha, const float *a, int lda, const float *b, int ldb,
                           const float *beta, float *c, int ldc);

static int rk_create(void *f, void **h) { return ((rk_create_fn)f)(h); }
static int rk_version(void *f, void *h, int *v) { return ((rk_version_fn)f)(h, v); }
static int rk_sgemm(void *f, void *h, int ta, int tb, int m, int n, int k, float alpha,
                    unsigned long long a, int lda, unsigned long long b, int ldb, float beta,
                    unsigned long long c, int ldc) {
	return ((rk_sgemm_fn)f)(h, ta, tb, m, n, k, &alpha, (const float *)a, lda, (const float *)b,
	                        ldb, &beta, (float *)c, ldc);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"
)

// cuBLAS is loaded when the first GPU backend opens, not linked: a binary linked against one
// cuBLAS major version (libcublas.so.11 from Debian's toolkit, whose symbols are versioned by
// soname) would not start on a machine whose CUDA ships another (12 or 13). The backend calls
// three functions whose signatures every one of these versions shares, so it takes the newest
// library the loader finds.

// cublasNames are tried in order when ROOKSCRIPT_CUBLAS does not name the library.
var cublasNames = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"}

// cublasLib is a loaded cuBLAS.
type cublasLib struct {
	path                   string
	create, version, sgemm unsafe.Pointer
}

var cublasLoaded *cublasLib

// loadCuBLAS opens cuBLAS once: the file ROOKSCRIPT_CUBLAS names, else the first of
// cublasNames the dynamic loader finds (dynlib.go). It runs inside driver.run, which
// serialises it.
func loadCuBLAS() (*cublasLib, error) {
	if cublasLoaded != nil {
		return cublasLoaded, nil
	}
	tried, ok := dlopenFirst(libCandidates("ROOKSCRIPT_CUBLAS", cublasNames), func(name string, sym func(string) unsafe.Pointer) string {
		var missing []string
		first := func(names ...string) unsafe.Pointer {
			for _, n := range names {
				if p := sym(n); p != nil {
					return p
				}
			}
			missing = append(missing, names[0])
			return nil
		}
		lib := &cublasLib{path: name, create: first("cublasCreate_v2", "cublasCreate"),
			version: first("cublasGetVersion_v2", "cublasGetVersion"), sgemm: first("cublasSgemm_v2", "cublasSgemm")}
		if len(missing) > 0 {
			return "no " + strings.Join(missing, ", ")
		}
		cublasLoaded = lib
		return ""
	})
	if !ok {
		hint := "install cuBLAS (the CUDA toolkit, or pip's nvidia-cublas) and put its lib folder on LD_LIBRARY_PATH, or name the file in ROOKSCRIPT_CUBLAS"
		return nil, fmt.Errorf("loading cuBLAS: %s; %s", strings.Join(tried, "; "), hint)
	}
	return cublasLoaded, nil
}

// cublasHandle is one cuBLAS handle, bound to the CUDA context current when it was created;
// every call runs with that context current (driver.run), on whichever thread, one at a time
// (cuBLAS allows a handle on several threads, not at once). It lives as long as the process,
// like the context.
type cublasHandle struct {
	lib     *cublasLib
	h       unsafe.Pointer
	Version int // e.g. 130000 for 13.0.0
}

func newCuBLAS() (*cublasHandle, error) {
	lib, err := loadCuBLAS()
	if err != nil {
		return nil, err
	}
	b := &cublasHandle{lib: lib}
	if err := cublasErr("cublasCreate", C.rk_create(lib.create, &b.h)); err != nil {
		return nil, fmt.Errorf("%s: %w", lib.path, err)
	}
	var v C.int
	if err := cublasErr("cublasGetVersion", C.rk_version(lib.version, b.h, &v)); err != nil {
		return nil, fmt.Errorf("%s: %w", lib.path, err)
	}
	b.Version = int(v)
	return b, nil
}

// VersionString is the library's version as major.minor.patch.
func (b *cublasHandle) VersionString() string {
	v := b.Version
	if v >= 10000 { // CUDA 11 and later: major·10000 + minor·100 + patch
		return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
	}
	return fmt.Sprint(v)
}

// Sgemm is cublasSgemm on the default stream with host-side alpha and beta.
func (b *cublasHandle) Sgemm(transA, transB bool, m, n, k int, alpha float32, a uintptr, lda int, bm uintptr, ldb int, beta float32, c uintptr, ldc int) error {
	return cublasErr("cublasSgemm", C.rk_sgemm(b.lib.sgemm, b.h, op(transA), op(transB), C.int(m), C.int(n), C.int(k),
		C.float(alpha), C.ulonglong(a), C.int(lda), C.ulonglong(bm), C.int(ldb), C.float(beta), C.ulonglong(c), C.int(ldc)))
}

func op(t bool) C.int {
	if t {
		return 1 // CUBLAS_OP_T
	}
	return 0 // CUBLAS_OP_N
}

// cublasStatus names cublasStatus_t values (cublas_api.h).
var cublasStatus = map[int]string{
	1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED", 7: "CUBLAS_STATUS_INVALID_VALUE",
	8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR", 13: "CUBLAS_STATUS_EXECUTION_FAILED",
	14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED", 16: "CUBLAS_STATUS_LICENSE_ERROR",
}

func cublasErr(call string, s C.int) error {
	if s == 0 {
		return nil
	}
	name, ok := cublasStatus[int(s)]
	if !ok {
		name = fmt.Sprintf("status %d", int(s))
	}
	return errors.New(call + ": " + name)
}
