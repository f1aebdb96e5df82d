package rookworld

import (
	"context"
	"testing"

	"github.com/rookscript/rookscript/engine/chess"
	"github.com/rookscript/rookscript/engine/stockfish"
)

func TestComputeMetrics(t *testing.T) {
	results := []Result{
		// A perfect policy answer.
		{Task: TaskPolicy, Components: Components{Format: 1, BestLegal: 1, Candidates: 1},
			Detail: Detail{LegalDistinct: 5, LegalInPos: 30, BestIsTop: true}},
		// Malformed, but B: legal and 2 of 5 candidates legal, 1 of them a top line.
		{Task: TaskPolicy, Components: Components{Format: 2.0 / 3, BestLegal: 1, Candidates: 0.2},
			Detail: Detail{LegalDistinct: 2, LegalInPos: 30}},
		// Only two legal moves in the position, both listed.
		{Task: TaskPolicy, Components: Components{Format: 1, Candidates: 1},
			Detail: Detail{LegalDistinct: 2, LegalInPos: 2}},
		{Task: TaskEnv, Components: Components{Format: 1, FENExact: 1, RewardField: 1}, Detail: Detail{FlagsBoth: true}},
		{Task: TaskEnv, Components: Components{Format: 0.75, Flags: 0.5}},
		// Failed to score: ignored.
		{Task: TaskEnv, Error: "engine died"},
	}
	m := ComputeMetrics(results)
	want := map[string]float64{
		"p_format": 2.0 / 3, "p_legal_best": 2.0 / 3, "p_best_acc": 1.0 / 3,
		"p_top5_legal": (1 + 0.4 + 1) / 3, "p_top5_overlap": (1 + 0.2 + 1) / 3, "p_count": 3,
		"a_format": 0.5, "a_fen_exact": 0.5, "a_flags_acc": 0.5, "a_reward_acc": 0.5, "a_count": 2,
	}
	got := m.Map()
	for k, v := range want {
		if !near(got[k], v) {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if len(got) != len(MetricNames)+2 {
		t.Errorf("Map has %d keys", len(got))
	}
	if z := ComputeMetrics(nil); z.PCount != 0 || z.AFormat != 0 {
		t.Errorf("empty: %+v", z)
	}
}

func TestEvaluate(t *testing.T) {
	pool := newTestPool(t, stockfish.Config{Depth: 6})
	s := newTestScorer(t, pool, nil)
	perfect, a := perfectPolicy(t, pool, rewardFEN)
	r, _ := EnvStep(chess.StartFEN, "g1f3")
	ins := []Input{
		{Prompt: PolicyPrompt(rewardFEN, true), Completion: perfect},
		{Prompt: PolicyPrompt(rewardFEN, true), Completion: PolicyCompletion(a.Moves(), a.Evals(), a.Moves()[1])},
		{Prompt: EnvPrompt(chess.StartFEN, "g1f3", nil), Completion: r.Completion()},
		{Prompt: EnvPrompt(chess.StartFEN, "g1f3", nil), Completion: r.NewFEN + "+0.001+1+0"},
	}
	m, rs, err := s.Evaluate(context.Background(), ins)
	if err != nil || len(rs) != 4 {
		t.Fatal(err)
	}
	if m.PCount != 2 || m.PFormat != 1 || m.PLegalBest != 1 || m.PBestAcc != 0.5 || m.PTop5Legal != 1 || m.PTop5Overlap != 1 {
		t.Errorf("policy metrics %+v", m)
	}
	if m.ACount != 2 || m.AFormat != 1 || m.AFENExact != 1 || m.AFlagsAcc != 0.5 || m.ARewardAcc != 1 {
		t.Errorf("env metrics %+v", m)
	}
}
