package backend

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// hostLive is the bytes of host buffers the engine holds: weights, gradients, moments,
// activations and caches of host backends. The Go heap holds them beside everything else, so
// this is what tells the engine's share of the heap from the rest (the Lua heap of a recipe,
// which luabind bounds).
var hostLive atomic.Int64

// TrackHost counts s as engine memory until the garbage collector frees it, and returns s.
func TrackHost[T any](s []T) []T {
	if len(s) == 0 {
		return s
	}
	n := int64(len(s)) * int64(unsafe.Sizeof(s[0]))
	hostLive.Add(n)
	runtime.AddCleanup(&s[0], func(n int64) { hostLive.Add(-n) }, n)
	return s
}

// HostLive is the bytes of the tracked buffers not yet freed (a buffer dropped stays counted
// until a garbage collection frees it).
func HostLive() int64 { return hostLive.Load() }
