// Package kernels holds the CUDA C sources of the CUDA backend's kernels (*.cu, compiled as
// the single translation unit module.cu), the PTX nvcc makes from them for sm_80 (committed,
// so a user needs only the NVIDIA driver and cuBLAS; the driver JIT-compiles it for later
// GPUs), and the table of kernel names and parameter types that the host side launches them
// by.
//
// The same sources also compile as C++ under the CPU emulator (package emu), which is how
// they are tested on machines without a GPU.
package kernels
