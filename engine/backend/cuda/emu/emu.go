package emu

/*
#cgo CXXFLAGS: -std=c++20 -O2 -pthread -Wall
#cgo LDFLAGS: -pthread
#include <stdlib.h>
#include "emu.h"
*/
import "C"

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/rookscript/rookscript/engine/backend/cuda/kernels"
	"github.com/rookscript/rookscript/engine/backend/cuda/launch"
)

// DefaultGridCap is the emulator's grid cap: few blocks, so launches are cheap, and an odd
// number, so the kernels' grid-stride loops run with uneven shares.
const DefaultGridCap = 3

// New returns the CUDA backend's host code running on the emulator.
func New() *launch.Backend { return launch.New(Driver{}) }

// Driver runs kernels on the CPU emulator. Device memory is C heap memory with guard bytes
// around every allocation; device addresses are its host addresses.
type Driver struct {
	// Cap is the grid cap (0: DefaultGridCap); a large one gives the grids a GPU would get.
	Cap int
}

var _ launch.Driver = Driver{}

func (Driver) Name() string { return "cuda-emu" }

func (d Driver) GridCap() int {
	if d.Cap > 0 {
		return d.Cap
	}
	return DefaultGridCap
}

func check(what string, msg *C.char) {
	if msg != nil {
		panic(fmt.Sprintf("cuda-emu: %s: %s", what, C.GoString(msg)))
	}
}

func (Driver) Alloc(bytes int, zero bool) uintptr {
	z := C.int(0)
	if zero {
		z = 1
	}
	return uintptr(C.emu_alloc(C.size_t(bytes), z))
}

func (Driver) Free(p uintptr) { C.emu_free(C.uint64_t(p)) }

func (Driver) HtoD(dst uintptr, src unsafe.Pointer, bytes int) {
	check("HtoD", C.emu_memcpy(C.uint64_t(dst), C.uint64_t(uintptr(src)), C.size_t(bytes)))
}

func (Driver) DtoH(dst unsafe.Pointer, src uintptr, bytes int) {
	check("DtoH", C.emu_memcpy(C.uint64_t(uintptr(dst)), C.uint64_t(src), C.size_t(bytes)))
}

// DtoD copies between device memory, as a transfer between two devices' memory would: for
// tests whose ranks, each on an emulated device of its own, reach each other's memory through
// a stand-in for NCCL (emulated devices share this process's memory).
func (Driver) DtoD(dst, src uintptr, bytes int) {
	check("DtoD", C.emu_memcpy(C.uint64_t(dst), C.uint64_t(src), C.size_t(bytes)))
}

func (Driver) Launch(k kernels.Kernel, grid, block launch.Dim, shared int, args []launch.Arg) {
	vals := make([]C.uint64_t, max(len(args), 1))
	sig := make([]byte, len(args))
	for i, a := range args {
		vals[i] = C.uint64_t(a.Bits)
		sig[i] = a.Kind
	}
	name, csig := C.CString(k.Name), C.CString(string(sig))
	defer C.free(unsafe.Pointer(name))
	defer C.free(unsafe.Pointer(csig))
	check(k.Name, C.emu_launch(name, csig, C.uint(grid.X), C.uint(grid.Y), C.uint(grid.Z),
		C.uint(block.X), C.uint(block.Y), C.uint(block.Z), C.size_t(shared), &vals[0]))
}

// Graph is the launches themselves: the emulator has no graphs, so LaunchGraph runs the list
// (one call, as a GPU's graph is one launch).
func (Driver) Graph(ls []launch.Launch) (launch.Graph, error) { return slices.Clone(ls), nil }

func (d Driver) LaunchGraph(g launch.Graph) {
	for _, l := range g.([]launch.Launch) {
		d.Launch(l.Kernel, l.Grid, l.Block, l.Shared, l.Args)
	}
}

func (Driver) DestroyGraph(launch.Graph) {}

func (Driver) Sgemm(transA, transB bool, m, n, k int, alpha float32, a uintptr, lda int, b uintptr, ldb int, beta float32, c uintptr, ldc int) {
	check("Sgemm", C.emu_sgemm(cbool(transA), cbool(transB), C.int(m), C.int(n), C.int(k), C.float(alpha),
		C.uint64_t(a), C.int(lda), C.uint64_t(b), C.int(ldb), C.float(beta), C.uint64_t(c), C.int(ldc)))
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// Signature returns the parameter types of the compiled kernel name in kernels.Kernel.Sig
// letters, and whether the emulator has it.
func Signature(name string) (string, bool) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	s := C.GoString(C.emu_signature(cn))
	return s, s != ""
}

// Kernels lists the names of the kernels compiled into the emulator.
func Kernels() []string {
	n := int(C.emu_kernel_count())
	out := make([]string, n)
	for i := range out {
		out[i] = C.GoString(C.emu_kernel_name(C.int(i)))
	}
	return out
}
