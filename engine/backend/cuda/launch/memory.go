package launch

import (
	"runtime"
	"sync"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/backend/cuda/kernels"
)

// Device memory is cached by size, as PyTorch's caching allocator does: a buffer the collector
// finds unreachable returns its block to the cache, and the next allocation of the same size
// takes it back, without a driver call. Freeing device memory synchronizes the whole device
// (the driver's Free waits for the stream, cuMemFree for the context); a cleanup run by the
// collector in the middle of a decode step would stall the step at a random launch. Reuse is
// safe in stream order: the block's last users were launched before its Mem became
// unreachable (Arg.Mem, runtime.KeepAlive), and its next users are launched after, on the
// same stream, which runs them in order (the copies and NCCL's collectives too).
//
// Blocks are freed only by Trim: at an allocation that misses the cache while the cache holds
// more than the memory in use (and at least cacheSlack), so that the device never holds more
// than about twice a run's working set; or when a caller asks.

// cacheSlack is the cache a backend keeps whatever its use.
const cacheSlack = 64 << 20

// blockCache is the free blocks by size in bytes.
type blockCache struct {
	mu     sync.Mutex
	free   map[int][]uintptr
	cached int64 // bytes in free
}

// mem allocates n 4-byte elements, zeroed when zero is set. Whatever passes the memory's
// address to the driver keeps the Mem reachable until the driver call is issued (Arg.Mem,
// runtime.KeepAlive): Go may find a value unreachable after its last use, and the cleanup
// would otherwise hand the block to another buffer between taking the address and the kernel
// reading it.
func (b *Backend) mem(n int, zero bool) *backend.Mem {
	m := &backend.Mem{Len: n}
	if n == 0 {
		return m
	}
	size := 4 * n // exact: the emulator's guard bytes sit right after it
	m.Dev = b.cache.take(size)
	switch {
	case m.Dev == 0:
		if c := b.Cached(); c > cacheSlack && c > b.live.Load() {
			b.Trim()
		}
		m.Dev = b.d.Alloc(size, zero)
	case zero:
		b.flat(kernels.Fill, n, argF(backend.Buf{M: m, N: n}), argF32(0), argL(n)) // float zeros: zero bits, for an I32 too
	}
	bytes := int64(size)
	now := b.live.Add(bytes)
	for p := b.peak.Load(); now > p && !b.peak.CompareAndSwap(p, now); p = b.peak.Load() {
	}
	runtime.AddCleanup(m, func(p uintptr) { b.live.Add(-bytes); b.cache.put(size, p) }, m.Dev)
	return m
}

func (c *blockCache) take(size int) uintptr {
	c.mu.Lock()
	defer c.mu.Unlock()
	blocks := c.free[size]
	if len(blocks) == 0 {
		return 0
	}
	p := blocks[len(blocks)-1]
	c.free[size] = blocks[:len(blocks)-1]
	c.cached -= int64(size)
	return p
}

func (c *blockCache) put(size int, p uintptr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.free == nil {
		c.free = map[int][]uintptr{}
	}
	c.free[size] = append(c.free[size], p)
	c.cached += int64(size)
}

// Trim frees every cached block: the device's memory back to the driver, at the cost of one
// wait for the device.
func (b *Backend) Trim() {
	b.cache.mu.Lock()
	free := b.cache.free
	b.cache.free, b.cache.cached = nil, 0
	b.cache.mu.Unlock()
	for _, blocks := range free {
		for _, p := range blocks {
			b.d.Free(p)
		}
	}
}

// Memory is the device memory in use by this backend's buffers now and the most since it
// started or since the last ResetPeak, in bytes. The cache (Cached) and the driver's own use
// (the context, loaded kernels, the BLAS library's workspace) are not counted.
func (b *Backend) Memory() (live, peak int64) { return b.live.Load(), b.peak.Load() }

// Cached is the device memory held in the cache for reuse, in bytes.
func (b *Backend) Cached() int64 {
	b.cache.mu.Lock()
	defer b.cache.mu.Unlock()
	return b.cache.cached
}

// ResetPeak starts a new peak at the memory in use now.
func (b *Backend) ResetPeak() { b.peak.Store(b.live.Load()) }
