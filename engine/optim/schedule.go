package optim

import (
	"fmt"
	"math"
)

// Schedule gives the learning rate for a 1-based step.
type Schedule struct {
	Kind   string  // "constant", "linear" (warm-up then constant), "cosine" (warm-up then cosine decay)
	Peak   float64 // learning rate after warm-up
	Warmup int     // steps of linear warm-up from Peak/Warmup to Peak
	Total  int     // cosine: step at which the rate reaches Min
	Min    float64 // cosine: final rate
}

// Validate reports an unknown kind or inconsistent numbers.
func (s Schedule) Validate() error {
	switch s.Kind {
	case "constant", "linear", "cosine":
	default:
		return fmt.Errorf("lr schedule: unknown kind %q (want constant, linear or cosine)", s.Kind)
	}
	if s.Warmup < 0 || (s.Kind == "cosine" && s.Total <= s.Warmup) {
		return fmt.Errorf("lr schedule: need 0 ≤ warmup < total, got warmup %d total %d", s.Warmup, s.Total)
	}
	return nil
}

// At returns the learning rate of step (1-based).
func (s Schedule) At(step int) float64 {
	if s.Kind == "constant" {
		return s.Peak
	}
	if step <= s.Warmup {
		return s.Peak * float64(step) / float64(s.Warmup)
	}
	if s.Kind == "linear" {
		return s.Peak
	}
	if step >= s.Total {
		return s.Min
	}
	p := float64(step-s.Warmup) / float64(s.Total-s.Warmup)
	return s.Min + 0.5*(s.Peak-s.Min)*(1+math.Cos(math.Pi*p))
}
