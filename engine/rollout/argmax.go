package rollout

// Argmax is the index of the largest of p, the first of equals: greedy decoding's token. A NaN
// is never the largest, unless it is p[0], which then wins (as a scan that replaces its best
// only by a larger value leaves it). Eight running maxima over interleaved elements, their
// comparisons independent of each other, then the first element equal to the largest of
// them: faster than one running maximum, whose every comparison waits on the one before
// (`go test -bench Argmax ./engine/rollout`), with its answer (TestArgmax). The eight are
// written out: held in an array and looped over, they stay in memory, not in registers.
func Argmax(p []float32) int32 {
	if len(p) == 0 || p[0] != p[0] {
		return 0
	}
	m0, m1, m2, m3, m4, m5, m6, m7 := p[0], p[0], p[0], p[0], p[0], p[0], p[0], p[0]
	i := 1
	for ; i+8 <= len(p); i += 8 {
		q := p[i : i+8 : i+8]
		if q[0] > m0 {
			m0 = q[0]
		}
		if q[1] > m1 {
			m1 = q[1]
		}
		if q[2] > m2 {
			m2 = q[2]
		}
		if q[3] > m3 {
			m3 = q[3]
		}
		if q[4] > m4 {
			m4 = q[4]
		}
		if q[5] > m5 {
			m5 = q[5]
		}
		if q[6] > m6 {
			m6 = q[6]
		}
		if q[7] > m7 {
			m7 = q[7]
		}
	}
	for ; i < len(p); i++ {
		if p[i] > m0 {
			m0 = p[i]
		}
	}
	best := m0
	for _, x := range [...]float32{m1, m2, m3, m4, m5, m6, m7} {
		if x > best {
			best = x
		}
	}
	for i, x := range p {
		if x == best {
			return int32(i)
		}
	}
	return 0 // not reached: best is one of p's elements
}
