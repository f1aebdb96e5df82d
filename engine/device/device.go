// Package device opens a compute backend by name ("cpu", "cuda"), the one place that knows
// which backends this build contains.
package device

import (
	"os"
	"strings"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/dist"
)

// Options tune a backend; zero values mean the defaults.
type Options struct {
	Threads int // cpu: worker goroutines (0: GOMAXPROCS)
	Ordinal int // cuda: which GPU
	// World is the run's ranks (nil: a world of one). cuda: in a world of more than one, every
	// rank opens its GPU at the same point, and the GPUs join over NCCL to sum gradients where
	// they lie (backend.RankSummer).
	World dist.Comm
}

// Open returns the backend called name. A device it cannot open is an *OpenError.
func Open(name string, opt Options) (backend.Backend, error) {
	switch strings.ToLower(name) {
	case "", "cpu":
		if err := cpu.CheckCapability(); err != nil {
			return nil, &OpenError{Device: "cpu", Env: cpu.CapabilityEnv, Value: os.Getenv(cpu.CapabilityEnv), Err: err}
		}
		return cpu.New(opt.Threads), nil
	case "cuda", "gpu":
		return openCUDA(name, opt)
	}
	return nil, &OpenError{Device: name, Err: ErrUnknown}
}
