//go:build cuda

package device

import (
	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/backend/cuda"
)

// CUDAAvailable reports whether this build contains the CUDA backend.
const CUDAAvailable = true

func openCUDA(name string, opt Options) (backend.Backend, error) {
	b, err := cuda.New(opt.Ordinal)
	if err != nil {
		return nil, &OpenError{Device: name, Err: err}
	}
	if opt.World != nil && opt.World.Size() > 1 {
		if _, err := cuda.JoinRanks(b, opt.World); err != nil {
			return nil, &OpenError{Device: name, Err: err}
		}
	}
	return b, nil
}
