package dist

import (
	"fmt"
	"math"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rookscript/rookscript/engine/dist/disttest"
)

// The multi-rank tests run this test binary as the ranks of an mpirun (disttest).
func mpirun(t *testing.T, np int, child string, timeout time.Duration) (string, error) {
	t.Helper()
	return disttest.Run(t, np, child, timeout)
}

func child(t *testing.T) Comm {
	disttest.Child(t)
	c, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// value is rank r's element i: different on every rank and element, with rounding in its sums.
func value(r, i int) float64 {
	return math.Sin(float64(i)*0.7+float64(r)) * math.Pow(10, float64((i+r)%7-3))
}

// TestSumsOnRanks: on 3 ranks, SumF32 and SumF64 give every rank the sum over the ranks in
// rank order, bit for bit, for lengths that do and do not split evenly (0, 1, fewer than the
// ranks, a prime, a large one); Broadcast and Barrier work.
func TestSumsOnRanks(t *testing.T) {
	out, err := mpirun(t, 3, "TestSumsRank", 2*time.Minute)
	if err != nil || strings.Count(out, "--- PASS: TestSumsRank") != 3 {
		t.Fatalf("%v\n%s", err, out)
	}
}

func TestSumsRank(t *testing.T) {
	c := child(t)
	defer c.Close()
	if c.Size() != 3 {
		t.Fatalf("size %d, want 3", c.Size())
	}
	if LocalRank() != c.Rank() { // one machine: the local ranks are the ranks
		t.Fatalf("LocalRank() = %d on rank %d", LocalRank(), c.Rank())
	}
	if r, s, ok := Launched(); !ok || r != c.Rank() || s != 3 {
		t.Fatalf("Launched() = %d, %d, %v; MPI says rank %d", r, s, ok, c.Rank())
	}
	for _, n := range []int{0, 1, 2, 7, 1009, 1 << 20} {
		x32, x64 := make([]float32, n), make([]float64, n)
		for i := range n {
			x32[i], x64[i] = float32(value(c.Rank(), i)), value(c.Rank(), i)
		}
		if err := c.SumF32(x32); err != nil {
			t.Fatal(err)
		}
		if err := c.SumF64(x64); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			w32, w64 := float32(value(0, i)), value(0, i)
			for r := 1; r < 3; r++ {
				w32 += float32(value(r, i))
				w64 += value(r, i)
			}
			if math.Float32bits(x32[i]) != math.Float32bits(w32) || math.Float64bits(x64[i]) != math.Float64bits(w64) {
				t.Fatalf("n=%d element %d: %v, %v; want %v, %v (rank order)", n, i, x32[i], x64[i], w32, w64)
			}
		}
	}
	b := []byte(fmt.Sprintf("rank %d", c.Rank()))
	if err := c.Broadcast(b, 2); err != nil || string(b) != "rank 2" {
		t.Fatalf("broadcast from rank 2: %q, %v", b, err)
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
}

// TestRankFailureEndsTheJob: a rank that aborts, and one killed by SIGKILL while the others
// wait for it in a collective, end the whole job with a non-zero exit in bounded time.
func TestRankFailureEndsTheJob(t *testing.T) {
	for _, c := range []string{"TestAbortRank", "TestKilledRank"} {
		start := time.Now()
		out, err := mpirun(t, 2, c, time.Minute)
		if err == nil {
			t.Errorf("%s: the job exited 0:\n%s", c, out)
		}
		t.Logf("%s: ended after %s: %v", c, time.Since(start).Round(time.Millisecond), err)
	}
}

func TestAbortRank(t *testing.T) {
	c := child(t)
	if c.Rank() == 1 {
		c.Abort(3)
	}
	c.Barrier() // rank 0 waits here for a rank that is gone
	t.Fatal("the barrier returned although rank 1 aborted")
}

func TestKilledRank(t *testing.T) {
	c := child(t)
	if c.Rank() == 1 {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	c.SumF32(make([]float32, 1000))
	t.Fatal("the sum returned although rank 1 was killed")
}

// A process started on its own is the one rank of a world of one, and never starts MPI.
func TestSingle(t *testing.T) {
	if _, _, ok := Launched(); ok {
		t.Skip("started by a launcher (mpirun, srun): this test is of a process started on its own")
	}
	c, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	if _, single := c.(Single); !single || c.Rank() != 0 || c.Size() != 1 {
		t.Fatalf("Open() = %#v", c)
	}
	x := []float32{1, 2}
	if err := c.SumF32(x); err != nil || x[1] != 2 {
		t.Fatalf("a world of one changed its sum: %v %v", x, err)
	}
}

func TestChunks(t *testing.T) {
	for _, c := range []struct{ n, size int }{{0, 3}, {1, 3}, {7, 3}, {9, 3}, {1000, 7}} {
		off := chunks(c.n, c.size)
		if off[0] != 0 || off[c.size] != c.n {
			t.Errorf("chunks(%d, %d) = %v", c.n, c.size, off)
		}
		for r := range c.size {
			if l := off[r+1] - off[r]; l < c.n/c.size || l > c.n/c.size+1 {
				t.Errorf("chunks(%d, %d): part %d has %d", c.n, c.size, r, l)
			}
		}
	}
}
