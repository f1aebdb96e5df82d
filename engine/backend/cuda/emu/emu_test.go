package emu

import (
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/backend/cuda/internal/invariance"
	"github.com/rookscript/rookscript/engine/backend/cuda/kernels"
	"github.com/rookscript/rookscript/engine/backend/cuda/launch"
	"github.com/rookscript/rookscript/engine/internal/paritytest"
)

// TestParity runs the CUDA backend's host code and kernels on the emulator against the CPU
// backend: every kernel, determinism, and whole-model steps.
func TestParity(t *testing.T) {
	paritytest.Run(t, New())
}

// TestSignatures: the kernel table the host launches from names exactly the kernels compiled
// from module.cu, with their real parameter types.
func TestSignatures(t *testing.T) {
	var names []string
	for _, k := range kernels.All {
		names = append(names, k.Name)
		sig, ok := Signature(k.Name)
		if !ok {
			t.Errorf("%s: not compiled into the emulator", k.Name)
		} else if sig != k.Sig {
			t.Errorf("%s: kernels.go says %s, the source takes %s", k.Name, k.Sig, sig)
		}
	}
	slices.Sort(names)
	if got := Kernels(); !slices.Equal(got, names) {
		t.Errorf("emulator kernels %v, kernels.All %v", got, names)
	}
}

// The emulator's own checks turn kernel and launch bugs into failures.
func TestEmulatorChecks(t *testing.T) {
	b := New()
	x := b.Alloc(10)
	y := b.Alloc(10)
	mustPanic(t, "argument types", func() {
		Driver{}.Launch(kernels.Fill, launch.D1(1), launch.D1(32), 0, []launch.Arg{{Bits: uint64(x.M.Dev), Kind: 'F'}, {Bits: 10, Kind: 'l'}, {Bits: 10, Kind: 'l'}})
	}, "argument types")
	mustPanic(t, "block too large", func() {
		Driver{}.Launch(kernels.Fill, launch.D1(1), launch.D1(2048), 0, fillArgs(x.M.Dev, 10))
	}, "exceeds the device limits")
	mustPanic(t, "shared memory", func() {
		Driver{}.Launch(kernels.Fill, launch.D1(1), launch.D1(32), 64<<10, fillArgs(x.M.Dev, 10))
	}, "48 KiB")
	mustPanic(t, "pointer outside allocations", func() {
		Driver{}.Launch(kernels.Fill, launch.D1(1), launch.D1(32), 0, fillArgs(12345, 10))
	}, "not inside any allocation")
	// A kernel told the buffer is longer than it is writes past its end into the guard.
	mustPanic(t, "overrun", func() {
		Driver{}.Launch(kernels.Fill, launch.D1(1), launch.D1(64), 0, fillArgs(x.M.Dev, 11))
	}, "wrote outside")
	mustPanic(t, "sgemm leading dimension", func() {
		Driver{}.Sgemm(false, false, 4, 2, 2, 1, x.M.Dev, 3, y.M.Dev, 2, 0, y.M.Dev, 4)
	}, "leading dimensions")
}

func fillArgs(p uintptr, n int) []launch.Arg {
	return []launch.Arg{{Bits: uint64(p), Kind: 'F'}, {Bits: 0, Kind: 'f'}, {Bits: uint64(n), Kind: 'l'}}
}

func mustPanic(t *testing.T, what string, f func(), want string) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Errorf("%s: no panic", what)
			return
		}
		if msg, _ := r.(string); !strings.Contains(msg, want) {
			t.Errorf("%s: panic %v, want it to mention %q", what, r, want)
		}
	}()
	f()
}

// TestGridIndependence: the reductions give the same bits whatever the grid (the emulator's
// three blocks, or the grid a GPU would get), because their partitions depend on the sizes
// only — the property that makes the GPU's results bit-reproducible.
func TestGridIndependence(t *testing.T) {
	run := func(b *launch.Backend) ([]float32, []float64) {
		r := rand.New(rand.NewPCG(3, 4))
		vec := func(n int) backend.Buf { return invariance.RandBuf(b, r, n) }
		const n, c, nh = 37, 40, 2
		p := backend.Pack{Start: []int32{0, 9}, Len: []int32{9, 28}}
		inp, w, dout := vec(n*c), vec(c), vec(n*c)
		out, mean, rstd := b.Alloc(n*c), b.Alloc(n), b.Alloc(n)
		b.LayerNorm(out, mean, rstd, inp, w, w, n, c, 1e-5)
		dinp, dw, db := b.Alloc(n*c), b.Alloc(c), b.Alloc(c)
		b.LayerNormBackward(dinp, dw, db, dout, inp, w, mean, rstd, n, c)
		dbias, dwm := b.Alloc(c), b.Alloc(c*c)
		b.MatMulBackward(backend.Buf{}, dwm, dbias, dout, inp, vec(c*c), n, c, c)
		qkv, ao, lse, dq := vec(n*3*c), b.Alloc(n*c), b.Alloc(n*nh), b.Alloc(n*3*c)
		b.Attention(ao, lse, qkv, p, nh, c)
		b.AttentionBackward(dq, dout, ao, lse, qkv, p, nh, c)
		big := vec(140001)
		var all []float32
		for _, x := range []backend.Buf{out, dinp, dw, db, dbias, ao, lse, dq} {
			h := make([]float32, x.N)
			b.Download(h, x)
			all = append(all, h...)
		}
		sums := make([]float64, 4)
		b.SumSquaresMany(big, []backend.Span{{Off: 0, N: 70000}, {Off: 70000, N: 768}, {Off: 70768, N: 69233}, {Off: 0, N: 140001}}, sums)
		return all, append(sums, b.SumSquares(big))
	}
	small, smallSums := run(launch.New(Driver{Cap: 1}))
	large, largeSums := run(launch.New(Driver{Cap: 1 << 16}))
	for i := range small {
		if math.Float32bits(small[i]) != math.Float32bits(large[i]) {
			t.Fatalf("element %d: %v with one block, %v with a full grid", i, small[i], large[i])
		}
	}
	for i := range smallSums {
		if math.Float64bits(smallSums[i]) != math.Float64bits(largeSums[i]) {
			t.Fatalf("sum of squares %d: %v with one block, %v with a full grid", i, smallSums[i], largeSums[i])
		}
	}
}

// selftest launches one of the emulator's self-test kernels over one block of threads.
func selftest(name string, out backend.Buf, threads, shared int, extra ...launch.Arg) {
	sig := "F"
	args := []launch.Arg{{Bits: uint64(out.M.Dev), Kind: 'F'}}
	for _, a := range extra {
		sig += string(a.Kind)
		args = append(args, a)
	}
	Driver{}.Launch(kernels.Kernel{Name: name, Sig: sig}, launch.D1(1), launch.D1(threads), shared, args)
}

// TestEmulatorSemantics: threads that return before a barrier leave it (as on Volta and
// later), and unwritten dynamic shared memory reads as NaN.
func TestEmulatorSemantics(t *testing.T) {
	b := New()
	out := b.Alloc(64)
	selftest("emutest_early_exit", out, 64, 0, launch.Arg{Bits: 40, Kind: 'i'})
	h := make([]float32, 64)
	b.Download(h, out)
	for i := range 40 {
		if h[i] != float32(39-i) {
			t.Fatalf("early exit: out[%d] = %g, want %d", i, h[i], 39-i)
		}
	}
	selftest("emutest_unwritten_shared", out, 64, 256)
	b.Download(h, out)
	for i, v := range h {
		if !math.IsNaN(float64(v)) {
			t.Fatalf("unwritten shared memory: out[%d] = %g, want NaN", i, v)
		}
	}
}

// TestEmulatorAborts: kernels broken in ways a GPU would not report (a shuffle reading lanes
// that exited; half a warp in a shuffle while the other half waits at __syncthreads) abort
// the process with a message naming the kernel. Each runs in a child process.
func TestEmulatorAborts(t *testing.T) {
	if k := os.Getenv("ROOKSCRIPT_EMU_SELFTEST"); k != "" {
		selftest(k, New().Alloc(64), 64, 0)
		return
	}
	for _, c := range []struct{ kernel, want string }{
		{"emutest_shuffle_exited", "emutest_shuffle_exited: __shfl_xor_sync reads lane"},
		{"emutest_deadlock", "emutest_deadlock: the launch did not finish within 1 s"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestEmulatorAborts$")
		cmd.Env = append(os.Environ(), "ROOKSCRIPT_EMU_SELFTEST="+c.kernel, "ROOKSCRIPT_EMU_TIMEOUT=1")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: exit %v, output:\n%s\nwant it to fail with %q", c.kernel, err, out, c.want)
		}
	}
}

// TestMemoryAccounting: the backend counts the device memory it holds, keeps its peak, and
// stops counting an allocation once the collector has freed it.
func TestMemoryAccounting(t *testing.T) {
	b := New()
	live0, _ := b.Memory()
	b.ResetPeak()
	x := b.Alloc(1000)
	y := b.AllocI32(24)
	if live, peak := b.Memory(); live != live0+4096 || peak != live {
		t.Fatalf("after 4096 bytes: live %d, peak %d (started at %d)", live, peak, live0)
	}
	runtime.KeepAlive(x)
	runtime.KeepAlive(y)
	// Cleanups run after a collection, on a goroutine of their own.
	deadline := time.Now().Add(10 * time.Second)
	for live, _ := b.Memory(); live != live0; live, _ = b.Memory() {
		if time.Now().After(deadline) {
			t.Fatalf("live %d bytes after the buffers became garbage, want %d", live, live0)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if _, peak := b.Memory(); peak != live0+4096 {
		t.Fatalf("peak %d after the free, want %d", peak, live0+4096)
	}
	b.ResetPeak()
	if live, peak := b.Memory(); peak != live {
		t.Fatalf("after ResetPeak: live %d, peak %d", live, peak)
	}
}
