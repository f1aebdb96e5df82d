//go:build !cuda

package device

import (
	"errors"

	"github.com/rookscript/rookscript/engine/backend"
)

// CUDAAvailable reports whether this build contains the CUDA backend.
const CUDAAvailable = false

func openCUDA(Options) (backend.Backend, error) {
	return nil, errors.New(`device "cuda": this rookscript was built without CUDA support; ` +
		`rebuild with 'make build-cuda' (go build -tags cuda ./cmd/rookscript) on a machine with the NVIDIA driver and CUDA toolkit`)
}
