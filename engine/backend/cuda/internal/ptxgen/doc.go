// Command ptxgen compiles the CUDA kernels (engine/backend/cuda/kernels/module.cu) to PTX
// with nvcc for every target in ptxsrc.Arches and writes <arch>.ptx beside the sources, each
// headed by the hash of the sources it came from.
//
//	go run ./engine/backend/cuda/internal/ptxgen [-dir DIR] [-check]
//
// With -check it writes nothing and fails if a committed PTX file differs from what nvcc
// makes now (stale PTX, or a different nvcc than the one that made it).
package main
