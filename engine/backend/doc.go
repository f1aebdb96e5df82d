// Package backend defines the small set of kernels a device must provide to run GPT-2
// training and sampling, and the memory views those kernels take.
//
// The model (package gpt2) owns every buffer and lays them out once; a step then issues a
// fixed sequence of kernel calls over views of those buffers, so no step allocates. A
// backend implements each kernel for its device: backend/cpu with Go loops on goroutines and
// OpenBLAS SGEMM through cgo, backend/cuda (build tag cuda) with cuBLAS and PTX kernels.
//
// Conventions shared by every kernel:
//   - matrices are row-major; a weight w of a linear map is (out, in), so y = x·wᵀ + b;
//   - a packed batch is several sequences laid end to end with no padding; a token's position
//     restarts at 0 in each sequence and attention never crosses a sequence boundary;
//   - backward kernels accumulate (+=) into parameter gradients and overwrite activation
//     gradients unless their comment says otherwise;
//   - every reduction uses a fixed partition of the data, so results are bit-identical run
//     after run on the same device (determinism is part of the contract, not an accident).
package backend
