//go:build !cuda

package device

import "github.com/rookscript/rookscript/engine/backend"

// CUDAAvailable reports whether this build contains the CUDA backend.
const CUDAAvailable = false

func openCUDA(name string, _ Options) (backend.Backend, error) {
	return nil, &OpenError{Device: name, Err: ErrNoCUDA}
}
