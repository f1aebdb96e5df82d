package emu

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/rookscript/rookscript/engine/backend/cuda/kernels"
	"github.com/rookscript/rookscript/engine/backend/cuda/launch"
	"github.com/rookscript/rookscript/engine/gpt2/gpt2test"
	"github.com/rookscript/rookscript/engine/optim"
)

// counting is the emulator's driver counting the launches and the copies each way.
type counting struct {
	Driver
	launches, toHost, toDevice int
}

func (c *counting) Launch(k kernels.Kernel, grid, block launch.Dim, shared int, args []launch.Arg) {
	c.launches++
	c.Driver.Launch(k, grid, block, shared, args)
}

func (c *counting) DtoH(dst unsafe.Pointer, src uintptr, bytes int) {
	c.toHost++
	c.Driver.DtoH(dst, src, bytes)
}

func (c *counting) HtoD(dst uintptr, src unsafe.Pointer, bytes int) {
	c.toDevice++
	c.Driver.HtoD(dst, src, bytes)
}

// TestUpdateLaunches: an update's gradient norms are one launch and one copy to the host, and
// its AdamW step (matrices decaying, biases and LayerNorm not) one launch, whatever the number
// of tensors; their tables reach the device at the first update only.
func TestUpdateLaunches(t *testing.T) {
	d := &counting{}
	m := gpt2test.Random(t, launch.New(d), gpt2test.Tiny(), 1, 1)
	r := rand.New(rand.NewPCG(1, 2))
	g := make([]float32, m.Layout.Total)
	for i := range g {
		g[i] = float32(r.NormFloat64())
	}
	m.EnsureGrads()
	m.B.Upload(m.Grads, g)
	o, err := optim.NewAdamW(m, optim.AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(m.Layout.Tensors); n < 20 {
		t.Fatalf("%d tensors: too few to tell one call from one a tensor", n)
	}
	for update := range 3 {
		tables := 0 // the spans' tables, uploaded once
		if update == 0 {
			tables = 1
		}
		*d = counting{}
		if n := optim.Norms(m); !n.Finite() || n.Total == 0 {
			t.Fatalf("update %d: gradient norm %v", update, n.Total)
		}
		if d.launches != 1 || d.toHost != 1 || d.toDevice != tables {
			t.Errorf("update %d: Norms made %d launches, %d copies to the host and %d to the device; want 1, 1, %d",
				update, d.launches, d.toHost, d.toDevice, tables)
		}
		*d = counting{}
		o.Step(o.LR())
		if d.launches != 1 || d.toHost != 0 || d.toDevice != tables {
			t.Errorf("update %d: the AdamW step made %d launches, %d copies to the host and %d to the device; want 1, 0, %d",
				update, d.launches, d.toHost, d.toDevice, tables)
		}
	}
}
