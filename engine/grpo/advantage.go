package grpo

import "math"

// zeroStdRTol is how small a group's reward std must be, relative to its largest |reward|,
// for the group to count as having no reward variance. Equal rewards rarely give a std of
// exactly 0 (eight rewards of 0.7 give 1.1e-16); TRL tests the std with torch.isclose
// against 0 (|std| ≤ 1e-8), which is this tolerance for rewards of unit size.
const zeroStdRTol = 1e-8

// Advantages returns each completion's advantage and, per group, whether its rewards have
// no variance. Rewards come in groups of size g (group i is rewards[i*g : (i+1)*g]). The mean
// is always the group's; c.ScaleRewards picks the divisor: the group's std, the whole batch's,
// or none; c.StdDDOF the std's delta degrees of freedom, c.StdEps what is added to it. A
// group without variance gets advantages of exactly 0 whatever the scale, so it carries no
// signal at all (no rounding residue for the optimizer to amplify).
func Advantages(rewards []float64, g int, c Config) (adv []float64, zeroStd []bool) {
	n := len(rewards)
	adv = make([]float64, n)
	groups := n / g
	zeroStd = make([]bool, groups)
	batchStd := std(rewards, c.StdDDOF)
	for gi := range groups {
		r := rewards[gi*g : (gi+1)*g]
		m, s := mean(r), std(r, c.StdDDOF)
		largest := 0.0
		for _, v := range r {
			largest = max(largest, math.Abs(v))
		}
		if s <= zeroStdRTol*largest {
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
