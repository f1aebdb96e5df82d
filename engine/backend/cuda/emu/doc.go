// Package emu runs the CUDA backend without a GPU: the kernels of package kernels, compiled
// as C++ under a small CUDA emulator (cuda_emu.h, emu.cc), behind the same host code (package
// launch) the GPU uses. It exists to test the kernels and their launches on any machine; it is
// far too slow for real work.
//
// The emulator runs each block's CUDA threads as OS threads with real barriers for
// __syncthreads, __syncwarp and warp shuffles, per-block shared memory (dynamic shared memory
// poisoned with NaN before every block), guard bytes around every allocation (checked after
// each launch), argument types checked against the kernels' real signatures, and the launch
// limits of a real device. It gives each launch at most a few blocks (the kernels loop over
// their work, so results do not depend on the grid). SGEMM is a plain loop with cuBLAS's
// semantics and argument checks. Misuse it can see — a shuffle reading a lane that exited, a
// launch that deadlocks — aborts the process naming the kernel; selftest.h holds kernels
// that do these things on purpose, for the tests. docs/CUDA.md lists what it cannot catch.
package emu
