package rollout

import (
	"math"
	"math/rand/v2"
	"testing"
)

// argmaxScan is the reference: one running maximum, replaced only by a larger value.
func argmaxScan(p []float32) int32 {
	best := 0
	for i, v := range p {
		if v > p[best] {
			best = i
		}
	}
	return int32(best)
}

func TestArgmax(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	negZero := float32(math.Copysign(0, -1))
	for _, tc := range []struct {
		name string
		p    []float32
		want int32
	}{
		{"one", []float32{3}, 0},
		{"ties: the first", []float32{1, 5, 2, 5, 5}, 1},
		{"a NaN first wins", []float32{nan, 1, 2}, 0},
		{"a later NaN is never the largest", []float32{1, nan, 2, nan}, 2},
		{"zeros compare equal: the first", []float32{-1, negZero, 0}, 1},
		{"+inf", []float32{1, inf, 2, inf}, 1},
		{"all -inf", []float32{-inf, -inf}, 0},
		{"the largest in a tail past the lanes", append(make([]float32, 17), 1), 17},
		{"the largest in lane 7 of a block", append(make([]float32, 16), 1, 0, 0), 16},
	} {
		if got, ref := Argmax(tc.p), argmaxScan(tc.p); got != tc.want || ref != tc.want {
			t.Errorf("%s: Argmax %d, scan %d, want %d", tc.name, got, ref, tc.want)
		}
	}
	if Argmax(nil) != 0 {
		t.Error("an empty row: want 0")
	}
	// Random rows of every length up to 40 and a vocabulary's, with ties, zeros of both signs,
	// infinities and NaNs drawn in.
	r := rand.New(rand.NewPCG(5, 6))
	special := []float32{0, negZero, inf, -inf, nan, 1, 1}
	for trial := range 4000 {
		n := 1 + trial%40
		if trial%400 == 0 {
			n = 50257
		}
		p := make([]float32, n)
		for i := range p {
			if r.IntN(8) == 0 {
				p[i] = special[r.IntN(len(special))]
			} else {
				p[i] = float32(r.IntN(9) - 4)
			}
		}
		if got, want := Argmax(p), argmaxScan(p); got != want {
			t.Fatalf("row %v: Argmax %d, scan %d", p, got, want)
		}
	}
}

func BenchmarkArgmax(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	p := make([]float32, 50257)
	for i := range p {
		p[i] = float32(r.NormFloat64())
	}
	b.Run("lanes", func(b *testing.B) {
		for b.Loop() {
			Argmax(p)
		}
	})
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			argmaxScan(p)
		}
	})
}
