package grpo

import (
	"fmt"
	"math"
)

// Config holds every knob of a GRPO step. Recipes own the values; DefaultConfig is a
// conservative starting point.
type Config struct {
	// Advantages.
	Scale       string  // "group" (default), "batch" (std over the whole batch) or "none" (Dr. GRPO)
	StdEps      float64 // added to the std before dividing
	DropZeroStd bool    // leave groups whose rewards are all equal out of the loss

	// Policy loss.
	ClipLow, ClipHigh float64 // ε_low, ε_high of the ratio clip
	RatioLevel        string  // "token" (GRPO) or "sequence" (GSPO)
	Aggregation       string  // "grpo", "dapo" or "dr_grpo"
	Beta              float64 // KL coefficient; 0 never runs the reference model
	KLEstimator       string  // "k1", "k2" or "k3"
	EntropyCoef       float64 // adds −EntropyCoef·H to each token's loss
	MaskTruncated     bool    // leave completions cut by max_new_tokens out of the loss

	// Update.
	Epochs      int     // μ: passes over the batch
	Minibatches int     // optimizer updates per pass
	MicroBatch  int     // completions per forward/backward (memory only); 0: a whole minibatch
	MaxGradNorm float64 // global gradient-norm clip; 0 disables it
	LR          float64 // learning rate of this step's updates
}

// DefaultConfig returns conservative settings: group scaling, symmetric clip 0.2, grpo
// aggregation, no KL, one epoch of one minibatch, gradient clip 1.
func DefaultConfig() Config {
	return Config{Scale: "group", StdEps: 1e-4, ClipLow: 0.2, ClipHigh: 0.2, RatioLevel: "token",
		Aggregation: "grpo", KLEstimator: "k3", Epochs: 1, Minibatches: 1, MaxGradNorm: 1, LR: 1e-6}
}

// Validate reports the first unusable value, naming its field.
func (c Config) Validate() error {
	finite := func(name string, v float64) error {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("grpo: %s must be a finite number ≥ 0, got %g", name, v)
		}
		return nil
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"std_eps", c.StdEps}, {"clip_low", c.ClipLow}, {"clip_high", c.ClipHigh}, {"beta", c.Beta},
		{"entropy_coef", c.EntropyCoef}, {"max_grad_norm", c.MaxGradNorm}, {"lr", c.LR}} {
		if err := finite(f.name, f.v); err != nil {
			return err
		}
	}
	if c.ClipLow >= 1 {
		return fmt.Errorf("grpo: clip_low must be < 1, got %g", c.ClipLow)
	}
	oneOf := func(name, v string, allowed ...string) error {
		for _, a := range allowed {
			if v == a {
				return nil
			}
		}
		return fmt.Errorf("grpo: %s %q is not one of %v", name, v, allowed)
	}
	for _, err := range []error{
		oneOf("scale", c.Scale, "group", "batch", "none"),
		oneOf("ratio_level", c.RatioLevel, "token", "sequence"),
		oneOf("aggregation", c.Aggregation, "grpo", "dapo", "dr_grpo"),
		oneOf("kl_estimator", c.KLEstimator, "k1", "k2", "k3"),
	} {
		if err != nil {
			return err
		}
	}
	switch {
	case c.Epochs < 1:
		return fmt.Errorf("grpo: epochs must be ≥ 1, got %d", c.Epochs)
	case c.Minibatches < 1:
		return fmt.Errorf("grpo: minibatches must be ≥ 1, got %d", c.Minibatches)
	case c.MicroBatch < 0:
		return fmt.Errorf("grpo: micro_batch must be ≥ 0, got %d", c.MicroBatch)
	}
	return nil
}
