package rollout

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestDrawFromFollowsTheDistribution(t *testing.T) {
	p := []float32{0.1, 0, 0.6, 0.3}
	r := rand.New(rand.NewPCG(1, 2))
	counts := make([]int, len(p))
	const n = 200000
	s := sampler{}
	for range n {
		counts[s.pick(p, r.Float64())]++
	}
	for i, c := range counts {
		got := float64(c) / n
		if math.Abs(got-float64(p[i])) > 0.005 {
			t.Errorf("token %d drawn %.4f of the time, want %.1f", i, got, p[i])
		}
	}
	if counts[1] != 0 {
		t.Error("a zero-probability token was drawn")
	}
}

func TestShaping(t *testing.T) {
	p := []float32{0.05, 0.3, 0.1, 0.3, 0.2, 0.05}
	cases := []struct {
		name  string
		shape Shaping
		want  map[int32]float64 // allowed tokens and their probability after shaping
	}{
		{"greedy picks the lowest id among ties", Shaping{Greedy: true}, map[int32]float64{1: 1}},
		{"top-k 2", Shaping{TopK: 2}, map[int32]float64{1: 0.5, 3: 0.5}},
		{"top-k 3", Shaping{TopK: 3}, map[int32]float64{1: 0.375, 3: 0.375, 4: 0.25}},
		{"top-p 0.6 needs two tokens", Shaping{TopP: 0.6}, map[int32]float64{1: 0.5, 3: 0.5}},
		{"top-p 0.61 needs three", Shaping{TopP: 0.61}, map[int32]float64{1: 0.375, 3: 0.375, 4: 0.25}},
		{"top-k then top-p", Shaping{TopK: 3, TopP: 0.7}, map[int32]float64{1: 0.5, 3: 0.5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := sampler{shape: c.shape}
			r := rand.New(rand.NewPCG(3, 4))
			counts := map[int32]int{}
			const n = 40000
			for range n {
				counts[s.pick(p, r.Float64())]++
			}
			for tok, cnt := range counts {
				want, ok := c.want[tok]
				if !ok {
					t.Fatalf("token %d sampled but shaped out", tok)
				}
				if got := float64(cnt) / n; math.Abs(got-want) > 0.01 {
					t.Errorf("token %d: %.3f, want %.3f", tok, got, want)
				}
			}
		})
	}
}

// TestTopPOnFlatDistribution: when the tokens above the candidate floor do not hold the
// nucleus, the full row is used.
func TestTopPOnFlatDistribution(t *testing.T) {
	p := make([]float32, 200000)
	for i := range p {
		p[i] = 1.0 / 200000 // 5e-6 each: all below nucleusFloor
	}
	s := sampler{shape: Shaping{TopP: 0.5}}
	r := rand.New(rand.NewPCG(5, 6))
	for range 1000 {
		if tok := s.pick(p, r.Float64()); tok >= 100001 {
			t.Fatalf("token %d is outside the nucleus of the first half", tok)
		}
	}
}

// TestDrawFromAcrossChunks draws from rows of several chunks: the token drawn is where the
// cumulative sum crosses u·total (up to rounding), a chunk without mass is never landed in, and
// a row without mass gives token 0.
func TestDrawFromAcrossChunks(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	s := sampler{}
	const v = 3*DrawChunk + 77
	for trial := range 200 {
		p := make([]float32, v)
		for i := range p {
			if chunk := i / DrawChunk; chunk != 1 && r.IntN(3) == 0 { // chunk 1 has no mass
				p[i] = r.Float32()
			}
		}
		if trial%2 == 0 {
			clear(p[2*DrawChunk:]) // the last chunks too: u near 1 must not land there
		}
		total, prefix := 0.0, make([]float64, v+1)
		for i, x := range p {
			total += float64(x)
			prefix[i+1] = total
		}
		for _, u := range []float64{0, r.Float64(), 0.5, 1 - 0x1p-53} {
			tok := s.drawFrom(p, u)
			target, eps := u*total, 1e-9*total
			if p[tok] <= 0 || prefix[tok] > target+eps || prefix[tok+1] < target-eps {
				t.Fatalf("trial %d, u = %v: token %d (p %g) does not hold the target %g (prefix %g..%g)",
					trial, u, tok, p[tok], target, prefix[tok], prefix[tok+1])
			}
		}
	}
	if tok := s.drawFrom(make([]float32, v), 0.3); tok != 0 {
		t.Errorf("a row without mass drew %d, want 0", tok)
	}
}
