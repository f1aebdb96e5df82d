package emu

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookscript/rookscript/engine/backend/cuda/launch"
	"github.com/rookscript/rookscript/engine/gpt2/gpt2test"
	"github.com/rookscript/rookscript/engine/rollout"
)

// memCounting is the emulator's driver counting its allocations and frees (each free a wait
// for the device).
type memCounting struct {
	Driver
	allocs, frees atomic.Int64
}

func (c *memCounting) Alloc(bytes int, zero bool) uintptr {
	c.allocs.Add(1)
	return c.Driver.Alloc(bytes, zero)
}

func (c *memCounting) Free(p uintptr) {
	c.frees.Add(1)
	c.Driver.Free(p)
}

// collect runs the collector until the backend's cache holds at least bytes (cleanups run
// after a collection, on a goroutine of their own).
func collect(t *testing.T, b *launch.Backend, bytes int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); b.Cached() < bytes; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the cache holds %d bytes after the buffers became garbage, want %d", b.Cached(), bytes)
		}
		runtime.GC()
	}
}

// settle runs the collector until the memory in use stops falling: every buffer that was
// garbage has its block in the cache.
func settle(t *testing.T, b *launch.Backend) {
	t.Helper()
	last, still := int64(-1), 0
	for deadline := time.Now().Add(10 * time.Second); still < 5; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the memory in use kept changing for 10 s")
		}
		runtime.GC()
		if live, _ := b.Memory(); live == last {
			still++
		} else {
			last, still = live, 0
		}
	}
}

// TestMemoryCache: a buffer the collector finds unreachable returns its block to the cache
// without freeing it (no wait for the device); an allocation of its size takes it back with
// no driver call, zeroed where the allocation asks for zeros; Trim frees what is cached.
func TestMemoryCache(t *testing.T) {
	d := &memCounting{}
	b := launch.New(d)
	live0, _ := b.Memory()
	func() { // two buffers that become garbage, a float one holding 3s
		x := b.Alloc(1000)
		b.Fill(x, 3)
		b.AllocI32(1000)
	}()
	collect(t, b, 2*4000)
	if live, _ := b.Memory(); live != live0 || d.frees.Load() != 0 {
		t.Fatalf("after the collection: %d bytes in use (want %d), %d frees (want 0)", live, live0, d.frees.Load())
	}
	allocs := d.allocs.Load()
	z, s := b.Alloc(1000), b.AllocI32(1000) // the two blocks back, a float buffer that held 3s among them
	if got := d.allocs.Load() - allocs; got != 0 || b.Cached() != 0 {
		t.Fatalf("allocations of cached sizes called the driver %d times, left %d bytes cached", got, b.Cached())
	}
	host, ints := make([]float32, 1000), make([]int32, 1000)
	b.Download(host, z)
	b.DownloadI32(ints, s)
	for i := range host {
		if host[i] != 0 || ints[i] != 0 {
			t.Fatalf("a reused block is not zeroed: element %d is %v / %d", i, host[i], ints[i])
		}
	}
	runtime.KeepAlive(z)
	runtime.KeepAlive(s)
	collect(t, b, 2*4000)
	b.Trim()
	if b.Cached() != 0 || d.frees.Load() != 2 {
		t.Fatalf("Trim: %d bytes still cached, %d frees (want 0, 2)", b.Cached(), d.frees.Load())
	}
}

// TestRolloutMemoryReused: a second rollout of the same shape, after the first one's buffers
// became garbage, takes every block from the cache: no allocation by the driver and no free,
// so no wait for the device in the middle of its steps.
func TestRolloutMemoryReused(t *testing.T) {
	cfg := gpt2test.Tiny()
	d := &memCounting{}
	b := launch.New(d)
	m := gpt2test.New(t, b, cfg, gpt2test.Params(cfg, 11, 1))
	prompts := [][]int32{{1, 2, 3, 4}, {5, 6}}
	rc := rollout.Config{Group: 2, MaxNewTokens: 6, Temperature: 0.8, Seed: 5, StopToken: gpt2test.Stop}
	first, err := rollout.NewSampler(m).Generate(context.Background(), prompts, rc)
	if err != nil {
		t.Fatal(err)
	}
	settle(t, b)
	allocs, frees := d.allocs.Load(), d.frees.Load()
	second, err := rollout.NewSampler(m).Generate(context.Background(), prompts, rc)
	if err != nil {
		t.Fatal(err)
	}
	if a, f := d.allocs.Load()-allocs, d.frees.Load()-frees; a != 0 || f != 0 {
		t.Errorf("the second rollout made %d allocations and %d frees by the driver, want 0 and 0", a, f)
	}
	if second.Stats.NewTokens != first.Stats.NewTokens {
		t.Errorf("the same rollout twice: %d then %d new tokens", first.Stats.NewTokens, second.Stats.NewTokens)
	}
}
