package device

import (
	"strings"
	"testing"
)

func TestOpen(t *testing.T) {
	b, err := Open("cpu", Options{Threads: 1})
	if err != nil || b.Name() != "cpu" {
		t.Fatalf("Open(cpu) = %v, %v", b, err)
	}
	if _, err := Open("tpu", Options{}); err == nil || !strings.Contains(err.Error(), "unknown device") {
		t.Fatalf("Open(tpu): %v", err)
	}
	if !CUDAAvailable {
		// The refusal names the device as the user wrote it.
		for _, name := range []string{"cuda", "gpu"} {
			_, err := Open(name, Options{})
			if err == nil || !strings.Contains(err.Error(), "-tags cuda") || !strings.HasPrefix(err.Error(), `device "`+name+`"`) {
				t.Fatalf("Open(%s) in a build without CUDA: %v", name, err)
			}
		}
	}
}

// TestOpenRefusesUnknownCapability: a ROOKSCRIPT_CPU_CAPABILITY the backend does not know is
// an error naming the variable and its value, not kernels silently left at their widest.
func TestOpenRefusesUnknownCapability(t *testing.T) {
	t.Setenv("ROOKSCRIPT_CPU_CAPABILITY", "avx1024")
	_, err := Open("cpu", Options{Threads: 1})
	if err == nil || !strings.Contains(err.Error(), `ROOKSCRIPT_CPU_CAPABILITY="avx1024"`) || !strings.Contains(err.Error(), "avx2") {
		t.Fatalf("Open(cpu) with an unknown capability: %v", err)
	}
	for _, ok := range []string{"avx2", "AVX512", ""} {
		t.Setenv("ROOKSCRIPT_CPU_CAPABILITY", ok)
		if _, err := Open("cpu", Options{Threads: 1}); err != nil {
			t.Fatalf("Open(cpu) with capability %q: %v", ok, err)
		}
	}
}
