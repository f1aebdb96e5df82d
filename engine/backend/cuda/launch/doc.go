// Package launch is the host side of the CUDA backend: it implements backend.Backend by
// checking every view against the extent a kernel will touch, choosing launch shapes,
// marshalling kernel arguments, managing scratch memory and mapping row-major matrix
// products onto column-major cuBLAS SGEMM — all against a small Driver interface.
//
// Two drivers exist: package cuda (build tag cuda) drives a GPU through gorgonia.org/cu and
// cuBLAS; package emu runs the same kernels, compiled as C++, on the CPU emulator. Because
// everything above the driver is shared, the emulated tests exercise the real host code
// (launch shapes, argument order and types, scratch sizes, GEMM transposition) as well as the
// kernels.
//
// Determinism: every reduction has a partition fixed by the problem size (rows per block,
// elements per chunk) and a fixed combination order, and no kernel uses floating-point
// atomics, so results are bit-identical run after run on a given device.
package launch
