package cpu

/*
#cgo CFLAGS: -O2
#cgo LDFLAGS: -lm
#include "kernels.h"
*/
import "C"

import (
	"sync"
	"unsafe"
)

func fptr(x []float32) *C.float { return (*C.float)(unsafe.Pointer(unsafe.SliceData(x))) }

func cGELU(out, x []float32) { C.rk_gelu(fptr(out), fptr(x), C.long(len(out))) }

// cGELURows: out = gelu(x) over m rows of cols elements at row stride ld (both).
func cGELURows(out, x []float32, m, cols, ld int) {
	if m == 0 || cols == 0 {
		return
	}
	n := (m-1)*ld + cols
	C.rk_gelu_rows(fptr(out[:n]), fptr(x[:n]), C.long(m), C.long(cols), C.long(ld))
}

// cLayerNorm normalises n rows of c channels (kernels.c's rk_layernorm): the mean of each row
// summed in float64 by four accumulators, its variance summed in float64 in element order,
// then out = ((x − mean)·rstd)·w + b; the vector path runs eight rows side by side, each its
// own row's chains, so a row's result does not depend on the rows beside it.
func cLayerNorm(out, mean, rstd, x, w, b []float32, n, c int, eps float32) {
	if n == 0 || c == 0 {
		return
	}
	C.rk_layernorm(fptr(out[:n*c]), fptr(mean[:n]), fptr(rstd[:n]), fptr(x[:n*c]), fptr(w[:c]), fptr(b[:c]), C.long(n), C.long(c), C.float(eps))
}

// cLayerNormBackward adds n rows' input gradients into dinp and their dw, db terms into dw, db
// in row order (kernels.c's rk_layernorm_backward; the vector path sums eight rows side by
// side, each its own row's chains).
func cLayerNormBackward(dinp, dw, db, dout, x, w, mean, rstd []float32, n, c int) {
	if n == 0 || c == 0 {
		return
	}
	C.rk_layernorm_backward(fptr(dinp[:n*c]), fptr(dw[:c]), fptr(db[:c]), fptr(dout[:n*c]), fptr(x[:n*c]), fptr(w[:c]),
		fptr(mean[:n]), fptr(rstd[:n]), C.long(n), C.long(c))
}

func cGELUBackward(dinp, x, dout []float32) {
	C.rk_gelu_backward(fptr(dinp), fptr(x), fptr(dout), C.long(len(dinp)))
}

func cAdamW(p, g, m, v []float32, b1, b2, eps, decay, step, invSqrtBC2 float32) {
	C.rk_adamw(fptr(p), fptr(g), fptr(m), fptr(v), C.long(len(p)), C.float(b1), C.float(b2),
		C.float(eps), C.float(decay), C.float(step), C.float(invSqrtBC2))
}

func cMaxScaled(x []float32, scale float32) float32 {
	return float32(C.rk_max_scaled(fptr(x), C.long(len(x)), C.float(scale)))
}

// cExpSums writes the two sums into out[0] and out[1]; out is caller-owned (heap) memory, so
// the call allocates nothing.
func cExpSums(x []float32, scale, m float32, out []float64) {
	C.rk_exp_sums(fptr(x), C.long(len(x)), C.float(scale), C.float(m),
		(*C.double)(unsafe.Pointer(&out[0])), (*C.double)(unsafe.Pointer(&out[1])))
}

func cLogProbBackward(x []float32, scale, lse, glogp, gent, h float32) {
	C.rk_logprob_backward(fptr(x), C.long(len(x)), C.float(scale), C.float(lse), C.float(glogp), C.float(gent), C.float(h))
}

// cSoftmax writes softmax(x·scale) into out and returns the row's max m and its sum
// s = Σ e^{x·scale − m} (lse is lseOf(m, s)).
func cSoftmax(out, x []float32, scale float32, s *float64) float32 {
	return float32(C.rk_softmax(fptr(out), fptr(x), C.long(len(x)), C.float(scale), (*C.double)(unsafe.Pointer(s))))
}

// cAttentionDecode attends over n1 positions at k1, v1 then n2 at k2, v2 (row stride ld);
// lse (nh floats, or nil) receives each head's log-sum-exp.
func cAttentionDecode(out, q, k1, v1 []float32, n1 int, k2, v2 []float32, n2, nh, hd, ld int, scale float32, scratch, lse []float32) {
	cAttentionDecodeAhead(out, q, k1, v1, n1, k2, v2, n2, nh, hd, ld, scale, scratch, lse, nil, nil)
}

// cAttentionDecodeAhead is cAttentionDecode fetching nk and nv (the next row's own keys and
// values; empty: none) into L2 meanwhile.
func cAttentionDecodeAhead(out, q, k1, v1 []float32, n1 int, k2, v2 []float32, n2, nh, hd, ld int, scale float32, scratch, lse, nk, nv []float32) {
	var pk, pv *C.float
	if len(nk) > 0 {
		pk, pv = fptr(nk), fptr(nv[:len(nk)])
	}
	C.rk_attention_decode_ahead(fptr(out), fptr(q), fptr(k1), fptr(v1), C.long(n1), fptr(k2), fptr(v2), C.long(n2),
		C.long(nh), C.long(hd), C.long(ld), C.float(scale), fptr(scratch), lsePtr(lse, nh), pk, pv, C.long(len(nk)))
}

// cAttentionDecodeRef is cAttentionDecode's sixteen-lane arithmetic in portable C.
func cAttentionDecodeRef(out, q, k1, v1 []float32, n1 int, k2, v2 []float32, n2, nh, hd, ld int, scale float32, scratch, lse []float32) {
	C.rk_attention_decode_ref(fptr(out), fptr(q), fptr(k1), fptr(v1), C.long(n1), fptr(k2), fptr(v2), C.long(n2),
		C.long(nh), C.long(hd), C.long(ld), C.float(scale), fptr(scratch), lsePtr(lse, nh))
}

// cAttentionRows attends rows query rows (at q, row stride ldq) of one sequence: row i over
// its first n + i positions, n1 of them at k1, v1 and the rest at k2, v2 (row stride ld),
// writing out (row stride ldo) and lse (nh per row).
func cAttentionRows(out []float32, ldo int, q []float32, ldq, rows int, k1, v1 []float32, n1 int, k2, v2 []float32, n, nh, hd, ld int, scale float32, scratch, lse []float32) {
	C.rk_attention_rows(fptr(out[:(rows-1)*ldo+nh*hd]), C.long(ldo), fptr(q[:(rows-1)*ldq+nh*hd]), C.long(ldq), C.long(rows),
		fptr(k1), fptr(v1), C.long(n1), fptr(k2), fptr(v2), C.long(n), C.long(nh), C.long(hd), C.long(ld), C.float(scale),
		fptr(scratch[:4*nh*(n+rows)]), lsePtr(lse, rows*nh))
}

func lsePtr(lse []float32, nh int) *C.float {
	if lse == nil {
		return nil
	}
	return fptr(lse[:nh])
}

// hasDecode16 reports whether decode attention runs in sixteen lanes (AVX-512);
// setDecode16(false) makes it run the AVX2 and scalar paths (tests compare them).
func hasDecode16() bool { return C.rk_decode16() != 0 }

func setDecode16(on bool) { C.rk_set_decode16(cBool(on)) }

// hasAVX2FMA reports whether the processor has AVX2 and FMA (the eight-lane paths' need).
func hasAVX2FMA() bool { return C.rk_has_avx2_fma() != 0 }

// cAttentionProbs and cAttentionDScores run over a block of t score rows of stride w, row r
// seeing its first n0 + r + 1 keys (kernels.h); lse's row stride is ls.
func cAttentionProbs(p []float32, t, w, n0 int, lse []float32, ls int) {
	C.rk_attention_probs(fptr(p[:t*w]), C.long(t), C.long(w), C.long(n0), fptr(lse[:(t-1)*ls+1]), C.long(ls))
}

func cAttentionDScores(dp, p []float32, t, w, n0 int, dy, y []float32, ld, hd int) {
	C.rk_attention_dscores(fptr(dp[:t*w]), fptr(p[:t*w]), C.long(t), C.long(w), C.long(n0),
		fptr(dy[:(t-1)*ld+hd]), fptr(y[:(t-1)*ld+hd]), C.long(ld), C.long(hd))
}

// cColSums adds to acc[c] the sum of x[i·ld + c] over n rows, in row order, for c < len(acc).
func cColSums(acc, x []float32, n, ld int) {
	if n == 0 || len(acc) == 0 {
		return
	}
	C.rk_col_sums(fptr(acc), fptr(x[:(n-1)*ld+len(acc)]), C.long(n), C.long(ld), C.long(len(acc)))
}

// ntKernel is one implementation of gemm_small.c's product; all give the same bits.
type ntKernel int

const (
	ntPortable ntKernel = iota // rk_gemm_nt_ref: portable C
	ntAVX2                     // rk_gemm_nt8: AVX2 and FMA
	ntAVX512                   // rk_gemm_nt: AVX-512
)

func (k ntKernel) String() string {
	return [...]string{"portable C", "AVX2", "AVX-512"}[k]
}

// bestNTKernel is the fastest product kernel the processor runs.
func bestNTKernel() ntKernel {
	switch {
	case C.rk_has_avx512() != 0:
		return ntAVX512
	case C.rk_has_avx2_fma() != 0:
		return ntAVX2
	}
	return ntPortable
}

// ntScratch is the scratch (floats) with which the AVX-512 kernel copies the blocks of a
// product of inner dimension k.
func ntScratch(k int) int { return int(C.rk_gemm_nt_scratch(C.long(k))) }

// cGemmNT computes out[i][j] = res[i][j] + (bias[j] + a[i]·w[j]) for i < m, j0 <= j < j1
// (gemm_small.c), res and bias nil for none (res has out's row stride and may be out), with
// kernel kern; scratch (ntScratch(k) floats, or nil) lets the AVX-512 kernel copy blocks.
func cGemmNT(out, res, a, w, bias []float32, m, j0, j1, k, lda, ldw, ldo int, kern ntKernel, scratch []float32) {
	if m == 0 || j1 <= j0 {
		return
	}
	var b, r, s *C.float
	if bias != nil {
		b = fptr(bias)
	}
	if res != nil {
		r = fptr(res)
	}
	switch kern {
	case ntAVX512:
		if scratch != nil {
			s = fptr(scratch[:ntScratch(k)])
		}
		C.rk_gemm_nt(fptr(out), fptr(a), fptr(w), C.long(m), C.long(j0), C.long(j1), C.long(k), C.long(lda), C.long(ldw), C.long(ldo), r, b, s)
	case ntAVX2:
		C.rk_gemm_nt8(fptr(out), fptr(a), fptr(w), C.long(m), C.long(j0), C.long(j1), C.long(k), C.long(lda), C.long(ldw), C.long(ldo), r, b)
	default:
		C.rk_gemm_nt_ref(fptr(out), fptr(a), fptr(w), C.long(m), C.long(j0), C.long(j1), C.long(k), C.long(lda), C.long(ldw), C.long(ldo), r, b)
	}
}

func cBool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// blasCore runs setupKernels (capability.go) once, before the first backend (and so the
// first BLAS call).
var blasCore sync.Once

// hasAVX512 reports whether the processor has AVX-512 (the sixteen-lane kernels).
func hasAVX512() bool { return C.rk_has_avx512() != 0 }

// hasAVX2 reports whether the vectorised kernel paths are in use.
func hasAVX2() bool { return C.rk_has_avx2() != 0 }

// setAVX2 switches the vectorised kernel paths on or off (tests compare both).
func setAVX2(on bool) { C.rk_set_avx2(cBool(on)) }

// setAVX512 switches kernels.c's sixteen-lane paths on or off, leaving the AVX2 ones (tests
// compare the two).
func setAVX512(on bool) { C.rk_set_avx512(cBool(on)) }

// avx512On reports whether kernels.c runs its sixteen-lane paths.
func avx512On() bool { return C.rk_avx512_on() != 0 }

// cKVWrite copies n rows' keys and values from src (rows of query, key, value) to position
// pos[i] of slot slot[i] of the cache (kernels.c's rk_kv_write); the caller has checked
// every destination is inside kc and vc.
func cKVWrite(kc, vc, src []float32, slot, pos []int32, n, c, capacity int) {
	if n == 0 {
		return
	}
	C.rk_kv_write(fptr(kc), fptr(vc), fptr(src), (*C.int)(unsafe.Pointer(&slot[0])), (*C.int)(unsafe.Pointer(&pos[0])), C.long(n), C.long(c), C.long(capacity))
}
