// Package philox is the sampler's random number generator: Philox4x32-10 (Salmon, Moraes,
// Dror and Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3", SC'11), the counter-based
// generator of Random123, cuRAND and PyTorch's CUDA sampling.
//
// A counter-based generator has no state: the numbers for (seed, stream, position) are one
// function of those three, so a device kernel computes a token's uniform where it samples,
// with no generator state to carry between decode steps or save in a checkpoint, and the
// CPU and the GPU draw the same uniforms for the same seed. The CUDA twin of this file is
// kernels/philox.cuh; tests hold both to Random123's known-answer vectors.
package philox
