package optim

import (
	"math"
)

// ScheduleKind is the shape of the learning rate after its warm-up.
type ScheduleKind string

const (
	ScheduleConstant ScheduleKind = "constant" // lr from the end of the warm-up on
	ScheduleCosine   ScheduleKind = "cosine"   // cosine decay from lr to lr·lr_min_ratio at total_updates
)

// Schedule shapes the learning rate over optimizer updates: a linear warm-up from
// lr/lr_warmup to lr over the first lr_warmup updates, then constant or a cosine decay. It
// gives a factor of the optimizer's lr, so scaling lr (a recovery policy's move) scales the
// whole schedule, floor included. Its clock is the optimizer's update count, which a
// checkpoint restores, so a resumed run continues the schedule where it was.
type Schedule struct {
	Kind     ScheduleKind `json:"lr_schedule"`
	Warmup   int          `json:"lr_warmup"`     // updates of linear warm-up (0: none)
	Total    int          `json:"total_updates"` // cosine: the update at which the rate reaches its floor (0: not known yet)
	MinRatio float64      `json:"lr_min_ratio"`  // cosine: the floor as a fraction of lr
}

// ConstantSchedule is lr at every update.
func ConstantSchedule() Schedule { return Schedule{Kind: ScheduleConstant} }

// Validate reports an unknown kind or a number out of range: a *ConfigError naming the key.
// A cosine schedule's total_updates may be 0 while a recipe does not know its length yet; the
// optimizer takes it only once it is set (SetSchedule). A warm-up as long as the schedule or
// longer never reaches lr, as torch's cosine schedule with warm-up does.
func (s Schedule) Validate() error {
	switch {
	case s.Kind != ScheduleConstant && s.Kind != ScheduleCosine:
		return &ConfigError{Key: "lr_schedule", Value: string(s.Kind), Choices: []string{string(ScheduleConstant), string(ScheduleCosine)}}
	case s.Warmup < 0:
		return &ConfigError{Key: "lr_warmup", Value: s.Warmup, Reason: "≥ 0"}
	case !(s.MinRatio >= 0 && s.MinRatio <= 1):
		return &ConfigError{Key: "lr_min_ratio", Value: s.MinRatio, Reason: "in [0, 1]"}
	case s.Total < 0:
		return &ConfigError{Key: "total_updates", Value: s.Total, Reason: "≥ 0"}
	}
	return nil
}

// Factor is the multiplier of lr at update (1-based).
func (s Schedule) Factor(update int) float64 {
	if s.Warmup > 0 && update <= s.Warmup {
		return float64(update) / float64(s.Warmup)
	}
	if s.Kind != ScheduleCosine {
		return 1
	}
	if update >= s.Total {
		return s.MinRatio
	}
	p := float64(update-s.Warmup) / float64(s.Total-s.Warmup)
	return s.MinRatio + 0.5*(1-s.MinRatio)*(1+math.Cos(math.Pi*p))
}
