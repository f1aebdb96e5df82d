package cpu

/*
#cgo pkg-config: openblas
#cgo LDFLAGS: -lopenblas

#include <cblas.h>
*/
import "C"

import "unsafe"

// sgemm computes C = alpha·op(A)·op(B) + beta·C for row-major matrices, where op(A) is
// (m, k) and op(B) is (k, n).
func sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	ta, tb := C.CblasNoTrans, C.CblasNoTrans
	if transA {
		ta = C.CblasTrans
	}
	if transB {
		tb = C.CblasTrans
	}
	C.cblas_sgemm(C.CblasRowMajor, uint32(ta), uint32(tb), C.blasint(m), C.blasint(n), C.blasint(k),
		C.float(alpha), (*C.float)(unsafe.Pointer(&a[0])), C.blasint(lda),
		(*C.float)(unsafe.Pointer(&b[0])), C.blasint(ldb),
		C.float(beta), (*C.float)(unsafe.Pointer(&c[0])), C.blasint(ldc))
}

// BLASThreads is the number of threads OpenBLAS uses for one GEMM.
func BLASThreads() int { return int(C.openblas_get_num_threads()) }

// SetBLASThreads sets the number of threads OpenBLAS uses for one GEMM.
func SetBLASThreads(n int) { C.openblas_set_num_threads(C.int(n)) }

// blasCoreName is the family of processors whose kernels OpenBLAS runs.
func blasCoreName() string { return C.GoString(C.openblas_get_corename()) }

// BLASCoreName is the family of processors whose kernels the engine's OpenBLAS runs, once a
// backend exists (chosen by the processor's features, blasfamily.go; BLASCoreReason says
// why): what a peer's BLAS is told to run, for a like-for-like comparison.
func BLASCoreName() string {
	blasCore.Do(setupKernels)
	return blasCoreName()
}

// BLASConfig describes the OpenBLAS build (architecture kernel, threading).
func BLASConfig() string { return C.GoString(C.openblas_get_config()) }
