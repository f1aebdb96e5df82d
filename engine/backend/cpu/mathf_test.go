package cpu

import (
	"math"
	"testing"
)

// ulps is the distance between two float32 values in units in the last place.
func ulps(a, b float32) int64 {
	ia, ib := int64(math.Float32bits(a)), int64(math.Float32bits(b))
	if ia < 0 {
		ia = math.MinInt32 - ia
	}
	if ib < 0 {
		ib = math.MinInt32 - ib
	}
	d := ia - ib
	if d < 0 {
		d = -d
	}
	return d
}

func TestExpfAccuracy(t *testing.T) {
	worst := int64(0)
	for x := float32(-87); x < 88.7; x += 0.00731 {
		want := float32(math.Exp(float64(x)))
		if u := ulps(expf(x), want); u > worst {
			worst = u
		}
	}
	if worst > 2 {
		t.Fatalf("expf worst error %d ulp, want ≤ 2", worst)
	}
	for _, c := range []struct{ x, want float32 }{
		{0, 1}, {-200, 0}, {200, float32(math.Inf(1))},
	} {
		if got := expf(c.x); got != c.want {
			t.Errorf("expf(%g) = %g, want %g", c.x, got, c.want)
		}
	}
	if nan := float32(math.NaN()); expf(nan) == expf(nan) {
		t.Error("expf(NaN) is not NaN")
	}
}
