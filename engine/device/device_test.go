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
		_, err := Open("cuda", Options{})
		if err == nil || !strings.Contains(err.Error(), "-tags cuda") {
			t.Fatalf("Open(cuda) in a build without CUDA: %v", err)
		}
	}
}
