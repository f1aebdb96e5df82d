package device

import (
	"errors"
	"fmt"
)

// The reasons Open refuses a device, wrapped by its *OpenError.
var (
	// ErrUnknown: a name that is neither cpu nor cuda.
	ErrUnknown = errors.New("unknown device (want cpu or cuda)")
	// ErrNoCUDA: cuda asked of a build without the CUDA backend.
	ErrNoCUDA = errors.New("this rookscript was built without CUDA support; " +
		"rebuild with 'make build-cuda' (go build -tags cuda ./cmd/rookscript) on a machine with the NVIDIA driver and CUDA toolkit")
)

// OpenError is a device Open cannot open: the name as the caller wrote it and why.
type OpenError struct {
	Device string // the name passed to Open ("cpu" for the default "")
	// Env and Value are the environment variable at fault and its value, when one is
	// (ROOKSCRIPT_CPU_CAPABILITY); "" otherwise.
	Env, Value string
	Err        error // ErrUnknown, ErrNoCUDA, or the backend's error
}

func (e *OpenError) Error() string { return fmt.Sprintf("device %q: %v", e.Device, e.Err) }
func (e *OpenError) Unwrap() error { return e.Err }
