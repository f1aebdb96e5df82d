//go:build !cuda

package device

import (
	"fmt"

	"github.com/rookscript/rookscript/engine/backend"
)

// CUDAAvailable reports whether this build contains the CUDA backend.
const CUDAAvailable = false

func openCUDA(name string, _ Options) (backend.Backend, error) {
	return nil, fmt.Errorf("device %q: this rookscript was built without CUDA support; "+
		"rebuild with 'make build-cuda' (go build -tags cuda ./cmd/rookscript) on a machine with the NVIDIA driver and CUDA toolkit", name)
}
