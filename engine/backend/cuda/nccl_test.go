//go:build cuda

package cuda

import (
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/backend/cuda/internal/invariance"
	"github.com/rookscript/rookscript/engine/backend/cuda/launch"
	"github.com/rookscript/rookscript/engine/dist"
)

// needNCCL skips a test on a machine without NCCL, unless ROOKSCRIPT_NCCL names a file: that
// one must load.
func needNCCL(t *testing.T, b *launch.Backend) {
	t.Helper()
	err := b.Driver().(*driver).run(func() error {
		_, err := loadNCCL()
		return err
	})
	if err != nil {
		if os.Getenv("ROOKSCRIPT_NCCL") != "" {
			t.Fatal(err)
		}
		t.Skipf("no NCCL on this machine, skipped (put libnccl.so.2 on LD_LIBRARY_PATH or name it in ROOKSCRIPT_NCCL to run this): %v", err)
	}
}

// countedRanks passes calls through to the ranks it wraps, counting them.
type countedRanks struct {
	launch.Ranks
	exchanges, gathers int
}

func (c *countedRanks) Exchange(send, recv uintptr, count int) error {
	c.exchanges++
	return c.Ranks.Exchange(send, recv, count)
}

func (c *countedRanks) AllGather(buf uintptr, count int) error {
	c.gathers++
	return c.Ranks.AllGather(buf, count)
}

// TestNCCLWorldOfOne joins a world of one through the real NCCL: the exchange moves data
// between device buffers, the all-gather in place leaves its buffer as it was, and SumRanks —
// through both, not around them — leaves a buffer's bits unchanged.
func TestNCCLWorldOfOne(t *testing.T) {
	b, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	needNCCL(t, b)
	n, err := JoinRanks(b, dist.Single{})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(n.Describe())
	if got := b.JoinedRanks(); got != 1 {
		t.Fatalf("JoinedRanks %d after joining a world of one", got)
	}
	r := rand.New(rand.NewPCG(1, 2))
	bits := func(x []float32) []uint32 {
		u := make([]uint32, len(x))
		for i, v := range x {
			u[i] = math.Float32bits(v)
		}
		return u
	}
	same := func(what string, got, want []float32) {
		t.Helper()
		g, w := bits(got), bits(want)
		for i := range w {
			if g[i] != w[i] {
				t.Fatalf("%s: element %d of %d is %#x, want %#x", what, i, len(w), g[i], w[i])
			}
		}
	}

	const m = 100003
	src, dst := invariance.RandBuf(b, r, m), b.Alloc(m)
	b.Fill(dst, 7)
	if err := n.Exchange(dev(src), dev(dst), m); err != nil {
		t.Fatal(err)
	}
	want, got := make([]float32, m), make([]float32, m)
	b.Download(want, src)
	b.Download(got, dst)
	same("ncclSend/ncclRecv to itself", got, want)
	if err := n.AllGather(dev(src), m); err != nil {
		t.Fatal(err)
	}
	b.Download(got, src)
	same("ncclAllGather in place", got, want)

	counted := &countedRanks{Ranks: n}
	b.JoinRanks(counted)
	lengths := []int{1, 7, 1<<20 + 3}
	for _, l := range lengths {
		x := invariance.RandBuf(b, r, l+2)
		before, after := make([]float32, l+2), make([]float32, l+2)
		b.Download(before, x)
		if err := b.SumRanks(x.Slice(1, l)); err != nil {
			t.Fatalf("SumRanks of %d floats: %v", l, err)
		}
		b.Download(after, x)
		same("SumRanks on a world of one", after, before)
	}
	if counted.exchanges != len(lengths) || counted.gathers != len(lengths) {
		t.Fatalf("SumRanks made %d exchanges and %d all-gathers for %d sums, want one each per sum",
			counted.exchanges, counted.gathers, len(lengths))
	}

	b.JoinRanks(n)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if got := b.JoinedRanks(); got != 0 {
		t.Fatalf("JoinedRanks %d after Close", got)
	}
}

// TestNCCLMissing: a library that is not there is an error naming it and saying what to do.
func TestNCCLMissing(t *testing.T) {
	_, err := openNCCL([]string{"/nonexistent/libnccl.so.2"})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/libnccl.so.2") || !strings.Contains(err.Error(), "ROOKSCRIPT_NCCL") {
		t.Fatalf("loading a missing NCCL: %v", err)
	}
}
