package rookworld

import (
	"errors"
	"fmt"
	"math"
)

// SoftOverlong is DAPO's soft overlong punishment (Yu et al. 2025, Eq. 13), a reward added to
// a sampled completion's total by its length n in tokens (the stop token included, as TRL's
// len(completion_ids)): with L the MaxCompletionLen, c the SoftPunishCache and p the
// PenaltyFactor,
//
//	0                  n ≤ L − c
//	p·((L − c) − n)/c  L − c < n ≤ L
//	−p                 n > L
//
// With p = 1 it is TRL's get_soft_overlong_punishment(max_completion_len, soft_punish_cache)
// (v1.10.0.dev0) bit for bit; with L = 0 it is verl's overlong_buffer (len c, penalty_factor p,
// L its max_response_length), the ramp times p in verl's order. L = 0 is the max_new_tokens
// the completion was sampled under, which no completion exceeds: the defaults (L = 0, c = 0)
// punish nothing. The names are TRL's and verl's, so that a setting reads the same here as in
// the peer it matches.
type SoftOverlong struct {
	MaxCompletionLen int     `json:"max_completion_len"` // L; 0: the completion's max_new_tokens
	SoftPunishCache  int     `json:"soft_punish_cache"`  // c: the tokens before L over which the penalty ramps to −p
	PenaltyFactor    float64 `json:"penalty_factor"`     // p; 0 turns the punishment off
}

// DefaultSoftOverlong is off: L = 0 and c = 0 punish nothing; p = 1 is TRL's scale.
func DefaultSoftOverlong() SoftOverlong { return SoftOverlong{PenaltyFactor: 1} }

// On reports whether the punishment can change a total.
func (o SoftOverlong) On() bool {
	return o.PenaltyFactor > 0 && (o.MaxCompletionLen > 0 || o.SoftPunishCache > 0)
}

// validate checks the settings alone; Fits checks them against a token budget.
func (o SoftOverlong) validate() error {
	var errs []error
	if o.MaxCompletionLen < 0 {
		errs = append(errs, fmt.Errorf("soft_overlong.max_completion_len must be an integer ≥ 0 (0: max_new_tokens), got %d", o.MaxCompletionLen))
	}
	if o.SoftPunishCache < 0 {
		errs = append(errs, fmt.Errorf("soft_overlong.soft_punish_cache must be an integer ≥ 0, got %d", o.SoftPunishCache))
	}
	if o.MaxCompletionLen > 0 && o.SoftPunishCache > o.MaxCompletionLen {
		errs = append(errs, fmt.Errorf("soft_overlong.soft_punish_cache must be ≤ soft_overlong.max_completion_len (%d), got %d", o.MaxCompletionLen, o.SoftPunishCache))
	}
	if !(o.PenaltyFactor >= 0) || math.IsInf(o.PenaltyFactor, 1) {
		errs = append(errs, fmt.Errorf("soft_overlong.penalty_factor must be a finite number ≥ 0, got %v", o.PenaltyFactor))
	}
	return errors.Join(errs...)
}

// OverlongError is a soft_overlong length longer than the max_new_tokens completions are
// sampled under: no completion reaches it, so the setting cannot mean what it says.
type OverlongError struct {
	Key          string // the setting, within the reward settings: "soft_overlong.soft_punish_cache"
	Value        int
	MaxNewTokens int
}

func (e *OverlongError) Error() string {
	return fmt.Sprintf("%s (%d) is longer than max_new_tokens (%d): no completion reaches it", e.Key, e.Value, e.MaxNewTokens)
}

// Fits refuses, with an *OverlongError, a MaxCompletionLen or SoftPunishCache longer than
// maxNewTokens, the budget the completions are sampled under.
func (o SoftOverlong) Fits(maxNewTokens int) error {
	switch {
	case o.MaxCompletionLen > maxNewTokens:
		return &OverlongError{Key: "soft_overlong.max_completion_len", Value: o.MaxCompletionLen, MaxNewTokens: maxNewTokens}
	case o.SoftPunishCache > maxNewTokens:
		return &OverlongError{Key: "soft_overlong.soft_punish_cache", Value: o.SoftPunishCache, MaxNewTokens: maxNewTokens}
	}
	return nil
}

// Penalty is the reward added to a completion of n tokens sampled under maxNewTokens (the
// formula above); 0 when the punishment is off.
func (o SoftOverlong) Penalty(n, maxNewTokens int) float64 {
	if !o.On() {
		return 0
	}
	l := o.MaxCompletionLen
	if l == 0 {
		l = maxNewTokens
	}
	free := l - o.SoftPunishCache
	switch {
	case n <= free:
		return 0
	case n <= l:
		return o.PenaltyFactor * (float64(free-n) / float64(o.SoftPunishCache)) // verl's order: the ramp, then the factor
	}
	return -o.PenaltyFactor
}
