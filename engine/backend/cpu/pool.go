package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// job is one parallel kernel invocation: run handles items [lo, hi) on worker w.
// Kernels keep their job structs inside the backend, so dispatching allocates nothing.
type job interface {
	run(w, lo, hi int)
}

// pool runs jobs over a fixed set of goroutines. Items are cut into chunks of a fixed grain;
// workers claim chunks in any order, so a job must make each chunk's result independent of
// which worker ran it (per-chunk partial results, never per-worker ones, for reductions).
//
// A helper parks as soon as its job is done. Spinning for the next one instead (helpers and
// the caller spinning a while before parking, so that a decode step's calls, close together,
// wake no one) saves a wake-up (BenchmarkPoolWake), yet made the 8-row decode step's products
// slower, the spinning taking the cores they run on (the 64-row ones gained a little).
type pool struct {
	workers int
	wake    []chan struct{}
	nudge   chan struct{} // the no-op goroutines' (see run)
	done    sync.WaitGroup

	j      job
	n      int
	grain  int
	chunks int64
	next   atomic.Int64
}

func newPool(workers int) *pool {
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	p := &pool{workers: workers, nudge: make(chan struct{})}
	if workers > 1 {
		for range nudgers {
			go func() {
				for range p.nudge {
				}
			}()
		}
	}
	for w := 1; w < workers; w++ {
		ch := make(chan struct{})
		p.wake = append(p.wake, ch)
		go func(w int) {
			for range ch {
				p.work(w)
				p.done.Done()
			}
		}(w)
	}
	return p
}

// nudgers is the number of no-op goroutines a pool with helpers keeps (see run).
const nudgers = 4

// chunkCount is the number of chunks n items make at the given grain.
func chunkCount(n, grain int) int { return (n + grain - 1) / grain }

// run executes j over n items in chunks of grain and waits for all of them.
func (p *pool) run(j job, n, grain int) {
	if n <= 0 {
		return
	}
	if grain < 1 {
		grain = 1
	}
	chunks := chunkCount(n, grain)
	if chunks == 1 || p.workers == 1 {
		for c := 0; c < chunks; c++ {
			j.run(0, c*grain, min(n, (c+1)*grain))
		}
		return
	}
	p.j, p.n, p.grain, p.chunks = j, n, grain, int64(chunks)
	p.next.Store(0)
	helpers := min(p.workers-1, chunks-1)
	p.done.Add(helpers)
	for w := 0; w < helpers; w++ {
		p.wake[w] <- struct{}{}
	}
	// A goroutine woken by a send waits in this P's runnext slot, and an idle P takes it from
	// there only after a short sleep (usleep(3) in runqgrab, the runtime's proc.go, which
	// expects the sender to block at once and run it here). With the idle processor halting
	// and waking around that sleep, a parked helper can start long after the send. Waking one
	// more goroutine, which does nothing, takes the runnext slot and moves the helper to the
	// run queue, which an idle P takes from at once (`go test -bench PoolWake
	// ./engine/backend/cpu`); GPT-2 124M's forward and decode steps take less time so. The
	// no-op goroutines wait on a channel: started anew, they raise a train step's heap
	// allocations (the runtime's own) more than parked ones do. One not run since its last
	// wake-up is not waiting, and there are enough of them that one is.
	select {
	case p.nudge <- struct{}{}:
	default:
	}
	p.work(0)
	p.done.Wait()
	p.j = nil
}

func (p *pool) work(w int) {
	for {
		c := p.next.Add(1) - 1
		if c >= p.chunks {
			return
		}
		lo := int(c) * p.grain
		p.j.run(w, lo, min(p.n, lo+p.grain))
	}
}
