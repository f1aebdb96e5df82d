package cpu

import "math"

// expf is a float32 exp accurate to about 1 ulp, for the Go-side softmaxes (attention) (Cephes' expf: range reduction by ln 2 split
// in two parts, degree-6 polynomial, scaling by 2^n through the exponent bits). It is several
// times faster than math.Exp and, unlike it, stays in float32 arithmetic.
func expf(x float32) float32 {
	const (
		maxLog = 88.72283905206835
		minLog = -87.33654475055310 // below this the result is subnormal; flush to 0
		log2e  = 1.44269504088896341
		c1     = 0.693359375
		c2     = -2.12194440e-4
	)
	if x != x {
		return x
	}
	if x > maxLog {
		return float32(math.Inf(1))
	}
	if x < minLog {
		return 0
	}
	// n = round(x / ln 2)
	fx := x*log2e + 0.5
	n := int32(fx)
	if float32(n) > fx { // floor for negative values
		n--
	}
	fn := float32(n)
	x = x - fn*c1 - fn*c2
	z := x * x
	y := float32(1.9875691500e-4)
	y = y*x + 1.3981999507e-3
	y = y*x + 8.3334519073e-3
	y = y*x + 4.1665795894e-2
	y = y*x + 1.6666665459e-1
	y = y*x + 5.0000001201e-1
	y = y*z + x + 1
	// y·2^n, in two factors so that n = 128 (x just below maxLog) does not overflow the
	// exponent field.
	if n > 126 {
		return y * 2 * math.Float32frombits(uint32(n-1+127)<<23)
	}
	return y * math.Float32frombits(uint32(n+127)<<23)
}
