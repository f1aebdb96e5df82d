//go:build cuda

// Package cuda is the GPU backend: the host code of package launch driving an NVIDIA GPU
// through gorgonia.org/cu (the CUDA driver API) and cuBLAS, with the kernels of package
// kernels loaded from their embedded PTX; in a data-parallel run, the GPUs of the ranks join
// over NCCL (JoinRanks) to sum gradients on the devices.
//
// It exists only in builds with the cuda tag: gorgonia.org/cu initialises the driver when the
// program starts and exits if there is no GPU, so it must never be linked into the default
// build. Select it with device.Open("cuda", ...) in a binary built by 'make build-cuda'.
//
// All driver calls run one at a time on the calling goroutine's OS thread, with the device's
// primary context (which NCCL uses too) made current there (driver.run), in stream order on
// the default stream, so every kernel sees the results of the ones before it and a download
// waits for all of them. Kernel failures are asynchronous: they surface at the next download;
// set ROOKSCRIPT_CUDA_SYNC=1 to synchronise after every launch and name the failing kernel.
package cuda
