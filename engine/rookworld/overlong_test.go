package rookworld

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/chess"
)

// trlSoftOverlong is TRL's get_soft_overlong_punishment(max_completion_len, soft_punish_cache)
// (trl/rewards/other_rewards.py, v1.10.0.dev0) for one completion of n tokens, written as TRL
// writes it.
func trlSoftOverlong(maxLen, cache, n int) float64 {
	switch {
	case n <= maxLen-cache:
		return 0
	case maxLen-cache < n && n <= maxLen:
		return float64(maxLen-cache-n) / float64(cache)
	}
	return -1
}

// TestSoftOverlongMatchesTRL: the penalty equals TRL's formula bit for bit on the table of
// scripts/tests/algorithms_test.lua (max 100, cache 20: its docstring's 90 tokens give −0.5)
// and the edges; penalty_factor p scales it to p times TRL's (verl's penalty_factor);
// max_completion_len 0 is the completion's max_new_tokens.
func TestSoftOverlongMatchesTRL(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		maxLen, cache, limit int // limit: the max_new_tokens the completions were sampled under
		lengths              []int
		want                 []float64 // TRL's values, by hand
	}{
		{"TRL's example", 100, 20, 200, []int{50, 80, 81, 90, 100, 101, 200}, []float64{0, 0, -0.05, -0.5, -1, -1, -1}},
		{"cache 0: a hard limit past max", 100, 0, 200, []int{0, 100, 101}, []float64{0, 0, -1}},
		{"cache = max: the ramp from the first token", 10, 10, 10, []int{0, 1, 5, 10}, []float64{0, -0.1, -0.5, -1}},
		{"cache 1", 10, 1, 12, []int{9, 10, 11}, []float64{0, -1, -1}},
		{"max 0: the budget, 72 tokens", 0, 24, 72, []int{1, 48, 49, 60, 72}, []float64{0, 0, -1.0 / 24, -0.5, -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := SoftOverlong{MaxCompletionLen: tc.maxLen, SoftPunishCache: tc.cache, PenaltyFactor: 1}
			if err := o.validate(); err != nil {
				t.Fatal(err)
			}
			if err := o.Fits(tc.limit); err != nil {
				t.Fatal(err)
			}
			l := tc.maxLen
			if l == 0 {
				l = tc.limit
			}
			for i, n := range tc.lengths {
				trl := trlSoftOverlong(l, tc.cache, n)
				if got := o.Penalty(n, tc.limit); got != trl || !near(trl, tc.want[i]) {
					t.Errorf("length %d: %v, TRL's formula %v, TRL's value %v", n, got, trl, tc.want[i])
				}
				for _, p := range []float64{0.5, 2, 0} {
					o := o
					o.PenaltyFactor = p
					if got, want := o.Penalty(n, tc.limit), p*trl; got != want && !(got == 0 && want == 0) {
						t.Errorf("length %d, penalty_factor %v: %v, want %v", n, p, got, want)
					}
				}
			}
		})
	}
	if d := DefaultRewardConfig().SoftOverlong; d.On() || d.Penalty(72, 72) != 0 || d.Penalty(1, 72) != 0 {
		t.Errorf("the default %+v punishes", d)
	}
}

// TestSoftOverlongSettings: bad settings are refused naming the setting; lengths longer than
// the completions' max_new_tokens are an *OverlongError naming the setting, from Fits and from
// scoring a completion sampled under that budget.
func TestSoftOverlongSettings(t *testing.T) {
	for _, tc := range []struct {
		o    SoftOverlong
		want string
	}{
		{SoftOverlong{MaxCompletionLen: -1, PenaltyFactor: 1}, "soft_overlong.max_completion_len must be an integer ≥ 0 (0: max_new_tokens), got -1"},
		{SoftOverlong{SoftPunishCache: -2, PenaltyFactor: 1}, "soft_overlong.soft_punish_cache must be an integer ≥ 0, got -2"},
		{SoftOverlong{MaxCompletionLen: 10, SoftPunishCache: 11, PenaltyFactor: 1}, "soft_overlong.soft_punish_cache must be ≤ soft_overlong.max_completion_len (10), got 11"},
		{SoftOverlong{SoftPunishCache: 4, PenaltyFactor: -1}, "soft_overlong.penalty_factor must be a finite number ≥ 0, got -1"},
		{SoftOverlong{SoftPunishCache: 4, PenaltyFactor: math.NaN()}, "soft_overlong.penalty_factor must be a finite number ≥ 0, got NaN"},
		{SoftOverlong{SoftPunishCache: 4, PenaltyFactor: math.Inf(1)}, "soft_overlong.penalty_factor must be a finite number ≥ 0, got +Inf"},
	} {
		cfg := DefaultRewardConfig()
		cfg.SoftOverlong = tc.o
		if _, err := NewScorer(nil, cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error with %q", tc.o, err, tc.want)
		}
	}
	for _, tc := range []struct {
		o   SoftOverlong
		key string
	}{
		{SoftOverlong{SoftPunishCache: 73, PenaltyFactor: 1}, "soft_overlong.soft_punish_cache"},
		{SoftOverlong{MaxCompletionLen: 80, SoftPunishCache: 8, PenaltyFactor: 1}, "soft_overlong.max_completion_len"},
	} {
		var oe *OverlongError
		if err := tc.o.Fits(72); !errors.As(err, &oe) || oe.Key != tc.key || oe.MaxNewTokens != 72 {
			t.Errorf("%+v fits 72 tokens: %v, want an *OverlongError naming %s", tc.o, err, tc.key)
		}
		cfg := DefaultRewardConfig()
		cfg.SoftOverlong = tc.o
		s, err := NewScorer(nil, cfg)
		if err != nil {
			t.Fatal(err)
		}
		in := Input{Prompt: EnvPrompt(chess.StartFEN, "e2e4", nil), Completion: "x", Tokens: 1, MaxNewTokens: 72}
		if _, err := s.Score(context.Background(), in); !errors.As(err, &oe) || oe.Key != tc.key {
			t.Errorf("%+v: scoring a completion of a 72-token budget: %v, want an *OverlongError naming %s", tc.o, err, tc.key)
		}
	}
}

// TestSoftOverlongTotals: the penalty is added to a sampled completion's total and kept in
// Result.Overlong; a text scored alone (no max_new_tokens) and the default settings leave the
// total as it was.
func TestSoftOverlongTotals(t *testing.T) {
	ctx := context.Background()
	prompt := EnvPrompt(chess.StartFEN, "e2e4", nil)
	right, _ := EnvStep(chess.StartFEN, "e2e4")
	on := newTestScorer(t, nil, func(c *RewardConfig) { c.SoftOverlong = SoftOverlong{SoftPunishCache: 20, PenaltyFactor: 0.5} })
	off := newTestScorer(t, nil, nil)
	for _, tc := range []struct {
		completion string
		tokens     int
		want       float64 // the penalty: max_new_tokens 100, the ramp over 80 < n ≤ 100
	}{
		{right.Completion(), 30, 0},
		{right.Completion(), 90, -0.25},
		{"garbage", 100, -0.5},
	} {
		in := Input{Prompt: prompt, Completion: tc.completion, Tokens: tc.tokens, MaxNewTokens: 100}
		base, err := off.Score(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		r, err := on.Score(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if r.Overlong != tc.want || r.Total != base.Total+tc.want || base.Overlong != 0 {
			t.Errorf("%q, %d tokens: total %v (overlong %v), want %v + %v", tc.completion, tc.tokens, r.Total, r.Overlong, base.Total, tc.want)
		}
		in.MaxNewTokens = 0 // a text scored alone
		if alone, _ := on.Score(ctx, in); alone.Total != base.Total || alone.Overlong != 0 {
			t.Errorf("%q scored alone: total %v, want %v", tc.completion, alone.Total, base.Total)
		}
	}
}
