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
