package grpo

import "fmt"

// ConfigError is a setting of Config that cannot be used: its key as recipes write it, the
// value, and what it must be.
type ConfigError struct {
	Key    string
	Value  any
	Reason string // what Key must be ("≥ 1", "a finite number ≥ 0"); with FixedBy, the value it is fixed to
	// Choices are the names Key must be one of, for a name that is none of them.
	Choices []string
	// FixedBy is the setting that fixes Key ("trl_compat = true"), when that one is why Value
	// is refused.
	FixedBy string
}

func (e *ConfigError) Error() string {
	switch {
	case e.Choices != nil:
		return fmt.Sprintf("grpo: %s %q is not one of %q", e.Key, e.Value, e.Choices)
	case e.FixedBy != "":
		return fmt.Sprintf("grpo: %s fixes %s = %s, got %s", e.FixedBy, e.Key, e.Reason, value(e.Value))
	}
	return fmt.Sprintf("grpo: %s must be %s, got %s", e.Key, e.Reason, value(e.Value))
}

// value formats a setting's value as a recipe writes it: strings quoted.
func value(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v)
}

// GroupError is a group size GRPO cannot train on: fewer than MinGroup completions per prompt
// leave nothing to compare.
type GroupError struct {
	Group int
}

func (e *GroupError) Error() string {
	return fmt.Sprintf("grpo: groups of %d completions: GRPO needs at least %d per prompt to compare", e.Group, MinGroup)
}

// BatchError is a batch a step refuses: not scored, not in groups, or sampled in a way the
// step does not train on unless a setting allows it.
type BatchError struct {
	Reason  string // what is wrong, for people
	Setting string // the setting that would allow the batch ("allow_greedy"), if one would
}

func (e *BatchError) Error() string { return "grpo: " + e.Reason }

// ReferenceError is DESIGN §6.6 broken: the reference's weights are not the recorded
// reference's, and no sync was recorded.
type ReferenceError struct {
	Hash     string // the content hash of the reference's weights
	Recorded string // the recorded reference's (Trainer.RefHash)
}

func (e *ReferenceError) Error() string {
	return fmt.Sprintf("grpo: the reference's weights have content hash %s, the recorded reference's is %s: they changed without a recorded sync (DESIGN §6.6)", e.Hash, e.Recorded)
}

// RanksError is a policy whose device has joined another number of ranks than the run has.
type RanksError struct {
	Joined, Ranks int
}

func (e *RanksError) Error() string {
	return fmt.Sprintf("grpo: the policy's device has joined %d ranks, the run has %d", e.Joined, e.Ranks)
}
