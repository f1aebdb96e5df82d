package rookworld

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/chess"
	"github.com/rookscript/rookscript/engine/stockfish"
)

// Answers that parse in part (DESIGN §4): graded between the malformed floor and the worst
// well-formed answer by the components they have; answers that parse not at all keep the floor.

// class is where an answer's total must lie: unparseable < partly parsed < well-formed.
type class int

const (
	unparseable class = iota
	partlyParsed
	wellFormed
)

var classNames = []string{"unparseable", "partly parsed", "well-formed"}

// classOf classifies an answer from its parse alone (not from the Result it is checked
// against): its share of fields that parse, and whether truncation floors it.
func classOf(cfg RewardConfig, format float64, truncated bool) class {
	switch {
	case truncated && cfg.TruncatedFloor, format == 0:
		return unparseable
	case format < 1:
		return partlyParsed
	}
	return wellFormed
}

// TestPartialCreditEnv: A: answers, by hand. The default model's typical answer (fields that
// parse, a FEN whose ranks have the wrong length) is graded by its FEN's shape (fen_ranks),
// its flags and reward field; partial_credit = false gives the floor as before.
func TestPartialCreditEnv(t *testing.T) {
	ctx := context.Background()
	s := newTestScorer(t, nil, nil)
	old := newTestScorer(t, nil, func(c *RewardConfig) { c.PartialCredit = false })
	prompt := EnvPrompt(chess.StartFEN, "e2e4", nil)
	next := "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
	short := "rnbqkbnr/pppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1" // rank 7 holds 6 squares
	w := s.Config().Env
	const f, l = -0.3, 0.1 // the floor; the lowest well-formed A: total, w.Format with the default weights
	graded := func(t float64) float64 { return f + (l-f)*(1+t)/3 }
	tests := []struct {
		name, completion string
		truncated        bool
		total            float64
		partial          bool
	}{
		{"right", next + "+0.001+0+0", false, 1, false},
		{"wrong but a position", strings.Replace(next, "4P3", "3P4", 1) + "+0.001+0+0", false, w.Format + w.Flags + w.RewardField, false},
		{"a FEN that is not a position", short + "+0.001+0+0", false,
			graded(w.Format*0.75 + w.FEN*7.0/8 + w.Flags + w.RewardField), true},
		{"not a position, flags wrong", short + "+0.001+1+1", false, graded(w.Format*0.75 + w.FEN*7.0/8 + w.RewardField), true},
		{"three fields", next + "+0.001+0", false, graded(w.Format*0.75 + w.FEN + w.Flags/2 + w.RewardField), true},
		{"a FEN alone", next, false, graded(w.Format*0.25 + w.FEN), true},
		{"nothing parses", "hello+x+2+3", false, f, false},
		{"empty", "", false, f, false},
		{"cut by max_new_tokens", short + "+0.001+0+0", true, f, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Prompt: prompt, Completion: tc.completion, Truncated: tc.truncated}
			r, err := s.Score(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			if !near(r.Total, tc.total) || r.Partial != tc.partial {
				t.Errorf("total %v partial %v, want %v %v (%s)", r.Total, r.Partial, tc.total, tc.partial, FormatComponents(r))
			}
			if r.Malformed != (tc.total < l) {
				t.Errorf("malformed %v: a partly parsed answer is still malformed", r.Malformed)
			}
			o, _ := old.Score(ctx, in)
			if want := tc.total; tc.partial || tc.truncated {
				if want = f; o.Total != want || o.Partial {
					t.Errorf("partial_credit = false: total %v partial %v, want the floor %v", o.Total, o.Partial, want)
				}
			} else if o.Total != r.Total {
				t.Errorf("partial_credit = false changed a total it does not concern: %v, want %v", o.Total, r.Total)
			}
		})
	}
}

func TestRankShape(t *testing.T) {
	for _, tc := range []struct {
		fen  string
		want float64
	}{
		{chess.StartFEN, 1},
		{"rnbqkbnr/pppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1", 7.0 / 8},
		{"rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR/8 w - - 0 1", 8.0 / 9}, // a ninth rank
		{"rnbqkbnr/pppppppp/8/8/PPPPPPPP/RNBQKBNR w - - 0 1", 6.0 / 8},
		{"rnbqkbnr/ppppxppp/8/8/8/8/PPPPPPPP/RNBQKBNR w - - 0 1", 7.0 / 8}, // not a piece
		{"rnbqkbnr/pppp9/8/8/8/8/PPPPPPPP/RNBQKBNR w - - 0 1", 7.0 / 8},    // no such digit
		{"", 0}, {"hello", 0},
	} {
		if got := RankShape(tc.fen); !near(got, tc.want) {
			t.Errorf("RankShape(%q) = %v, want %v", tc.fen, got, tc.want)
		}
	}
}

// TestPartialCreditPolicy: P: answers missing a field are graded between the floor (−0.3)
// and the illegal floor (−0.1), the lowest total of a well-formed P: answer by default.
func TestPartialCreditPolicy(t *testing.T) {
	pool := newTestPool(t, stockfish.Config{Depth: 6})
	s := newTestScorer(t, pool, nil)
	ctx := context.Background()
	perfect, a := perfectPolicy(t, pool, rewardFEN)
	moves := a.Moves()
	prompt := PolicyPrompt(rewardFEN, true)
	w := s.Config().Policy
	const f, l = -0.3, -0.1
	graded := func(t float64) float64 { return f + (l-f)*(1+t)/3 }
	noB := strings.Split(perfect, "B:")[0]
	tests := []struct {
		name, completion string
		total            float64 // NaN: only the class
		class            class
	}{
		{"perfect", perfect, 1, wellFormed},
		{"illegal B:", PolicyCompletion(moves, a.Evals(), "e2e4"), l, wellFormed},
		{"no B:", noB, math.NaN(), partlyParsed},
		{"no E:, so no B:", strings.Split(perfect, "E:")[0], graded(w.Format/3 + w.MovesLegal + w.Candidates), partlyParsed},
		{"an illegal B: and no E:", "M: " + strings.Join(moves, " ") + " B: e2e4", graded(w.Format*2/3 + w.MovesLegal + w.Candidates), partlyParsed},
		{"nothing", "", f, unparseable},
		{"prose", "I would play the king's pawn.", f, unparseable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := s.Score(ctx, Input{Prompt: prompt, Completion: tc.completion})
			if err != nil {
				t.Fatal(err)
			}
			if !math.IsNaN(tc.total) && !near(r.Total, tc.total) {
				t.Errorf("total %v, want %v (%s)", r.Total, tc.total, FormatComponents(r))
			}
			if got := classOf(s.Config(), r.Components.Format, false); got != tc.class || r.Partial != (tc.class == partlyParsed) {
				t.Errorf("%s (partial %v), want %s", classNames[got], r.Partial, classNames[tc.class])
			}
			lo, hi := f+(l-f)/3, f+2*(l-f)/3
			if tc.class == partlyParsed && !(r.Total >= lo-1e-12 && r.Total <= hi+1e-12) {
				t.Errorf("partly parsed total %v outside [%v, %v]", r.Total, lo, hi)
			}
		})
	}
	// "no B:" is graded by its components, the engine's eval among them.
	r, _ := s.Score(ctx, Input{Prompt: prompt, Completion: noB})
	c := r.Components
	if want := graded(w.Format*c.Format + w.MovesLegal*c.MovesLegal + w.Candidates*c.Candidates + w.Eval*c.Eval); !near(r.Total, want) || c.Eval <= 0 {
		t.Errorf("no B: total %v, want %v (%s)", r.Total, want, FormatComponents(r))
	}
}

// TestPartialCreditConfig: the region between the floor and the worst well-formed answer must
// exist while partial_credit is on; a configuration that closes it is refused, naming the way
// out, and is accepted with partial_credit = false.
func TestPartialCreditConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*RewardConfig)
		want string
	}{
		{"centered shaping", func(c *RewardConfig) { c.Shaping = ShapeCentered },
			`malformed (-0.3) must be below the lowest total of a well-formed policy answer (-0.9, by shaping "centered")`},
		{"illegal below malformed", func(c *RewardConfig) { c.IllegalFloor = -0.5 },
			"malformed (-0.3) must be below the lowest total of a well-formed policy answer (-0.5, by the illegal floor)"},
		{"malformed at the bottom of the well-formed", func(c *RewardConfig) { c.MalformedFloor = 0.1 },
			"malformed (0.1) must be below the lowest total of a well-formed env answer (0.1"},
	} {
		cfg := DefaultRewardConfig()
		tc.mod(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "set partial_credit = false") {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
		cfg.PartialCredit = false
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s with partial_credit = false: %v", tc.name, err)
		}
	}
	d := DefaultRewardConfig()
	if !d.PartialCredit || d.LowestWellFormed(TaskPolicy) != -0.1 || !near(d.LowestWellFormed(TaskEnv), 0.1) {
		t.Errorf("defaults: partial_credit %v, lowest well-formed P: %v A: %v", d.PartialCredit, d.LowestWellFormed(TaskPolicy), d.LowestWellFormed(TaskEnv))
	}
}

// TestRewardOrdering is the property test of DESIGN §4's failure region: over random valid
// reward settings and random mutations of right answers (fields dropped, corrupted, swapped,
// cut), every total lies in [malformed, 1], an unparseable answer gets exactly the floor, and
// every well-formed answer outranks every partly parsed one, which outranks every
// unparseable one. With the soft overlong punishment on (half the settings, each answer a
// random length) every total lies in [malformed − penalty_factor, 1], its penalty is the
// length's alone, and the rest keeps the order: the classes rank so among answers of one
// length. Each class must occur, or the test proves nothing.
func TestRewardOrdering(t *testing.T) {
	pool := newTestPool(t, stockfish.Config{Depth: 4})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(56, 1))
	fens := testFENs[:3]
	var ins []Input
	for _, fen := range fens {
		perfect, _ := perfectPolicy(t, pool, fen)
		pos := chess.MustParseFEN(fen)
		for range 40 {
			ins = append(ins, sampled(rng, Input{Prompt: PolicyPrompt(fen, true), Completion: mutatePolicy(rng, perfect, pos), Truncated: rng.IntN(10) == 0}))
		}
		for _, m := range pos.LegalMoves()[:3] {
			r, _ := EnvStep(fen, m)
			for range 15 {
				ins = append(ins, sampled(rng, Input{Prompt: EnvPrompt(fen, m, nil), Completion: mutateEnv(rng, r.Completion()), Truncated: rng.IntN(10) == 0}))
			}
		}
	}
	seen := map[Task]*[3]int{TaskPolicy: {}, TaskEnv: {}}
	valid, punished := 0, 0
	for trial := 0; valid < 25; trial++ {
		if trial > 2000 {
			t.Fatalf("only %d of %d random reward settings are valid", valid, trial)
		}
		cfg := randomRewardConfig(rng)
		if cfg.Validate() != nil {
			continue
		}
		valid++
		if rng.IntN(2) == 0 {
			cfg.SoftOverlong = randomSoftOverlong(rng)
		}
		s, err := NewScorer(pool, cfg)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := s.ScoreBatch(ctx, ins)
		if err != nil {
			t.Fatal(err)
		}
		// Per task: the lowest and highest total of each class.
		type span struct{ lo, hi float64 }
		spans := map[Task]*[3]span{}
		for i, r := range rs {
			k := classOf(cfg, r.Components.Format, ins[i].Truncated)
			o := cfg.SoftOverlong
			if lo := cfg.MalformedFloor - o.PenaltyFactor*b2f(o.On()); r.Total < lo || r.Total > 1 {
				t.Fatalf("%+v\n%q: total %v outside [malformed %v − penalty, 1]", cfg, ins[i].Completion, r.Total, cfg.MalformedFloor)
			}
			if want := o.Penalty(ins[i].Tokens, ins[i].MaxNewTokens); r.Overlong != want || !o.On() && r.Overlong != 0 {
				t.Fatalf("%+v\n%d tokens: overlong %v, want %v", o, ins[i].Tokens, r.Overlong, want)
			}
			if k == unparseable && r.Total != cfg.MalformedFloor+r.Overlong || r.Partial != (k == partlyParsed) {
				t.Fatalf("%+v\n%q (%s): total %v, partial %v", cfg, ins[i].Completion, classNames[k], r.Total, r.Partial)
			}
			if r.Overlong < 0 {
				punished++
			}
			r.Total -= r.Overlong // the answer's own total: what the classes order
			sp := spans[r.Task]
			if sp == nil {
				sp = &[3]span{{math.Inf(1), math.Inf(-1)}, {math.Inf(1), math.Inf(-1)}, {math.Inf(1), math.Inf(-1)}}
				spans[r.Task] = sp
			}
			sp[k].lo, sp[k].hi = min(sp[k].lo, r.Total), max(sp[k].hi, r.Total)
			seen[r.Task][k]++
		}
		for task, sp := range spans {
			if sp[unparseable].hi >= sp[partlyParsed].lo || sp[partlyParsed].hi >= sp[wellFormed].lo {
				t.Fatalf("%+v\n%s: class spans overlap: %v", cfg, task, *sp)
			}
		}
	}
	if punished == 0 {
		t.Error("no answer was punished for its length: the bound with the penalty is untested")
	}
	for task, n := range seen {
		for k, c := range n {
			if c == 0 {
				t.Errorf("%s: no %s answer among the mutations: the ordering is untested", task, classNames[k])
			}
		}
	}
}

// sampled gives in a random length within a budget of 72 tokens, as a rollout would: a cut
// answer used the whole budget.
func sampled(rng *rand.Rand, in Input) Input {
	in.MaxNewTokens, in.Tokens = 72, 1+rng.IntN(72)
	if in.Truncated {
		in.Tokens = in.MaxNewTokens
	}
	return in
}

// randomSoftOverlong draws a soft overlong punishment that fits a budget of 72 tokens.
func randomSoftOverlong(rng *rand.Rand) SoftOverlong {
	o := SoftOverlong{SoftPunishCache: rng.IntN(73), PenaltyFactor: 2 * rng.Float64()}
	if rng.IntN(2) == 0 {
		o.MaxCompletionLen = o.SoftPunishCache + rng.IntN(73-o.SoftPunishCache)
	}
	return o
}

// randomRewardConfig draws reward settings: weights (some 0), floors, credits and shaping; the
// caller keeps those that validate.
func randomRewardConfig(rng *rand.Rand) RewardConfig {
	c := DefaultRewardConfig()
	weight := func() float64 {
		if rng.IntN(4) == 0 {
			return 0
		}
		return rng.Float64()
	}
	c.Policy = PolicyWeights{Format: weight(), MovesLegal: weight(), BestRank: weight(), Candidates: weight(), Eval: weight()}
	c.Env = EnvWeights{Format: weight(), FEN: weight(), Flags: weight(), RewardField: weight()}
	c.MalformedFloor = -2 * rng.Float64()
	c.IllegalFloor = c.MalformedFloor + (1-c.MalformedFloor)*rng.Float64()
	c.RankCredit = []float64{1, rng.Float64(), rng.Float64()}
	c.LegalCredit = rng.Float64()
	c.EvalClip = 0.5 + 3*rng.Float64()
	c.FENPartial = rng.IntN(2) == 0
	c.TruncatedFloor = rng.IntN(3) != 0
	c.Shaping = []Shaping{ShapeLinear, ShapeCentered, ShapeStrict}[rng.IntN(3)]
	return c
}

// mutatePolicy returns a P: answer near perfect: fields dropped, moves and evaluations
// replaced by legal, illegal or unreadable ones, junk added.
func mutatePolicy(rng *rand.Rand, perfect string, pos *chess.Position) string {
	o := ParsePolicyCompletion(perfect)
	legal := pos.LegalMoves()
	move := func() string {
		switch rng.IntN(4) {
		case 0:
			return "e2e4"
		case 1:
			return "Nf3"
		}
		return legal[rng.IntN(len(legal))]
	}
	moves := append([]string(nil), o.Moves...)
	evals := append([]string(nil), o.EvalText...)
	best := o.Best
	for range rng.IntN(4) {
		switch rng.IntN(6) {
		case 0:
			moves[rng.IntN(len(moves))] = move()
		case 1:
			evals[rng.IntN(len(evals))] = []string{"0.5", "-3.1.29", "x", "999.97"}[rng.IntN(4)]
		case 2:
			best = move()
		case 3:
			moves = append(moves, move())
		case 4:
			evals = evals[:len(evals)-1]
		case 5:
			best = best + " " + move()
		}
	}
	fields := []string{"M: " + strings.Join(moves, " "), "E: " + strings.Join(evals, " "), "B: " + best}
	switch rng.IntN(8) {
	case 0:
		fields = fields[:1+rng.IntN(2)] // cut after M: or E:
	case 1:
		i := rng.IntN(3)
		fields = append(fields[:i:i], fields[i+1:]...) // one field missing
	case 2:
		return []string{"", "M:", "garbage", "B: e2e4 E:", "1. e4 e5"}[rng.IntN(5)]
	case 3:
		fields = append([]string{"so"}, fields...) // text before M:
	}
	return " " + strings.Join(fields, "      ")
}

// mutateEnv returns an A: answer near right: its FEN corrupted (often no longer a position),
// fields dropped or replaced, junk added.
func mutateEnv(rng *rand.Rand, right string) string {
	f := strings.Split(right, "+")
	for range rng.IntN(4) {
		switch rng.IntN(6) {
		case 0, 1: // the default model's failure: squares added to or taken from a rank
			b := []byte(f[0])
			if len(b) == 0 {
				continue
			}
			i := rng.IntN(len(b))
			if rng.IntN(2) == 0 {
				b = append(b[:i:i], b[i+1:]...)
			} else {
				b = append(b[:i:i], append([]byte{"p1P8/"[rng.IntN(5)]}, b[i:]...)...)
			}
			f[0] = string(b)
		case 2:
			if len(f) > 1 {
				f[1] = []string{"0.001", "1.0", "-1.0", "0.5", "x", ""}[rng.IntN(6)]
			}
		case 3:
			if i := 2 + rng.IntN(2); i < len(f) {
				f[i] = []string{"0", "1", "2", "x"}[rng.IntN(4)]
			}
		case 4:
			f = f[:1+rng.IntN(len(f))]
		case 5:
			f[len(f)-1] += []string{"+", "++", " A:", ""}[rng.IntN(4)]
		}
	}
	if rng.IntN(10) == 0 {
		return []string{"", "+", "hello", "8/8/8"}[rng.IntN(4)]
	}
	return strings.Join(f, "+")
}
