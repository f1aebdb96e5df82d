package philox

import (
	"math"
	"testing"
)

// Random123's known answers for philox4x32 with 10 rounds (its tests/kat_vectors): counter,
// key, block.
var knownAnswers = []struct {
	ctr  [4]uint32
	key  [2]uint32
	want [4]uint32
}{
	{[4]uint32{0, 0, 0, 0}, [2]uint32{0, 0}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
	{[4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff},
		[4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
	{[4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0},
		[4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
}

func TestKnownAnswers(t *testing.T) {
	for _, c := range knownAnswers {
		if got := Block(c.ctr, c.key); got != c.want {
			t.Errorf("Block(%08x, %08x) = %08x, want %08x", c.ctr, c.key, got, c.want)
		}
	}
}

// TestUniform checks the uniform's mapping from the block (the known answer of the zero
// counter and key) and its range and moments over many positions.
func TestUniform(t *testing.T) {
	if got, want := Uniform(0, 0, 0), float64((uint64(0x6627e8d5)<<32|0xe169c58d)>>11)/(1<<53); got != want {
		t.Errorf("Uniform(0, 0, 0) = %v, want %v", got, want)
	}
	const n = 1 << 16
	var sum, sq float64
	for pos := range uint32(n) {
		u := Uniform(42, 7, pos)
		if u < 0 || u >= 1 {
			t.Fatalf("Uniform(42, 7, %d) = %v, outside [0, 1)", pos, u)
		}
		sum, sq = sum+u, sq+u*u
	}
	mean, variance := sum/n, sq/n-(sum/n)*(sum/n)
	// Standard errors: 1/sqrt(12n) ≈ 0.0011 for the mean, about 0.0003 for the variance.
	if math.Abs(mean-0.5) > 0.006 || math.Abs(variance-1.0/12) > 0.0015 {
		t.Errorf("mean %.4f, variance %.4f over %d positions: want 0.5 and 1/12", mean, variance, n)
	}
	if Uniform(42, 7, 3) == Uniform(42, 8, 3) || Uniform(42, 7, 3) == Uniform(43, 7, 3) {
		t.Error("another stream or seed drew the same uniform")
	}
}
