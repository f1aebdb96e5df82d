package gpt2test

import (
	"testing"

	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/gpt2"
)

// TestRandom: a model holds exactly gpt2.RandomParams(cfg, seed) times scale.
func TestRandom(t *testing.T) {
	cfg := Tiny()
	want := gpt2.RandomParams(cfg, 7)
	for _, scale := range []float32{1, 3} {
		got := Random(t, cpu.New(1), cfg, 7, scale).ParamsHost()
		if len(got) != len(want) {
			t.Fatalf("scale %g: %d parameters, want %d", scale, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i]*scale {
				t.Fatalf("scale %g: parameter %d is %g, want %g", scale, i, got[i], want[i]*scale)
			}
		}
	}
}
