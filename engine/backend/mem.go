package backend

import (
	"fmt"

	"github.com/dustin/go-humanize"
)

// Mem is one allocation on a device. Host is set for host-memory backends; Dev is the
// device address for accelerator backends.
type Mem struct {
	Host  []float32
	HostI []int32
	Dev   uintptr
	Len   int
}

// Buf is a view of float32 elements [Off, Off+N) of a Mem. The zero Buf is "no buffer"
// (used for optional operands such as a missing bias).
type Buf struct {
	M   *Mem
	Off int
	N   int
}

// Nil reports whether b is the absent buffer.
func (b Buf) Nil() bool { return b.M == nil }

// Slice returns elements [off, off+n) of b.
func (b Buf) Slice(off, n int) Buf {
	if off < 0 || n < 0 || off+n > b.N {
		panic("backend: Buf.Slice out of range")
	}
	return Buf{M: b.M, Off: b.Off + off, N: n}
}

// Overlaps reports whether b and o share an element of the same allocation: an operand a
// kernel writes must not overlap one it reads after writing.
func (b Buf) Overlaps(o Buf) bool {
	return b.M != nil && b.M == o.M && b.N > 0 && o.N > 0 && b.Off < o.Off+o.N && o.Off < b.Off+b.N
}

// F32 returns the host slice behind b (host backends only).
func (b Buf) F32() []float32 { return b.M.Host[b.Off : b.Off+b.N] }

// I32 is a view of int32 elements, used for token ids, positions and row indices.
type I32 struct {
	M   *Mem
	Off int
	N   int
}

// Slice returns elements [off, off+n) of b.
func (b I32) Slice(off, n int) I32 {
	if off < 0 || n < 0 || off+n > b.N {
		panic("backend: I32.Slice out of range")
	}
	return I32{M: b.M, Off: b.Off + off, N: n}
}

// Ints returns the host slice behind b (host backends only).
func (b I32) Ints() []int32 { return b.M.HostI[b.Off : b.Off+b.N] }

// OutOfMemoryError is the panic of an allocation that cannot succeed: larger on its own than
// the memory the process may use (the machine's RAM, or its cgroup's limit). The Go runtime
// would end the process with "fatal error: out of memory" and a dump of every goroutine; this
// says instead what was asked for. Memory plans (grpo.Plan, sft.Plan) refuse what does not
// fit before any work: this catches the calls no plan sized.
type OutOfMemoryError struct {
	Device string
	Bytes  uint64 // asked for
	Limit  int64
}

func (e *OutOfMemoryError) Error() string {
	return fmt.Sprintf("%s: allocating %s, more than the %s this process may use: ask for fewer sequences or tokens at once",
		e.Device, humanize.Bytes(e.Bytes), humanize.Bytes(uint64(e.Limit)))
}
