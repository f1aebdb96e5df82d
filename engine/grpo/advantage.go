package grpo

import "math"

// A group's rewards tie — no variance, advantages exactly 0 — when their std is within a
// tolerance of 0. Equal rewards rarely give a std of exactly 0 (eight rewards of 0.7 give
// 1.1e-16), and reward shaping leaves noise of its own (−0.3 ± 5e-9 on the malformed floor)
// that dividing by the std would turn into a full-size step. This project's rewards are
// O(1) (components in [0, 1], floors −0.3 and −1) and the smallest difference they make on
// purpose is about 2e-4 (an evaluation off by 0.01 pawn in the eval component), so a std up
// to zeroStdATol is noise, as is one up to zeroStdRTol of the largest |reward| (float64
// noise is ~1e-16 relative; above |r| = 100 the relative bound is the larger). With
// trl_compat the rule is TRL's, torch.isclose(std, 0) = |std| ≤ atol + rtol·0 with torch's
// atol = 1e-8, whatever the rewards' size.
const (
	zeroStdATol    = 1e-6
	zeroStdRTol    = 1e-8
	trlZeroStdATol = 1e-8
)

// tie reports whether rewards r, whose std is s, count as having no variance under c.
func tie(r []float64, s float64, c Config) bool {
	if c.TRLCompat {
		return s <= trlZeroStdATol
	}
	largest := 0.0
	for _, v := range r {
		largest = max(largest, math.Abs(v))
	}
	return s <= max(zeroStdATol, zeroStdRTol*largest)
}

// Advantages returns each completion's advantage and, per group, whether its rewards have
// no variance. Rewards come in groups of size g (group i is rewards[i*g : (i+1)*g]). The mean
// is always the group's; c.ScaleRewards picks the divisor: the group's std, the whole batch's,
// or none; c.StdDDOF the std's delta degrees of freedom, c.StdEps what is added to it. A
// group without variance (tie: its std, with c.StdDDOF, within the tolerance) gets
// advantages of exactly 0 whatever the scale, so it carries no signal at all (no rounding
// residue for the optimizer to amplify; TRL leaves such a group at most √(G−1)·1e-8/std_eps).
func Advantages(rewards []float64, g int, c Config) (adv []float64, zeroStd []bool) {
	n := len(rewards)
	adv = make([]float64, n)
	groups := n / g
	zeroStd = make([]bool, groups)
	batchStd := std(rewards, c.StdDDOF)
	for gi := range groups {
		r := rewards[gi*g : (gi+1)*g]
		m, s := mean(r), std(r, c.StdDDOF)
		if tie(r, s, c) {
			zeroStd[gi] = true
			continue // advantages stay 0
		}
		div := 1.0
		switch c.ScaleRewards {
		case ScaleGroup:
			div = s + c.StdEps
		case ScaleBatch:
			div = batchStd + c.StdEps
		}
		for j, v := range r {
			adv[gi*g+j] = (v - m) / div
		}
	}
	return adv, zeroStd
}

func mean(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// std is the standard deviation with ddof delta degrees of freedom (0: population).
func std(x []float64, ddof int) float64 {
	if len(x) <= ddof {
		return 0
	}
	m, s := mean(x), 0.0
	for _, v := range x {
		s += (v - m) * (v - m)
	}
	return math.Sqrt(s / float64(len(x)-ddof))
}
