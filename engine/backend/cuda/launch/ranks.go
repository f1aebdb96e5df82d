package launch

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/backend/cuda/kernels"
)

// Ranks is how the backends of a data-parallel run's ranks reach each other's device memory:
// one per rank (package cuda's over NCCL; the tests' in-process fake). Addresses are device
// addresses, counts are float32 elements. Each call is ordered on the device after the
// launches before it and before the launches after it (NCCL on the launches' stream), and
// every rank makes the same calls with the same counts in the same order. An error means the
// ranks can no longer be trusted to agree: the run ends.
type Ranks interface {
	Rank() int
	Size() int
	// Exchange is an all-to-all of equal chunks: send holds Size() chunks of count floats, the
	// q-th for rank q, and chunk q of recv receives rank q's chunk for this rank. send and recv
	// do not overlap.
	Exchange(send, recv uintptr, count int) error
	// AllGather: buf holds Size() chunks of count floats; chunk q of every rank's buf becomes
	// rank q's chunk q, in place.
	AllGather(buf uintptr, count int) error
}

// JoinRanks makes SumRanks sum over r's ranks (nil: over none).
func (b *Backend) JoinRanks(r Ranks) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ranks = r
}

// JoinedRanks is the size of the joined ranks' world, 0 when none are joined.
func (b *Backend) JoinedRanks() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ranks == nil {
		return 0
	}
	return b.ranks.Size()
}

var _ backend.RankSummer = (*Backend)(nil)

// SumRanks replaces x, on every rank, with its element-wise sum over the joined ranks, in the
// order engine/dist's SumF32 takes it through the host, so that both give the same bits: rank
// r receives chunk r of every rank (Exchange), adds the ranks' chunks in rank order with
// rkcu_add and rkcu_add_to — one float32 rounding per add, no FMA (the PTX is compiled
// --fmad=false) — and every rank gets every sum (AllGather). NCCL's all-reduce is not used:
// its order of addition is set by its algorithm and the topology, not by the ranks.
//
// x is padded, on the device, to a multiple of the ranks' number: the scratch this takes, as
// much as x (twice when it needs padding), stays with the backend for the next call.
func (b *Backend) SumRanks(x backend.Buf) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.ranks
	if r == nil {
		return errors.New("cuda: SumRanks: the backend has joined no ranks (JoinRanks)")
	}
	size, rank := r.Size(), r.Rank()
	if size < 1 || rank < 0 || rank >= size {
		return fmt.Errorf("cuda: SumRanks: rank %d of %d", rank, size)
	}
	n := x.N
	if n == 0 {
		return nil // every rank has the same length, so every rank returns here
	}
	chunk := ceilDiv(n, size)
	all := x
	if size*chunk != n {
		all = backend.Buf{M: b.scratch(&b.rankPad, size*chunk), N: size * chunk}
		b.flat(kernels.Copy, n, argF(all.Slice(0, n)), argF(x), argL(n))
		b.flat(kernels.Fill, all.N-n, argF(all.Slice(n, all.N-n)), argF32(0), argL(all.N-n))
	}
	recv := backend.Buf{M: b.scratch(&b.rankRecv, size*chunk), N: size * chunk}
	err := r.Exchange(addrF(all), addrF(recv), chunk)
	runtime.KeepAlive(all.M)
	runtime.KeepAlive(recv.M)
	if err != nil {
		return fmt.Errorf("cuda: SumRanks: rank %d of %d: exchanging %d floats: %w", rank, size, size*chunk, err)
	}
	// Chunk r of all is this rank's sum: its values went out in the exchange.
	mine := all.Slice(rank*chunk, chunk)
	slot := func(q int) backend.Buf { return recv.Slice(q*chunk, chunk) }
	if size == 1 {
		b.flat(kernels.Copy, chunk, argF(mine), argF(slot(0)), argL(chunk))
	} else {
		b.flat(kernels.Add, chunk, argF(mine), argF(slot(0)), argF(slot(1)), argL(chunk))
		for q := 2; q < size; q++ {
			b.flat(kernels.AddTo, chunk, argF(mine), argF(slot(q)), argL(chunk))
		}
	}
	err = r.AllGather(addrF(all), chunk)
	runtime.KeepAlive(all.M)
	if err != nil {
		return fmt.Errorf("cuda: SumRanks: rank %d of %d: gathering %d floats: %w", rank, size, size*chunk, err)
	}
	if all.M != x.M {
		b.flat(kernels.Copy, n, argF(x), argF(all.Slice(0, n)), argL(n))
	}
	return nil
}
