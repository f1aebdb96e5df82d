//go:build cuda

package device

import (
	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/backend/cuda"
)

// CUDAAvailable reports whether this build contains the CUDA backend.
const CUDAAvailable = true

func openCUDA(opt Options) (backend.Backend, error) {
	b, err := cuda.New(opt.Ordinal)
	if err != nil {
		return nil, err
	}
	return b, nil
}
