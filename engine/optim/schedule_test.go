package optim

import (
	"math"
	"testing"
)

func TestSchedules(t *testing.T) {
	cases := []struct {
		s    Schedule
		step int
		want float64
	}{
		{Schedule{Kind: "constant", Peak: 1e-4}, 1, 1e-4},
		{Schedule{Kind: "constant", Peak: 1e-4, Warmup: 10}, 1, 1e-4},
		{Schedule{Kind: "linear", Peak: 1e-4, Warmup: 10}, 5, 5e-5},
		{Schedule{Kind: "linear", Peak: 1e-4, Warmup: 10}, 500, 1e-4},
		{Schedule{Kind: "cosine", Peak: 1e-4, Warmup: 10, Total: 110, Min: 1e-5}, 10, 1e-4},
		{Schedule{Kind: "cosine", Peak: 1e-4, Warmup: 10, Total: 110, Min: 1e-5}, 60, 5.5e-5},
		{Schedule{Kind: "cosine", Peak: 1e-4, Warmup: 10, Total: 110, Min: 1e-5}, 110, 1e-5},
		{Schedule{Kind: "cosine", Peak: 1e-4, Warmup: 10, Total: 110, Min: 1e-5}, 999, 1e-5},
	}
	for _, c := range cases {
		if err := c.s.Validate(); err != nil {
			t.Fatalf("%+v: %v", c.s, err)
		}
		if got := c.s.At(c.step); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("%s at step %d = %g, want %g", c.s.Kind, c.step, got, c.want)
		}
	}
	for _, bad := range []Schedule{{Kind: "exponential"}, {Kind: "cosine", Warmup: 10, Total: 10}, {Kind: "linear", Warmup: -1}} {
		if bad.Validate() == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

func TestClipScale(t *testing.T) {
	for _, c := range []struct{ total, max, want float64 }{
		{0.5, 1, 1}, {2, 1, 1 / (2 + 1e-6)}, {2, 0, 1},
	} {
		if got := ClipScale(c.total, c.max); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("ClipScale(%g, %g) = %g, want %g", c.total, c.max, got, c.want)
		}
	}
}
