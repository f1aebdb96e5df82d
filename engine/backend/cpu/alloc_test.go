package cpu

import (
	"errors"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/backend"
)

// An allocation larger on its own than the process may hold panics with an OutOfMemoryError
// saying what was asked for, instead of the runtime's fatal "out of memory"; one that fits is
// made as before.
func TestAllocRefusesMoreThanTheProcessMayHold(t *testing.T) {
	c := New(1)
	if c.limit <= 0 {
		t.Skip("the memory this process may use is unknown here")
	}
	for _, alloc := range []struct {
		name string
		f    func(n int)
	}{{"Alloc", func(n int) { c.Alloc(n) }}, {"AllocI32", func(n int) { c.AllocI32(n) }}} {
		for _, n := range []int{int(c.limit/4) + 1, 1 << 61, -1} {
			err := func() (err error) {
				defer func() {
					if r := recover(); r != nil {
						err, _ = r.(error)
					}
				}()
				alloc.f(n)
				return nil
			}()
			var oom *backend.OutOfMemoryError
			if !errors.As(err, &oom) || !strings.Contains(err.Error(), "more than the") {
				t.Errorf("%s(%d): %v, want an OutOfMemoryError", alloc.name, n, err)
			}
		}
		alloc.f(1 << 10)
	}
}
