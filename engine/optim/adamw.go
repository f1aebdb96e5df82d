package optim

import (
	"fmt"
	"math"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/gpt2"
)

// AdamWConfig holds AdamW's hyper-parameters, named as torch.optim.AdamW names them.
type AdamWConfig struct {
	LR          float64 `json:"lr"` // the peak learning rate; the optimizer's Schedule shapes it per update
	Beta1       float64 `json:"beta1"`
	Beta2       float64 `json:"beta2"`
	Eps         float64 `json:"eps"`
	WeightDecay float64 `json:"weight_decay"`
	// DecayAll applies weight decay to every tensor; by default only tensors with two or
	// more dimensions (matrices and embeddings) decay, as in nanoGPT and most GPT-2 trainers.
	DecayAll bool `json:"decay_all"`
}

// DefaultAdamW returns the usual GPT-2 fine-tuning settings.
func DefaultAdamW() AdamWConfig {
	return AdamWConfig{LR: 1e-5, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0}
}

// Validate reports an unusable configuration: a *ConfigError naming the field.
func (c AdamWConfig) Validate() error {
	switch {
	case !(c.LR >= 0) || math.IsInf(c.LR, 0):
		return fmt.Errorf("adamw: %w", &ConfigError{Key: "lr", Value: c.LR, Reason: "a finite number ≥ 0"})
	case !(c.Beta1 >= 0 && c.Beta1 < 1):
		return fmt.Errorf("adamw: %w", &ConfigError{Key: "beta1", Value: c.Beta1, Reason: "in [0, 1)"})
	case !(c.Beta2 >= 0 && c.Beta2 < 1):
		return fmt.Errorf("adamw: %w", &ConfigError{Key: "beta2", Value: c.Beta2, Reason: "in [0, 1)"})
	case !(c.Eps > 0):
		return fmt.Errorf("adamw: %w", &ConfigError{Key: "eps", Value: c.Eps, Reason: "positive"})
	case !(c.WeightDecay >= 0):
		return fmt.Errorf("adamw: %w", &ConfigError{Key: "weight_decay", Value: c.WeightDecay, Reason: "≥ 0"})
	}
	return nil
}

// AdamW is the optimizer state of one model. It owns the learning rate: Config.LR shaped by
// Schedule at each update. Config.LR and Steps are what a checkpoint stores, so a resume or a
// rollback continues the schedule exactly; the Schedule itself is the recipe's, rebuilt
// from its config.
type AdamW struct {
	Config   AdamWConfig
	Schedule Schedule
	Steps    int         // updates applied so far: the schedule's clock
	M, V     backend.Buf // first and second moments, Layout order

	model   *gpt2.Model
	noDecay []backend.Span // runs of consecutive tensors that take no weight decay
}

// NewAdamW creates zeroed optimizer state for m.
func NewAdamW(m *gpt2.Model, cfg AdamWConfig) (*AdamW, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m.EnsureGrads()
	o := &AdamW{Config: cfg, Schedule: ConstantSchedule(), model: m, M: m.B.Alloc(m.Layout.Total), V: m.B.Alloc(m.Layout.Total)}
	for _, t := range m.Layout.Tensors {
		if cfg.DecayAll || t.IsMatrix() {
			continue
		}
		if n := len(o.noDecay); n > 0 && o.noDecay[n-1].Off+o.noDecay[n-1].N == t.Off {
			o.noDecay[n-1].N += t.Size
			continue
		}
		o.noDecay = append(o.noDecay, backend.Span{Off: t.Off, N: t.Size})
	}
	return o, nil
}

// SetSchedule replaces the learning-rate schedule.
func (o *AdamW) SetSchedule(s Schedule) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("adamw: %w", err)
	}
	if s.Kind == ScheduleCosine && s.Total == 0 {
		return fmt.Errorf("adamw: a cosine schedule needs total_updates, the update at which it reaches its floor (%w)",
			&ConfigError{Key: "total_updates", Value: s.Total, Reason: "> 0"})
	}
	o.Schedule = s
	return nil
}

// LR is the learning rate of the next update: Config.LR shaped by the schedule.
func (o *AdamW) LR() float64 { return o.Config.LR * o.Schedule.Factor(o.Steps+1) }

// ScaleLR multiplies the learning rate by f (f > 0), every later update's included: the
// schedule keeps its shape at the new height.
func (o *AdamW) ScaleLR(f float64) error {
	lr := o.Config.LR * f
	if !(f > 0) || math.IsInf(lr, 0) {
		return fmt.Errorf("adamw: %w", &ConfigError{Key: "the learning-rate factor", Value: f, Reason: "a finite number > 0"})
	}
	o.Config.LR = lr
	return nil
}

// Step applies one update with learning rate lr from the model's current gradients; a
// caller that follows the schedule passes LR(). It is one backend call over every tensor,
// one kernel on a device.
func (o *AdamW) Step(lr float64) {
	o.Steps++
	m, c := o.model, o.Config
	m.B.AdamW(m.Params, m.Grads, o.M, o.V,
		backend.AdamW{LR: float32(lr), Beta1: float32(c.Beta1), Beta2: float32(c.Beta2),
			Eps: float32(c.Eps), WeightDecay: float32(c.WeightDecay), Step: o.Steps, NoDecay: o.noDecay})
	m.ParamsWritten()
}
