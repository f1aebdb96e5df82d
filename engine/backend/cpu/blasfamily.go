package cpu

/*
#include <stdlib.h>
#include "kernels.h"
*/
import "C"

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"unsafe"
)

// OpenBLAS's kernel family is chosen at start by the processor's features, not by OpenBLAS's
// table of processor models, which a release fixes and which may send a processor newer than
// it to narrower kernels than it runs (Prescott's, the slowest). The features
// name a class of families, from the widest instructions the processor and the operating
// system support:
//
//	AVX-512 F, BW, DQ, VL and BF16   Cooperlake (or SapphireRapids where OpenBLAS chose it)
//	AVX-512 F, BW, DQ, VL            SkylakeX
//	AVX2 and FMA                     Haswell (or Zen where OpenBLAS chose it)
//	ROOKSCRIPT_CPU_CAPABILITY=avx2   Haswell (or Zen), on an AVX-512 processor
//	less                             OpenBLAS's own choice
//
// Where OpenBLAS's own choice is a family of that class, it stays: the families of a class
// run the same micro-kernels, with cache blocking that OpenBLAS fits to the processor it
// recognised, and keeping it keeps that processor's backward bits. Otherwise the class's
// first family replaces it, and is held once to a reference product (checkSGEMM); if OpenBLAS
// does not run it or it fails the check, OpenBLAS's own choice comes back, and
// BLASCoreReason says so. OPENBLAS_CORETYPE set by the user wins over all of it.
//
// The choice is made at every start, not cached: the check costs milliseconds, and a cached
// choice decides which native kernels run, so a cache would have to live where a confined
// recipe cannot write (docs/SECURITY.md) and be verified on every load, for no saving that
// matters.

// cpuFeatures are the processor's features that decide OpenBLAS's kernel family.
type cpuFeatures struct {
	AVX2, FMA                                         bool
	AVX512F, AVX512BW, AVX512DQ, AVX512VL, AVX512BF16 bool
}

// processorFeatures reads them (features.c; supported by the operating system too).
func processorFeatures() cpuFeatures {
	f := C.rk_cpu_features()
	has := func(bit C.int) bool { return f&bit != 0 }
	return cpuFeatures{
		AVX2: has(C.RK_AVX2), FMA: has(C.RK_FMA),
		AVX512F: has(C.RK_AVX512F), AVX512BW: has(C.RK_AVX512BW), AVX512DQ: has(C.RK_AVX512DQ),
		AVX512VL: has(C.RK_AVX512VL), AVX512BF16: has(C.RK_AVX512BF16),
	}
}

// blasClass is the widest instructions the SGEMM kernels of an OpenBLAS family run.
type blasClass int

const (
	classOlder      blasClass = iota // SSE or AVX (Prescott … Sandybridge), or a family not listed
	classAVX2                        // AVX2 and FMA
	classAVX512                      // AVX-512 F, BW, DQ, VL
	classAVX512BF16                  // and BF16
)

// blasFamilies are OpenBLAS's x86-64 families of each class, the one chosen for it first.
var blasFamilies = map[blasClass][]string{
	classAVX2:       {"Haswell", "Zen"},
	classAVX512:     {"SkylakeX"},
	classAVX512BF16: {"Cooperlake", "SapphireRapids"},
}

func classOf(family string) blasClass {
	for c, fams := range blasFamilies {
		for _, f := range fams {
			if strings.EqualFold(f, family) {
				return c
			}
		}
	}
	return classOlder
}

// featureClass is the class the features call for (capped: the engine's kernels held at
// AVX2, ROOKSCRIPT_CPU_CAPABILITY), and the features that call for it, in words.
func featureClass(f cpuFeatures, capped bool) (blasClass, string) {
	avx512 := f.AVX512F && f.AVX512BW && f.AVX512DQ && f.AVX512VL
	avx2 := f.AVX2 && f.FMA
	switch {
	case capped && avx2:
		return classAVX2, "AVX2 and FMA (" + CapabilityEnv + "=avx2)"
	case avx512 && f.AVX512BF16:
		return classAVX512BF16, "AVX-512 F, BW, DQ, VL and BF16"
	case avx512:
		return classAVX512, "AVX-512 F, BW, DQ, VL"
	case avx2:
		return classAVX2, "AVX2 and FMA"
	}
	return classOlder, "neither AVX-512 nor AVX2 with FMA"
}

// blasSource is who chose the family OpenBLAS runs.
type blasSource int

const (
	blasUser     blasSource = iota // OPENBLAS_CORETYPE, set by the user
	blasOwn                        // OpenBLAS, a family of the class the features call for (or none better)
	blasFeatures                   // the features, in place of OpenBLAS's own choice, checked
	blasFallback                   // OpenBLAS, after the features' family was refused or failed the check
)

// blasChoice is what setupKernels decided.
type blasChoice struct {
	source blasSource
	core   string // the family OpenBLAS runs
	own    string // the family OpenBLAS chose itself
	want   string // the features' family, where it is not OpenBLAS's own choice
	why    string // the features, in words
	env    string // OPENBLAS_CORETYPE
	err    error  // why the features' family was not kept (blasFallback)
}

func (c blasChoice) reason() string {
	switch c.source {
	case blasUser:
		return "OPENBLAS_CORETYPE=" + c.env + ", set by the user"
	case blasFeatures:
		return fmt.Sprintf("chosen for %s, in place of OpenBLAS's own %s; self-check passed", c.why, c.own)
	case blasFallback:
		return fmt.Sprintf("OpenBLAS's own choice: %s, chosen for %s, was not kept: %v", c.want, c.why, c.err)
	}
	return "OpenBLAS's own choice, for " + c.why
}

// blasOps are the OpenBLAS calls chooseBLASCore makes; tests replace them.
type blasOps struct {
	core  func() string       // the family OpenBLAS runs now
	set   func(string) string // makes OpenBLAS run a family; returns the one it then runs
	own   func() string       // makes OpenBLAS run its own choice again; returns it
	check func() error        // the self-check of the family running
}

// openBLAS drives the OpenBLAS this package links (blas_core.c).
var openBLAS = blasOps{
	core: blasCoreName,
	set: func(f string) string {
		cs := C.CString(f)
		defer C.free(unsafe.Pointer(cs))
		return C.GoString(C.rk_blas_set_core(cs))
	},
	own:   func() string { return C.GoString(C.rk_blas_own_core()) },
	check: checkSGEMM,
}

// chooseBLASCore chooses OpenBLAS's family (see the comment at the top of this file) and
// makes OpenBLAS run it; env and envSet are OPENBLAS_CORETYPE's value and whether it is set.
func chooseBLASCore(env string, envSet bool, f cpuFeatures, capped bool, ops blasOps) blasChoice {
	c := blasChoice{source: blasOwn, own: ops.core(), env: env}
	c.core = c.own
	if envSet {
		c.source = blasUser
		return c
	}
	class, why := featureClass(f, capped)
	c.why = why
	if class == classOlder || classOf(c.own) == class {
		return c
	}
	c.want = blasFamilies[class][0]
	if got := ops.set(c.want); !strings.EqualFold(got, c.want) {
		c.err = fmt.Errorf("OpenBLAS ran %s when asked for it", got)
	} else if err := ops.check(); err != nil {
		c.err = fmt.Errorf("self-check: %w", err)
	} else {
		c.source, c.core = blasFeatures, got
		return c
	}
	c.source, c.core = blasFallback, ops.own()
	return c
}

// blasChosen is setupKernels' choice.
var blasChosen blasChoice

// BLASCoreReason says why OpenBLAS runs the family BLASCoreName names, once a backend
// exists: set by OPENBLAS_CORETYPE, OpenBLAS's own choice, or chosen for the processor's
// features (and checked); and, where the features' family was not kept, why.
func BLASCoreReason() string {
	blasCore.Do(setupKernels)
	return blasChosen.reason()
}

// BLASFamilies are the OpenBLAS families whose kernels the processor runs, the first of each
// class from AVX2's up to the one its features call for (AVX2's alone where
// ROOKSCRIPT_CPU_CAPABILITY caps the kernels), narrowest first; none without AVX2 and FMA, and
// not the features' family where OpenBLAS refused it or it failed the self-check. They are
// what a benchmark tries a peer's OpenBLAS, or this one's (SetBLASCore), under.
func BLASFamilies() []string {
	blasCore.Do(setupKernels)
	class, _ := featureClass(processorFeatures(), capped)
	var out []string
	for c := classAVX2; c <= class; c++ {
		if f := blasFamilies[c][0]; blasChosen.source != blasFallback || f != blasChosen.want {
			out = append(out, f)
		}
	}
	return out
}

// SetBLASCore makes OpenBLAS run family's kernels from the next BLAS call on and returns the
// family it then runs (OpenBLAS's own choice where it has no such family). It must not run
// during a BLAS call, on any thread; SetBLASCore(BLASCoreName()) called before undoes it.
func SetBLASCore(family string) string {
	blasCore.Do(setupKernels)
	return openBLAS.set(family)
}

// checkSGEMM holds OpenBLAS's SGEMM to a plain loop in float64 on each layout the backend
// uses (A·B, Aᵀ·B, A·Bᵀ; row strides wider than the rows; beta 0 and 1), at sizes that reach
// a family's small-matrix kernels (at most 100³ multiply-adds, Aᵀ·B at most 1200 outputs) and
// its packed ones, each element within the rounding a float32 sum of k products may carry.
func checkSGEMM() error { return checkGEMM(sgemm) }

// gemmFunc is sgemm's signature: C = alpha·op(A)·op(B) + beta·C, row-major.
type gemmFunc func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)

// checkGEMM is checkSGEMM's check of gemm (tests hold a wrong product to it).
func checkGEMM(gemm gemmFunc) error {
	r := rand.New(rand.NewPCG(53, 1))
	for _, p := range []struct {
		transA, transB bool
		m, n, k        int
		beta           float32
	}{
		{false, false, 19, 27, 45, 0}, {true, false, 24, 40, 64, 1}, {false, true, 21, 17, 33, 1},
		{false, false, 101, 103, 97, 1}, {true, false, 45, 37, 29, 1}, {false, true, 103, 97, 101, 0},
	} {
		const alpha = 0.75
		m, n, k := p.m, p.n, p.k
		ra, ca := m, k // A as stored: op(A) is (m, k)
		if p.transA {
			ra, ca = k, m
		}
		rb, cb := k, n
		if p.transB {
			rb, cb = n, k
		}
		lda, ldb, ldc := ca+3, cb+1, n+2
		a, b, c := make([]float32, ra*lda), make([]float32, rb*ldb), make([]float32, m*ldc)
		for _, x := range [][]float32{a, b, c} {
			for i := range x {
				x[i] = 2*r.Float32() - 1
			}
		}
		c0 := append([]float32(nil), c...)
		gemm(p.transA, p.transB, m, n, k, alpha, a, lda, b, ldb, p.beta, c, ldc)
		// op(A) by rows and op(B) by columns, each row of k contiguous.
		ar, bc := make([]float64, m*k), make([]float64, n*k)
		for i := range m {
			for l := range k {
				if p.transA {
					ar[i*k+l] = float64(a[l*lda+i])
				} else {
					ar[i*k+l] = float64(a[i*lda+l])
				}
			}
		}
		for j := range n {
			for l := range k {
				if p.transB {
					bc[j*k+l] = float64(b[j*ldb+l])
				} else {
					bc[j*k+l] = float64(b[l*ldb+j])
				}
			}
		}
		for i := range m {
			x := ar[i*k : (i+1)*k]
			for j := range n {
				y := bc[j*k : (j+1)*k]
				var sum, mag float64
				for l, v := range x {
					sum += v * y[l]
					mag += math.Abs(v * y[l])
				}
				cij := float64(p.beta) * float64(c0[i*ldc+j])
				want := alpha*sum + cij
				tol := float64(k+2) * 0x1p-23 * (alpha*mag + math.Abs(cij))
				if got := float64(c[i*ldc+j]); !(math.Abs(got-want) <= tol) {
					return fmt.Errorf("SGEMM transA=%v transB=%v %d×%d×%d: C[%d][%d] = %g, reference %g",
						p.transA, p.transB, m, n, k, i, j, got, want)
				}
			}
		}
	}
	return nil
}
