package rookworld

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/chess"
	"github.com/rookscript/rookscript/engine/stockfish"
)

const rewardFEN = "r1b1kbnr/pp2pppp/n1p5/q2PP3/3P4/2N5/PP3PPP/R1BQKBNR b KQkq - 2 6"

func newTestScorer(t *testing.T, pool *stockfish.Pool, mod func(*RewardConfig)) *Scorer {
	t.Helper()
	cfg := DefaultRewardConfig()
	if mod != nil {
		mod(&cfg)
	}
	s, err := NewScorer(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// perfectPolicy is the answer Stockfish itself would give at the pool's depth.
func perfectPolicy(t *testing.T, p *stockfish.Pool, fen string) (string, *stockfish.Analysis) {
	t.Helper()
	a, err := p.Analyse(context.Background(), fen)
	if err != nil {
		t.Fatal(err)
	}
	return PolicyCompletion(a.Moves(), a.Evals(), a.Best()), a
}

func TestPolicyReward(t *testing.T) {
	pool := newTestPool(t, stockfish.Config{Depth: 8})
	// The floors as such; partial_test.go grades the answers that parse in part.
	s := newTestScorer(t, pool, func(c *RewardConfig) { c.PartialCredit = false })
	ctx := context.Background()
	perfect, a := perfectPolicy(t, pool, rewardFEN)
	moves, evals := a.Moves(), a.Evals()
	pos := chess.MustParseFEN(rewardFEN)
	var outside string // a legal move outside the engine's lines
	for _, m := range pos.LegalMoves() {
		if a.Rank(m) == 0 {
			outside = m
			break
		}
	}
	withBest := func(b string) string { return PolicyCompletion(moves, evals, b) }
	prompt := PolicyPrompt(rewardFEN, true)
	w := s.Config().Policy
	tests := []struct {
		name       string
		prompt     string
		completion string
		truncated  bool
		total      float64 // NaN: only check the component assertions
		check      func(t *testing.T, r Result)
	}{
		{"perfect", prompt, perfect, false, 1, func(t *testing.T, r Result) {
			c := r.Components
			if c.Format != 1 || c.MovesLegal != 1 || c.BestRank != 1 || c.Candidates != 1 || !near(c.Eval, 1) || !r.Detail.BestIsTop {
				t.Errorf("components %+v", c)
			}
		}},
		{"unpadded prompt", "P: " + rewardFEN, " " + perfect, false, 1, nil},
		{"prompt ending in M:", PolicyPrompt(rewardFEN, true) + "M:", strings.TrimPrefix(perfect, "M:"), false, 1, nil},
		{"second line as best", prompt, withBest(moves[1]), false,
			(w.Format + w.MovesLegal + 0.7*w.BestRank + w.Candidates + w.Eval), nil},
		{"fifth line as best", prompt, withBest(moves[4]), false,
			(w.Format + w.MovesLegal + 0.5*w.BestRank + w.Candidates + w.Eval), nil},
		{"legal but not a line", prompt, withBest(outside), false,
			(w.Format + w.MovesLegal + 0.1*w.BestRank + w.Candidates + w.Eval), nil},
		{"illegal best", prompt, withBest("e2e4"), false, -0.1, func(t *testing.T, r Result) {
			if !r.Illegal || r.Components.BestLegal != 0 || r.Components.BestRank != 0 {
				t.Errorf("%+v", r)
			}
		}},
		{"truncated", prompt, perfect, true, -0.3, nil},
		{"malformed: nothing", prompt, "", false, -0.3, nil},
		{"malformed: no B", prompt, strings.Split(perfect, "B:")[0], false, -0.3, func(t *testing.T, r Result) {
			if !near(r.Components.Format, 2.0/3) || !r.Malformed || r.Components.Candidates != 1 {
				t.Errorf("components %+v", r.Components)
			}
		}},
		{"malformed: eval count", prompt, "M: " + strings.Join(moves, " ") + " E: 1 B: " + moves[0], false, -0.3, nil},
		{"malformed: bad move token", prompt, "M: Nf3 E: 1 B: " + moves[0], false, -0.3, nil},
		{"candidates half right", prompt, PolicyCompletion([]string{moves[0], moves[1], outside}, []float64{evals[0], evals[1], 0}, moves[0]),
			false, math.NaN(), func(t *testing.T, r Result) {
				c := r.Components
				if !near(c.Candidates, 2.0/float64(len(moves))) || c.MovesLegal != 1 || c.Eval >= 1 || c.Eval <= 0 {
					t.Errorf("components %+v", c)
				}
			}},
		{"illegal candidate costs legality and eval", prompt, PolicyCompletion([]string{moves[0], "e2e4"}, []float64{evals[0], 0}, moves[0]),
			false, math.NaN(), func(t *testing.T, r Result) {
				c := r.Components
				if c.MovesLegal != 0.5 || !near(c.Eval, 0.5) {
					t.Errorf("components %+v", c)
				}
			}},
		{"eval error is clipped", prompt, PolicyCompletion(moves[:1], []float64{evals[0] + 50}, moves[0]),
			false, math.NaN(), func(t *testing.T, r Result) {
				if r.Components.Eval != 0 {
					t.Errorf("eval %v", r.Components.Eval)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := s.Score(ctx, Input{Prompt: tc.prompt, Completion: tc.completion, Truncated: tc.truncated})
			if err != nil {
				t.Fatal(err)
			}
			if r.Task != TaskPolicy || r.EngineBest != a.Best() {
				t.Errorf("task %q engine best %q", r.Task, r.EngineBest)
			}
			if !math.IsNaN(tc.total) && !near(r.Total, tc.total) {
				t.Errorf("total = %v, want %v (%s)", r.Total, tc.total, FormatComponents(r))
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

func TestEnvReward(t *testing.T) {
	// A: needs no engine. The floors as such; partial_test.go grades the answers that parse in part.
	s := newTestScorer(t, nil, func(c *RewardConfig) { c.PartialCredit = false })
	partial := newTestScorer(t, nil, func(c *RewardConfig) { c.FENPartial, c.PartialCredit = true, false })
	ctx := context.Background()
	prompt := EnvPrompt(chess.StartFEN, "e2e4", nil)
	next := "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
	standard := "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq e3 0 1" // the FEN standard's ep square
	wrongFEN := "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq e6 0 1"
	capture := EnvPrompt("rnbqkbnr/pppppppp/8/4P3/8/8/PPPP1PPP/RNBQKBNR b KQkq - 0 2", "d7d5", nil)
	captureNext := "rnbqkbnr/ppp1pppp/8/3pP3/8/8/PPPP1PPP/RNBQKBNR w KQkq d6 0 3"
	captureNone := strings.Replace(captureNext, "d6", "-", 1)
	w := s.Config().Env
	tests := []struct {
		name, prompt, completion string
		total                    float64
		partialTotal             float64
	}{
		{"correct", prompt, next + "+0.001+0+0", 1, 1},
		{"the model card's answer", prompt, standard + "+0.001+0+0+", 1, 1},
		{"card's form, trailing newline", prompt, standard + "+0.001+0+0+\n", 1, 1},
		{"data's form, trailing spaces", prompt, next + "+0.001+0+0  ", 1, 1},
		{"FEN standard's en passant", prompt, standard + "+0.001+0+0", 1, 1},
		{"en passant both write", capture, captureNext + "+0.001+0+0", 1, 1},
		{"en passant left out where a capture is legal", capture, captureNone + "+0.001+0+0", w.Format + w.Flags + w.RewardField,
			w.Format + w.Flags + w.RewardField + w.FEN*Similarity(captureNone, captureNext)},
		{"wrong FEN", prompt, wrongFEN + "+0.001+0+0", w.Format + w.Flags + w.RewardField,
			w.Format + w.Flags + w.RewardField + w.FEN*max(Similarity(wrongFEN, next), Similarity(wrongFEN, standard))},
		{"text after the final +", prompt, next + "+0.001+0+0+ A:", -0.3, -0.3},
		{"two final +", prompt, next + "+0.001+0+0++", -0.3, -0.3},
		{"wrong flags", prompt, next + "+0.001+1+1", w.Format + w.FEN + w.RewardField, w.Format + w.FEN + w.RewardField},
		{"one flag wrong", prompt, next + "+0.001+0+1", w.Format + w.FEN + w.RewardField + w.Flags/2,
			w.Format + w.FEN + w.RewardField + w.Flags/2},
		{"wrong reward", prompt, next + "+1.0+0+0", w.Format + w.FEN + w.Flags, w.Format + w.FEN + w.Flags},
		{"reward written differently", prompt, next + "+0.0010+0+0", 1, 1},
		{"malformed", prompt, next + "+0.001+0", -0.3, -0.3},
		{"malformed FEN", prompt, "8/8/8+0.001+0+0", -0.3, -0.3},
		{"illegal move prompt", EnvPrompt(chess.StartFEN, "e2e5", nil), chess.StartFEN + "+-1.0+0+1", 1, 1},
		{"illegal move prompt, answered as legal", EnvPrompt(chess.StartFEN, "e2e5", nil),
			"rnbqkbnr/pppppppp/8/4P3/8/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1+0.001+0+0", w.Format + w.Flags/2, math.NaN()},
		{"checkmate", EnvPrompt("6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1", "a1a8", nil), "R5k1/5ppp/8/8/8/8/8/6K1 b - - 1 1+1.0+1+0", 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := s.Score(ctx, Input{Prompt: tc.prompt, Completion: tc.completion})
			if err != nil {
				t.Fatal(err)
			}
			if !near(r.Total, tc.total) {
				t.Errorf("total = %v, want %v (%s; expected %q)", r.Total, tc.total, FormatComponents(r), r.Expected)
			}
			if math.IsNaN(tc.partialTotal) {
				return
			}
			r, _ = partial.Score(ctx, Input{Prompt: tc.prompt, Completion: tc.completion})
			if !near(r.Total, tc.partialTotal) {
				t.Errorf("partial-FEN total = %v, want %v", r.Total, tc.partialTotal)
			}
		})
	}
}

func TestRewardConfig(t *testing.T) {
	ctx := context.Background()
	prompt := EnvPrompt(chess.StartFEN, "e2e4", nil)
	half := "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1+1.0+0+0" // reward field wrong
	tests := []struct {
		name string
		mod  func(*RewardConfig)
		want float64
	}{
		{"only the reward field counts", func(c *RewardConfig) { c.Env = EnvWeights{RewardField: 1} }, 0},
		{"only the FEN counts", func(c *RewardConfig) { c.Env = EnvWeights{FEN: 1} }, 1},
		{"centered", func(c *RewardConfig) {
			c.Env = EnvWeights{FEN: 1, RewardField: 1}
			c.Shaping, c.PartialCredit = ShapeCentered, false // centered puts well-formed answers below −0.3
		}, 0},
		{"strict", func(c *RewardConfig) { c.Shaping = ShapeStrict }, 0},
		{"strict ignores zero weights", func(c *RewardConfig) { c.Shaping = ShapeStrict; c.Env.RewardField = 0 }, 1},
	}
	for _, tc := range tests {
		s := newTestScorer(t, nil, tc.mod)
		r, err := s.Score(ctx, Input{Prompt: prompt, Completion: half})
		if err != nil || !near(r.Total, tc.want) {
			t.Errorf("%s: total %v, want %v (%v)", tc.name, r.Total, tc.want, err)
		}
	}
	bad := []struct {
		mod   func(*RewardConfig)
		field string
	}{
		{func(c *RewardConfig) { c.Policy.Eval = -1 }, "policy.eval must be a finite weight ≥ 0, got -1"},
		{func(c *RewardConfig) { c.Policy.Eval = math.Inf(1) }, "policy.eval must be a finite weight ≥ 0, got +Inf"},
		{func(c *RewardConfig) { c.Env = EnvWeights{} }, "env weights are all zero"},
		{func(c *RewardConfig) { c.EvalClip = 0 }, "eval_clip must be a finite number of pawns > 0, got 0"},
		{func(c *RewardConfig) { c.Shaping = "cubic" }, `shaping must be "linear", "centered" or "strict", got "cubic"`},
		{func(c *RewardConfig) { c.RankCredit = []float64{2} }, "rank_credit[0] must be in [0, 1], got 2"},
		{func(c *RewardConfig) { c.MalformedFloor = math.NaN() }, "malformed must be in [-10, 10], got NaN"},
		{func(c *RewardConfig) { c.Depth = -1 }, "depth must be in [0, 100] (0: the pool's), got -1"},
		{func(c *RewardConfig) { c.IllegalFloor = 1.5 }, "illegal must be in [-10, 1], got 1.5"},
	}
	for _, tc := range bad {
		cfg := DefaultRewardConfig()
		tc.mod(&cfg)
		if _, err := NewScorer(nil, cfg); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("config error %v, want one naming %q", err, tc.field)
		}
	}
}

func TestScoreBatch(t *testing.T) {
	pool := newTestPool(t, stockfish.Config{Depth: 6, Workers: 2})
	s := newTestScorer(t, pool, nil)
	ctx := context.Background()

	if rs, err := s.ScoreBatch(ctx, nil); err != nil || len(rs) != 0 {
		t.Fatalf("empty batch: %v, %v", rs, err)
	}
	if rs, err := s.ScoreStrings(ctx, []string{}, []string{}); err != nil || len(rs) != 0 {
		t.Fatalf("empty strings batch: %v, %v", rs, err)
	}
	if _, err := s.ScoreStrings(ctx, []string{"P: x"}, nil); err == nil {
		t.Error("length mismatch accepted")
	}

	var ins []Input
	for i, fen := range testFENs {
		perfect, _ := perfectPolicy(t, pool, fen)
		ins = append(ins, Input{Prompt: PolicyPrompt(fen, i%2 == 0), Completion: perfect})
		r, _ := EnvStep(fen, chess.MustParseFEN(fen).LegalMoves()[0])
		ins = append(ins, Input{Prompt: EnvPrompt(fen, r.Move, nil), Completion: r.Completion()})
	}
	ins = append(ins, Input{Prompt: "Q: what?", Completion: "x"}, Input{Prompt: "P: " + testFENs[0], Completion: "garbage"})
	rs, err := s.ScoreBatch(ctx, ins)
	if len(rs) != len(ins) {
		t.Fatalf("%d results for %d inputs", len(rs), len(ins))
	}
	if err == nil || !strings.Contains(err.Error(), "answer 10") || strings.Contains(err.Error(), "answer 11") {
		t.Errorf("err = %v, want exactly the bad prompt (answer 10) reported", err)
	}
	for i, r := range rs[:10] {
		wantTask := TaskPolicy
		if i%2 == 1 {
			wantTask = TaskEnv
		}
		if r.Task != wantTask || !near(r.Total, 1) || r.Error != "" {
			t.Errorf("answer %d: %+v", i, r)
		}
	}
	if rs[10].Error == "" || rs[10].Total != 0 || rs[11].Total != -0.3 {
		t.Errorf("bad prompt %+v; malformed answer %+v", rs[10], rs[11])
	}

	// Deterministic: a fresh pool gives the same totals and components.
	pool2 := newTestPool(t, stockfish.Config{Depth: 6})
	s2 := newTestScorer(t, pool2, nil)
	rs2, _ := s2.ScoreBatch(ctx, ins)
	for i := range rs {
		if rs[i].Total != rs2[i].Total || rs[i].Components != rs2[i].Components {
			t.Errorf("answer %d differs between pools: %v vs %v", i, rs[i].Total, rs2[i].Total)
		}
	}

	// Without a pool, policy answers fail loudly; env answers still score.
	s3 := newTestScorer(t, nil, nil)
	rs3, err := s3.ScoreBatch(ctx, ins[:2])
	if err == nil || !strings.Contains(err.Error(), "Stockfish pool") || rs3[1].Total != 1 {
		t.Errorf("no pool: %v, %+v", err, rs3)
	}
}

func TestComponentsMap(t *testing.T) {
	c := Components{Format: 1, MovesLegal: 0.5, BestRank: 0.7, FENExact: 1, RewardField: 1}
	p, e := c.Map(TaskPolicy), c.Map(TaskEnv)
	if len(p) != len(PolicyComponentNames) || len(e) != len(EnvComponentNames) {
		t.Fatalf("maps %v %v", p, e)
	}
	for _, n := range PolicyComponentNames {
		if _, ok := p[n]; !ok {
			t.Errorf("policy map lacks %s", n)
		}
	}
	if p["best_rank"] != 0.7 || e["fen_exact"] != 1 || e["reward_field"] != 1 {
		t.Errorf("values %v %v", p, e)
	}
	if got := FormatComponents(Result{Task: TaskEnv, Components: c}); got != "format=1 fen_exact=1 fen_similarity=0 fen_ranks=0 flags=0 reward_field=1" {
		t.Errorf("FormatComponents = %q", got)
	}
}

func TestSimilarity(t *testing.T) {
	tests := []struct {
		a, b string
		want float64
	}{
		{"", "", 1}, {"abc", "abc", 1}, {"abc", "", 0}, {"abcd", "abed", 0.75}, {"kitten", "sitting", 1 - 3.0/7},
	}
	for _, tc := range tests {
		if got := Similarity(tc.a, tc.b); !near(got, tc.want) {
			t.Errorf("Similarity(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestModelCardEnvExample: RookWorld-LM-124M's model card's A: example, its FEN-standard
// en-passant square and final '+' included, is well-formed, exact and scores 1.
func TestModelCardEnvExample(t *testing.T) {
	const prompt = "A: rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1+e2e4+e2e4+"
	const answer = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq e3 0 1+0.001+0+0+"
	r, err := newTestScorer(t, nil, nil).Score(context.Background(), Input{Prompt: prompt, Completion: answer})
	if err != nil {
		t.Fatal(err)
	}
	if r.Malformed || r.Components.Format != 1 || r.Components.FENExact != 1 || r.Components.FENSimilarity != 1 || r.Total != 1 {
		t.Errorf("the card's answer: malformed %v, total %v (%s; %v)", r.Malformed, r.Total, FormatComponents(r), r.Problems)
	}
}
