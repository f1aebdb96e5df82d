package grpo

import "math"

// Advantages returns each completion's advantage and, per group, whether its rewards have
// zero variance. Rewards come in groups of size g (group i is rewards[i*g : (i+1)*g]). The
// mean is always the group's; scale picks the divisor: the group's std ("group"), the whole
// batch's ("batch"), or none ("none").
func Advantages(rewards []float64, g int, scale string, eps float64) (adv []float64, zeroStd []bool) {
	n := len(rewards)
	adv = make([]float64, n)
	groups := n / g
	zeroStd = make([]bool, groups)
	batchStd := std(rewards)
	for gi := range groups {
		r := rewards[gi*g : (gi+1)*g]
		m, s := mean(r), std(r)
		zeroStd[gi] = s == 0
		div := 1.0
		switch scale {
		case "group":
			div = s + eps
		case "batch":
			div = batchStd + eps
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

// std is the population standard deviation.
func std(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	m, s := mean(x), 0.0
	for _, v := range x {
		s += (v - m) * (v - m)
	}
	return math.Sqrt(s / float64(len(x)))
}
