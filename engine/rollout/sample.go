package rollout

import (
	"container/heap"
	"fmt"
	"slices"
	"strings"
)

// Shaping narrows the distribution a token is sampled from. Zero values disable each part.
type Shaping struct {
	TopK   int     `json:"top_k"`  // keep the k most probable tokens (0: all)
	TopP   float64 `json:"top_p"`  // keep the smallest most-probable set with mass ≥ TopP (0 or 1: all)
	Greedy bool    `json:"greedy"` // take the most probable token (ties: lowest id)
}

// Shaped reports whether tokens are drawn from anything narrower than the full softmax.
func (s Shaping) Shaped() bool { return s.Greedy || s.TopK > 0 || (s.TopP > 0 && s.TopP < 1) }

// String names the shaping in effect, e.g. "top_k = 5, top_p = 0.9" ("no shaping").
func (s Shaping) String() string {
	var parts []string
	if s.Greedy {
		parts = append(parts, "greedy = true")
	}
	if s.TopK > 0 {
		parts = append(parts, fmt.Sprintf("top_k = %d", s.TopK))
	}
	if s.TopP > 0 && s.TopP < 1 {
		parts = append(parts, fmt.Sprintf("top_p = %g", s.TopP))
	}
	if len(parts) == 0 {
		return "no shaping"
	}
	return strings.Join(parts, ", ")
}

// Validate reports unusable values, naming the field.
func (s Shaping) Validate() error {
	if s.TopK < 0 {
		return fmt.Errorf("top_k must be ≥ 0, got %d", s.TopK)
	}
	if !(s.TopP >= 0 && s.TopP <= 1) {
		return fmt.Errorf("top_p must be in [0, 1], got %g", s.TopP)
	}
	return nil
}

// candidate is a token and its probability.
type candidate struct {
	id int32
	p  float32
}

// better orders by probability, then by lower id, so every selection is deterministic.
func better(a, b candidate) bool { return a.p > b.p || (a.p == b.p && a.id < b.id) }

// minHeap keeps the k best candidates seen so far, worst on top.
type minHeap []candidate

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(i, j int) bool { return better(h[j], h[i]) }
func (h minHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *minHeap) Push(x any)        { *h = append(*h, x.(candidate)) }
func (h *minHeap) Pop() any          { old := *h; x := old[len(old)-1]; *h = old[:len(old)-1]; return x }

// sampler holds scratch space reused from token to token.
type sampler struct {
	shape Shaping
	cands []candidate
	heap  minHeap
}

// pick draws a token from probability row p with uniform u ∈ [0, 1).
func (s *sampler) pick(p []float32, u float64) int32 {
	if s.shape.Greedy {
		return Argmax(p)
	}
	topP := s.shape.TopP > 0 && s.shape.TopP < 1
	if s.shape.TopK <= 0 && !topP {
		return drawFrom(p, u)
	}
	c, mass := s.candidates(p, topP)
	if topP {
		c = nucleus(c, s.shape.TopP, mass)
	}
	total := 0.0
	for _, x := range c {
		total += float64(x.p)
	}
	target, acc := u*total, 0.0
	for _, x := range c {
		acc += float64(x.p)
		if acc > target {
			return x.id
		}
	}
	return c[len(c)-1].id
}

// drawFrom samples index i with probability p[i]/Σp by walking the cumulative sum.
func drawFrom(p []float32, u float64) int32 {
	total := 0.0
	for _, v := range p {
		total += float64(v)
	}
	target, acc, last := u*total, 0.0, 0
	for i, v := range p {
		if v > 0 {
			acc += float64(v)
			last = i
			if acc > target {
				return int32(i)
			}
		}
	}
	return int32(last) // rounding left acc just below target: the last token with mass
}

// nucleusFloor: tokens below this probability are only looked at when the tokens above it
// do not reach the nucleus mass (a flat distribution), which is then sorted in full.
const nucleusFloor = 1e-5

// candidates returns the tokens sampling chooses among, best first, and the mass top-p is
// measured against: with TopK, the k most probable tokens and their mass (top-p then applies
// within them, as Hugging Face orders the two); with top-p alone, every token above
// nucleusFloor — or all tokens, if those do not hold the nucleus — and the whole row's mass.
func (s *sampler) candidates(p []float32, topP bool) ([]candidate, float64) {
	s.cands = s.cands[:0]
	mass := 0.0
	if k := s.shape.TopK; k > 0 && k < len(p) {
		s.heap = s.heap[:0]
		for i, v := range p {
			c := candidate{int32(i), v}
			if len(s.heap) < k {
				heap.Push(&s.heap, c)
			} else if better(c, s.heap[0]) {
				s.heap[0] = c
				heap.Fix(&s.heap, 0)
			}
		}
		s.cands = append(s.cands, s.heap...)
		for _, c := range s.cands {
			mass += float64(c.p)
		}
	} else {
		above := 0.0
		for i, v := range p {
			mass += float64(v)
			if v >= nucleusFloor {
				s.cands = append(s.cands, candidate{int32(i), v})
				above += float64(v)
			}
		}
		if !topP || above < s.shape.TopP*mass {
			s.cands = s.cands[:0]
			for i, v := range p {
				s.cands = append(s.cands, candidate{int32(i), v})
			}
		}
	}
	slices.SortFunc(s.cands, func(a, b candidate) int {
		if better(a, b) {
			return -1
		}
		if better(b, a) {
			return 1
		}
		return 0
	})
	return s.cands, mass
}

// nucleus keeps the shortest prefix of c (sorted best first) whose probability reaches
// topP·mass.
func nucleus(c []candidate, topP, mass float64) []candidate {
	acc := 0.0
	for i, x := range c {
		acc += float64(x.p)
		if acc >= topP*mass {
			return c[:i+1]
		}
	}
	return c
}
