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
	shape    Shaping
	cands    []candidate
	heap     minHeap
	partials []float64
}

// Draw is the token the sampler takes from probability row p with uniform u ∈ [0, 1) under
// shape: what a device that samples (the CUDA backend's Sample) reproduces bit for bit.
func Draw(p []float32, u float64, shape Shaping) int32 {
	s := sampler{shape: shape}
	return s.pick(p, u)
}

// pick draws a token from probability row p with uniform u ∈ [0, 1).
func (s *sampler) pick(p []float32, u float64) int32 {
	if s.shape.Greedy {
		return Argmax(p)
	}
	topP := s.shape.TopP > 0 && s.shape.TopP < 1
	if s.shape.TopK <= 0 && !topP {
		return s.drawFrom(p, u)
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

// DrawChunk is how many tokens each partial sum of a draw covers. A device sums a row's
// chunks in parallel, a thread each, and every backend adds the same numbers in the same
// order, so that the same probabilities and uniform draw the same token on each.
const DrawChunk = 1024

// drawFrom samples index i with probability p[i]/Σp: each chunk's sum in order (float64),
// the total of the chunks' sums in order, then the walk to u·total, first over whole chunks,
// then within the chunk it ends in. Rounding can leave the walk just short of the target:
// it then takes the last token with mass before that point.
func (s *sampler) drawFrom(p []float32, u float64) int32 {
	n := (len(p) + DrawChunk - 1) / DrawChunk
	s.partials = slices.Grow(s.partials[:0], n)[:n]
	total := 0.0
	for c := range s.partials {
		sum := 0.0
		for _, v := range p[c*DrawChunk : min(len(p), (c+1)*DrawChunk)] {
			sum += float64(v)
		}
		s.partials[c], total = sum, total+sum
	}
	target, acc, c := u*total, 0.0, 0
	for ; c < n-1 && acc+s.partials[c] <= target; c++ {
		acc += s.partials[c]
	}
	last := -1
	for i := c * DrawChunk; i < min(len(p), (c+1)*DrawChunk); i++ {
		if p[i] > 0 {
			if acc, last = acc+float64(p[i]), i; acc > target {
				return int32(i)
			}
		}
	}
	for i := c*DrawChunk - 1; last < 0 && i >= 0; i-- { // the chunk reached had no mass
		if p[i] > 0 {
			last = i
		}
	}
	return int32(max(last, 0))
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
