package emu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// fakeWorld stands in for NCCL between emulated backends in one process, one goroutine per
// rank: each call publishes the rank's buffer, waits for every rank, and copies what NCCL
// would move (Driver.DtoD), then waits again so that no buffer is reused before every rank
// has read it.
type fakeWorld struct {
	size  int
	mu    sync.Mutex
	cond  *sync.Cond
	here  int // ranks at the barrier
	round int
	addr  []uintptr
	count []int
	calls map[string]int
}

func newFakeWorld(size int) *fakeWorld {
	w := &fakeWorld{size: size, addr: make([]uintptr, size), count: make([]int, size), calls: map[string]int{}}
	w.cond = sync.NewCond(&w.mu)
	return w
}

func (w *fakeWorld) wait() {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.round
	if w.here++; w.here == w.size {
		w.here, w.round = 0, w.round+1
		w.cond.Broadcast()
		return
	}
	for w.round == r {
		w.cond.Wait()
	}
}

// publish makes this rank's buffer and count visible to all, and checks that every rank
// passed the same count, as NCCL requires of matching calls.
func (w *fakeWorld) publish(op string, rank int, addr uintptr, count int) error {
	w.mu.Lock()
	w.addr[rank], w.count[rank] = addr, count
	w.calls[op]++
	w.mu.Unlock()
	w.wait()
	for q, c := range w.count {
		if c != count {
			w.wait()
			return fmt.Errorf("%s: rank %d passed %d floats, rank %d %d", op, rank, count, q, c)
		}
	}
	return nil
}

type fakeRank struct {
	w    *fakeWorld
	rank int
}

func (r fakeRank) Rank() int { return r.rank }
func (r fakeRank) Size() int { return r.w.size }

func (r fakeRank) Exchange(send, recv uintptr, count int) error {
	if err := r.w.publish("exchange", r.rank, send, count); err != nil {
		return err
	}
	for q := range r.w.size {
		Driver{}.DtoD(recv+uintptr(4*q*count), r.w.addr[q]+uintptr(4*r.rank*count), 4*count)
	}
	r.w.wait()
	return nil
}

func (r fakeRank) AllGather(buf uintptr, count int) error {
	if err := r.w.publish("allgather", r.rank, buf, count); err != nil {
		return err
	}
	for q := range r.w.size {
		if q != r.rank {
			Driver{}.DtoD(buf+uintptr(4*q*count), r.w.addr[q]+uintptr(4*q*count), 4*count)
		}
	}
	r.w.wait()
	return nil
}

// rankValues are a rank's n values, of either sign and magnitudes a few binades apart, so that
// many sums of three round differently in different orders.
func rankValues(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(math.Ldexp(rng.Float64()+0.5, rng.IntN(8)-4))
		if rng.IntN(2) == 0 {
			x[i] = -x[i]
		}
	}
	return x
}

// TestSumRanks: SumRanks on 2 and 3 emulated devices, through the fake transport, gives every
// rank the same bits, equal to the float32 sum of the ranks' values in rank order (what
// engine/dist's SumF32 gives through the host), for lengths that are and are not multiples of
// the ranks' number, on a view with neighbours it must not touch.
func TestSumRanks(t *testing.T) {
	for _, size := range []int{2, 3} {
		for _, n := range []int{1, 2, 7, 3 * 1024, 1000003} {
			t.Run(fmt.Sprintf("%d_ranks_%d", size, n), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(size), uint64(n)))
				xs := make([][]float32, size)
				for r := range xs {
					xs[r] = rankValues(rng, n)
				}
				want := make([]float32, n)
				orderMatters := 0
				for i := range want {
					s := xs[0][i]
					for r := 1; r < size; r++ {
						s += xs[r][i]
					}
					want[i] = s
					back := xs[size-1][i]
					for r := size - 2; r >= 0; r-- {
						back += xs[r][i]
					}
					if math.Float32bits(back) != math.Float32bits(s) {
						orderMatters++
					}
				}
				// Addition of two floats is commutative; of three, the values must make the
				// order show, or this test could not see a wrong one.
				if size > 2 && n >= 7 && orderMatters == 0 {
					t.Fatalf("no element's sum depends on the order of the ranks: the test cannot see a wrong order")
				}
				got := sumOnRanks(t, newFakeWorld(size), xs)
				for r := range got {
					for i := range want {
						if math.Float32bits(got[r][i]) != math.Float32bits(want[i]) {
							t.Fatalf("rank %d, element %d of %d: %g (%#x), want %g (%#x), the rank-order sum of %v",
								r, i, n, got[r][i], math.Float32bits(got[r][i]), want[i], math.Float32bits(want[i]), column(xs, i))
						}
					}
				}
				if size > 2 {
					t.Logf("%d of %d sums would differ in the reverse order", orderMatters, n)
				}
			})
		}
	}
}

func column(xs [][]float32, i int) []float32 {
	c := make([]float32, len(xs))
	for r := range xs {
		c[r] = xs[r][i]
	}
	return c
}

// sentinel fills the elements around the view SumRanks works on.
const sentinel = float32(-12345.5)

// sumOnRanks runs SumRanks on one emulated backend per rank, rank r's buffer holding xs[r]
// (in a view, sentinels on each side), and returns what each rank's buffer holds after.
func sumOnRanks(t *testing.T, w *fakeWorld, xs [][]float32) [][]float32 {
	t.Helper()
	out := make([][]float32, len(xs))
	var wg sync.WaitGroup
	for r := range xs {
		wg.Go(func() {
			n := len(xs[r])
			b := New()
			b.JoinRanks(fakeRank{w, r})
			if got := b.JoinedRanks(); got != w.size {
				t.Errorf("rank %d: JoinedRanks %d, want %d", r, got, w.size)
			}
			whole := b.Alloc(n + 4)
			host := make([]float32, n+4)
			host[0], host[1], host[n+2], host[n+3] = sentinel, sentinel, sentinel, sentinel
			copy(host[2:], xs[r])
			b.Upload(whole, host)
			if err := b.SumRanks(whole.Slice(2, n)); err != nil {
				t.Errorf("rank %d: %v", r, err)
			}
			b.Download(host, whole)
			for _, i := range []int{0, 1, n + 2, n + 3} {
				if host[i] != sentinel {
					t.Errorf("rank %d: element %d outside the view changed to %g", r, i, host[i])
				}
			}
			out[r] = host[2 : n+2]
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if w.calls["exchange"] != w.size || w.calls["allgather"] != w.size {
		t.Fatalf("transport calls %v, want one exchange and one all-gather per rank", w.calls)
	}
	return out
}

// TestSumRanksErrors: a backend that joined no ranks refuses, and a transport's error comes
// back naming the rank.
func TestSumRanksErrors(t *testing.T) {
	b := New()
	if b.JoinedRanks() != 0 {
		t.Fatalf("a new backend has joined %d ranks", b.JoinedRanks())
	}
	if err := b.SumRanks(b.Alloc(3)); err == nil || !strings.Contains(err.Error(), "joined no ranks") {
		t.Fatalf("SumRanks without ranks: %v", err)
	}
	b.JoinRanks(failing{})
	err := b.SumRanks(b.Alloc(3))
	if err == nil || !strings.Contains(err.Error(), "rank 1 of 2") || !strings.Contains(err.Error(), "peer gone") {
		t.Fatalf("SumRanks over a failing transport: %v", err)
	}
	b.JoinRanks(nil)
	if b.JoinedRanks() != 0 {
		t.Fatalf("JoinRanks(nil) left %d ranks", b.JoinedRanks())
	}
}

type failing struct{}

func (failing) Rank() int                            { return 1 }
func (failing) Size() int                            { return 2 }
func (failing) Exchange(uintptr, uintptr, int) error { return fmt.Errorf("peer gone") }
func (failing) AllGather(uintptr, int) error         { return fmt.Errorf("peer gone") }
