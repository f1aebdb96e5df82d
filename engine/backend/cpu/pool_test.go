package cpu

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// countJob counts how often each item is run, and when a helper first ran a chunk.
type countJob struct {
	seen   []atomic.Int32
	helper atomic.Int64 // unix ns of a helper's first chunk; 0: none yet
	spin   time.Duration
}

func (j *countJob) run(w, lo, hi int) {
	if w != 0 {
		j.helper.CompareAndSwap(0, time.Now().UnixNano())
	}
	for i := lo; i < hi; i++ {
		j.seen[i].Add(1)
	}
	for t := time.Now(); time.Since(t) < j.spin; {
	}
}

// Every item runs exactly once, whatever the workers, grain and item count, job after job.
func TestPoolRunsEveryItemOnce(t *testing.T) {
	for _, workers := range []int{1, 2, 3, 8} {
		p := newPool(workers)
		for _, c := range []struct{ n, grain int }{{0, 1}, {1, 1}, {5, 0}, {7, 3}, {64, 64}, {1000, 7}, {4096, 1}} {
			for range 3 {
				j := &countJob{seen: make([]atomic.Int32, c.n)}
				p.run(j, c.n, c.grain)
				for i := range j.seen {
					if got := j.seen[i].Load(); got != 1 {
						t.Fatalf("workers %d, n %d, grain %d: item %d ran %d times", workers, c.n, c.grain, i, got)
					}
				}
			}
		}
	}
}

// BenchmarkPoolWake reports how long after run is called a parked helper starts its first
// chunk (median µs/wake): the cost a decode step's products pay about fifty times a step.
// Each job follows 300 µs of work on the caller alone, so the helper has parked.
func BenchmarkPoolWake(b *testing.B) {
	p := newPool(2)
	const chunks = 40
	var waits []float64
	for b.Loop() {
		for t := time.Now(); time.Since(t) < 300*time.Microsecond; {
		}
		j := &countJob{seen: make([]atomic.Int32, chunks), spin: 5 * time.Microsecond}
		t0 := time.Now()
		p.run(j, chunks, 1)
		if h := j.helper.Load(); h != 0 {
			waits = append(waits, float64(h-t0.UnixNano())/1e3)
		}
	}
	if len(waits) > 0 {
		slices.Sort(waits)
		b.ReportMetric(waits[len(waits)/2], "µs/wake")
	}
}
