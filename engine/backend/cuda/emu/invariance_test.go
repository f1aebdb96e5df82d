package emu

import (
	"testing"

	"github.com/rookscript/rookscript/engine/backend/cuda/internal/invariance"
)

// TestBatchInvariance is DESIGN §6.1 for the CUDA kernels under the emulator (package
// invariance): a row's product is the same bits in any batch, and the sampler's logprobs are
// the training forward's. The emulator's GEMM sums in order at every size, so this checks our
// kernels and their use, not cuBLAS: the GPU's test does that.
func TestBatchInvariance(t *testing.T) {
	invariance.Run(t, New())
}
