package cpu

import (
	"os"
	"strings"
	"syscall"
	"unsafe"

	"github.com/rookscript/rookscript/engine/backend"
)

// hugePage is the size of a transparent huge page on x86-64 Linux.
const hugePage = 2 << 20

// hugeMin is the smallest buffer HostFloats advises: a model's weights, gradients and moments
// from 16M parameters up, and GPT-2's LM head chunk, which are read whole in every step. A
// smaller buffer — a layer's KV cache or activations, sized for the longest batch and often
// filled in part — keeps 4 KB pages, whose untouched pages take no memory: advising small
// buffers too made the main job's resident memory grow, and a decode step no faster (nor a KV
// cache in one advised buffer rather than one per layer).
const hugeMin = 64 << 20

// HostFloats returns n zeroed float32s in host memory, like make; a buffer of hugeMin bytes
// or more is marked for transparent huge pages (madvise MADV_HUGEPAGE, its 2 MB-aligned
// interior) before anything touches it, so that the kernel backs it with 2 MB pages where
// the system allows them (/sys/kernel/mm/transparent_hugepage/enabled "always" or "madvise").
//
// Weights, gradients and optimizer moments are read in streams of hundreds of megabytes, and
// with 4 KB pages every stream meets a new page each 4 KB: a decode step of 8 rows, which
// waits on memory, takes longer so, and so do the forward, the train step and a large product
// of few rows (BenchmarkDecode124M, BenchmarkTrainStep124M). Where huge pages are off this
// changes nothing. The advice is a hint about placement: no number depends on it. It stays
// with the memory when the Go heap later reuses it for other objects, which costs nothing.
func HostFloats(n int) []float32 {
	h := backend.TrackHost(make([]float32, n))
	adviseHuge(h)
	return h
}

// adviseHuge marks the whole 2 MB pages inside h for transparent huge pages. It ignores
// failure: a kernel without the advice, or huge pages off, leave 4 KB pages.
func adviseHuge(h []float32) {
	if len(h)*4 < hugeMin {
		return
	}
	base := uintptr(unsafe.Pointer(&h[0]))
	lo := ((base+hugePage-1)&^(hugePage-1) - base) / 4        // first float of the first whole page
	hi := ((base+uintptr(len(h))*4)&^(hugePage-1) - base) / 4 // past the last whole page
	if hi <= lo {
		return
	}
	syscall.Madvise(unsafe.Slice((*byte)(unsafe.Pointer(&h[lo])), (hi-lo)*4), syscall.MADV_HUGEPAGE)
}

// HugePageMode is the system's transparent huge page mode: "always", "madvise" (the buffers
// of HostFloats get them), "never", or "" where the kernel has none.
func HugePageMode() string {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		return ""
	}
	s := string(b)
	if i, j := strings.Index(s, "["), strings.Index(s, "]"); i >= 0 && j > i {
		return s[i+1 : j]
	}
	return strings.TrimSpace(s)
}
