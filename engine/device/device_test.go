package device

import (
	"errors"
	"testing"
)

func TestOpen(t *testing.T) {
	b, err := Open("cpu", Options{Threads: 1})
	if err != nil || b.Name() != "cpu" {
		t.Fatalf("Open(cpu) = %v, %v", b, err)
	}
	var oe *OpenError
	if _, err := Open("tpu", Options{}); !errors.As(err, &oe) || oe.Device != "tpu" || !errors.Is(err, ErrUnknown) {
		t.Fatalf("Open(tpu): %v, want an *OpenError wrapping ErrUnknown", err)
	}
	if !CUDAAvailable {
		// The refusal names the device as the user wrote it.
		for _, name := range []string{"cuda", "gpu"} {
			_, err := Open(name, Options{})
			if !errors.As(err, &oe) || oe.Device != name || !errors.Is(err, ErrNoCUDA) {
				t.Fatalf("Open(%s) in a build without CUDA: %v, want an *OpenError wrapping ErrNoCUDA", name, err)
			}
		}
	}
}

// TestOpenRefusesUnknownCapability: a ROOKSCRIPT_CPU_CAPABILITY the backend does not know is
// an error naming the variable and its value, not kernels silently left at their widest.
func TestOpenRefusesUnknownCapability(t *testing.T) {
	t.Setenv("ROOKSCRIPT_CPU_CAPABILITY", "avx1024")
	_, err := Open("cpu", Options{Threads: 1})
	var oe *OpenError
	if !errors.As(err, &oe) || oe.Device != "cpu" || oe.Env != "ROOKSCRIPT_CPU_CAPABILITY" || oe.Value != "avx1024" {
		t.Fatalf("Open(cpu) with an unknown capability: %v, want an *OpenError naming the variable and its value", err)
	}
	for _, ok := range []string{"avx2", "AVX512", ""} {
		t.Setenv("ROOKSCRIPT_CPU_CAPABILITY", ok)
		if _, err := Open("cpu", Options{Threads: 1}); err != nil {
			t.Fatalf("Open(cpu) with capability %q: %v", ok, err)
		}
	}
}
