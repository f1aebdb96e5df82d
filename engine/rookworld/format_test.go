package rookworld

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/chess"
	"github.com/rookscript/rookscript/engine/stockfish"
	"github.com/rookscript/rookscript/engine/tokenizer"
)

func TestPyFloat(t *testing.T) {
	// Expected values are Python 3's str(float).
	tests := []struct {
		x    float64
		want string
	}{
		{0.001, "0.001"}, {1, "1.0"}, {-1, "-1.0"}, {0.5, "0.5"}, {0, "0.0"}, {math.Copysign(0, -1), "-0.0"},
		{-2.07, "-2.07"}, {999.97, "999.97"}, {1e-5, "1e-05"}, {0.0001, "0.0001"}, {1e16, "1e+16"},
		{123456789, "123456789.0"}, {sum(0.1, 0.2), "0.30000000000000004"}, {1.5e300, "1.5e+300"},
		{math.Inf(1), "inf"}, {math.NaN(), "nan"},
	}
	for _, tc := range tests {
		if got := PyFloat(tc.x); got != tc.want {
			t.Errorf("PyFloat(%v) = %q, want %q", tc.x, got, tc.want)
		}
	}
}

func TestFormatEval(t *testing.T) {
	// Expected values are Python 3's str(round(x, 2)).
	tests := []struct {
		x    float64
		want string
	}{
		{-2, "-2.0"}, {-2.07, "-2.07"}, {0.3, "0.3"}, {-0.001, "-0.0"}, {2.675, "2.67"}, {0.125, "0.12"},
		{0.375, "0.38"}, {-2.005, "-2.0"}, {999.97, "999.97"}, {-1000, "-1000.0"}, {12.3456, "12.35"},
		{float64(-206) / 100, "-2.06"}, {float64(99997) / 100, "999.97"},
	}
	for _, tc := range tests {
		if got := FormatEval(tc.x); got != tc.want {
			t.Errorf("FormatEval(%v) = %q, want %q", tc.x, got, tc.want)
		}
	}
}

// The P: example of DESIGN §3, reproduced byte for byte.
func TestPolicyTextDesignExample(t *testing.T) {
	want := "P: r1b1kbnr/pp2pppp/n1p5/q2PP3/3P4/2N5/PP3PPP/R1BQKBNR b KQkq - 2 6" + strings.Repeat(" ", 26) +
		"M: c6d5 a6b4 c8d7 a6c7 a6b8" + strings.Repeat(" ", 6) +
		"E: -2.0 -2.07 -2.92 -2.79 -2.66" + strings.Repeat(" ", 12) + "B: c8d7"
	got := PolicyText("r1b1kbnr/pp2pppp/n1p5/q2PP3/3P4/2N5/PP3PPP/R1BQKBNR b KQkq - 2 6",
		[]string{"c6d5", "a6b4", "c8d7", "a6c7", "a6b8"}, []float64{-2.0, -2.07, -2.92, -2.79, -2.66}, "c8d7")
	if got != want {
		t.Errorf("PolicyText =\n%q\nwant\n%q", got, want)
	}
	s, err := ParseSample(got)
	if err != nil {
		t.Fatal(err)
	}
	if s.Prompt != PolicyPrompt(s.FEN, true) || s.Prompt+s.Target != got {
		t.Errorf("sample split %q | %q", s.Prompt, s.Target)
	}
}

func TestPaddingOverflow(t *testing.T) {
	// Fields longer than their width are written unpadded, as Python does.
	long := strings.Repeat("a1a2 ", 7)
	got := PolicyCompletion(strings.Fields(long), []float64{1, 2, 3, 4, 5, 6, 7}, "a1a2")
	if !strings.HasPrefix(got, "M: "+strings.TrimSpace(long)+"E: ") {
		t.Errorf("PolicyCompletion = %q", got)
	}
}

func TestEnvPromptHistory(t *testing.T) {
	tests := []struct {
		previous []string
		want     string
	}{
		{nil, "e2e4"},
		{[]string{"a", "b"}, "a b e2e4"},
		{strings.Fields("1 2 3 4 5 6 7 8 9 10 11"), "3 4 5 6 7 8 9 10 11 e2e4"},
	}
	for _, tc := range tests {
		got := EnvPrompt(chess.StartFEN, "e2e4", tc.previous)
		if want := "A: " + chess.StartFEN + "+e2e4+" + tc.want + "+"; got != want {
			t.Errorf("EnvPrompt(%v) = %q, want %q", tc.previous, got, want)
		}
	}
}

// sum defeats constant folding (0.1 + 0.2 as constants is exactly 0.3).
func sum(a, b float64) float64 { return a + b }

func TestScorePawns(t *testing.T) {
	tests := []struct {
		s    stockfish.Score
		want string
	}{
		{stockfish.Score{Value: 35}, "0.35"}, {stockfish.Score{Value: -206}, "-2.06"}, {stockfish.Score{Value: 0}, "0.0"},
		{stockfish.Score{Mate: true, Value: 3}, "999.97"}, {stockfish.Score{Mate: true, Value: -2}, "-999.98"},
		{stockfish.Score{Mate: true, Value: 1}, "999.99"}, {stockfish.Score{Mate: true, Value: 0}, "-1000.0"},
	}
	for _, tc := range tests {
		if got := FormatEval(tc.s.Pawns()); got != tc.want {
			t.Errorf("%v.Pawns() formats as %q, want %q", tc.s, got, tc.want)
		}
	}
}

// The P: prompt forms, byte for byte: padded to the width less its last pad space, or bare;
// a FEN that fills the width has no pad space to lose.
func TestPolicyPromptForms(t *testing.T) {
	const fen = "r1b1kbnr/pp2pppp/n1p5/q2PP3/3P4/2N5/PP3PPP/R1BQKBNR b KQkq - 2 6" // 64 characters
	long89 := longFEN(89)
	long95 := longFEN(95)
	tests := []struct {
		fen    string
		padded bool
		want   string
	}{
		{fen, true, "P: " + fen + strings.Repeat(" ", 25)},
		{fen, false, "P: " + fen},
		{long89, true, "P: " + long89},
		{long95, true, "P: " + long95},
	}
	for _, tc := range tests {
		if got := PolicyPrompt(tc.fen, tc.padded); got != tc.want {
			t.Errorf("PolicyPrompt(%q, %v) = %q, want %q", tc.fen, tc.padded, got, tc.want)
		}
	}
}

// longFEN is a position whose FEN has n (81 to 116) characters: 32 pieces spread over the
// board (the longest board field, 71 characters), white to move, no castling, and clocks as
// long as it takes.
func longFEN(n int) string {
	head := "r1b1k1n1/1p1p1p1p/p1p1p1p1/1n1b1q1r/R1Q1B1N1/1P1P1P1P/P1P1P1P1/1N1B1K1R w - - "
	d := n - len(head) - 1
	clock := func(digits int) string { return "1" + strings.Repeat("0", digits-1) }
	return head + clock(d/2) + " " + clock(d-d/2)
}

// invariantPositions are n positions of seeded random games, every third ply, plus
// constructed ones whose FENs reach and pass the policy field's width: the positions the
// token-boundary invariant is checked over.
func invariantPositions(t *testing.T, n int) []Item {
	t.Helper()
	r := rand.New(rand.NewPCG(11, 11))
	var items []Item
	for len(items) < n {
		g, err := chess.NewGame(chess.StartFEN)
		if err != nil {
			t.Fatal(err)
		}
		for ply := 1; ply <= 240 && !g.Outcome().Over() && len(items) < n; ply++ {
			legal := g.Position().LegalMoves()
			if err := g.Push(legal[r.IntN(len(legal))]); err != nil {
				t.Fatal(err)
			}
			if ply%3 == 0 {
				moves := g.Moves()
				items = append(items, Item{FEN: g.Position().FEN(), History: moves[max(0, len(moves)-EnvHistoryLen):],
					Origin: fmt.Sprintf("position %d", len(items)+1)})
			}
		}
	}
	for _, l := range []int{85, 87, 88, 89, 90, 91, 92, 100} {
		fen := longFEN(l)
		if len(fen) != l {
			t.Fatalf("longFEN(%d) has %d characters", l, len(fen))
		}
		items = append(items, Item{FEN: fen, Origin: fmt.Sprintf("constructed, %d characters", l)})
	}
	return items
}

// TestTokenBoundaryInvariant is the token-boundary invariant of DESIGN §3: every prompt the
// package builds, encoded alone, is a token prefix of its training text encoded as one, as
// RookWorld-LM was trained. Over 1000 generated positions of each
// task and constructed FENs that fill the 90-character width: P: prompts padded and bare, A:
// prompts for a legal and an illegal move with the data's answer and the model card's (final
// '+'), and the prompt ParseSample takes from each training string. The fully padded P:
// prompt, the old form, fails wherever a pad space exists, and its consistent form is
// PolicyPrompt's: the test can fail.
func TestTokenBoundaryInvariant(t *testing.T) {
	tok, err := tokenizer.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	check := func(what, prompt, completion string) {
		t.Helper()
		if ok, consistent := TokenBoundary(tok, prompt, completion); !ok {
			t.Fatalf("%s: %q is not a token prefix of its text %q (consistent prefix %q)", what, prompt, prompt+completion, consistent)
		}
	}
	items := invariantPositions(t, 1000)
	policy, env, long, oldFailed := 0, 0, 0, 0
	for i, it := range items {
		pos := chess.MustParseFEN(it.FEN)
		legal := pos.LegalMoves()
		if len(legal) == 0 {
			continue
		}
		moves := legal[:min(5, len(legal))]
		evals := make([]float64, len(moves))
		for k := range evals {
			evals[k] = float64(k*37%200-100) / 100
		}
		text := PolicyText(it.FEN, moves, evals, moves[0])
		for _, padded := range []bool{true, false} {
			p := PolicyPrompt(it.FEN, padded)
			if !strings.HasPrefix(text, p) {
				t.Fatalf("%s: prompt %q is not a prefix of %q", it.Origin, p, text)
			}
			check(it.Origin, p, text[len(p):])
		}
		if s, err := ParseSample(text); err != nil || s.Prompt != PolicyPrompt(it.FEN, true) {
			t.Fatalf("%s: ParseSample's prompt %q (%v), PolicyPrompt's %q", it.Origin, s.Prompt, err, PolicyPrompt(it.FEN, true))
		}
		old := PolicyPrefix + pad(it.FEN, PolicyFENWidth)
		if ok, consistent := TokenBoundary(tok, old, text[len(old):]); len(it.FEN) < PolicyFENWidth-1 {
			if ok || consistent != PolicyPrompt(it.FEN, true) {
				t.Fatalf("%s: the fully padded prompt: ok %v, consistent %q", it.Origin, ok, consistent)
			}
			oldFailed++
		} else {
			long++
		}
		policy++

		move := legal[(i*7)%len(legal)]
		for _, m := range []string{move, "a1a1"} {
			game, err := chess.NewGame(it.FEN)
			if err != nil {
				t.Fatal(err)
			}
			r := Step(game, m)
			text := EnvText(r, it.History)
			p := EnvPrompt(it.FEN, m, it.History)
			check(it.Origin, p, r.Completion())
			check(it.Origin+" (card's final +)", p, r.Completion()+"+")
			if s, err := ParseSample(text); err != nil || s.Prompt != p {
				t.Fatalf("%s: ParseSample's prompt %q (%v), EnvPrompt's %q", it.Origin, s.Prompt, err, p)
			}
		}
		env++
	}
	if policy < 1000 || env < 1000 || long < 5 || oldFailed < 1000 {
		t.Fatalf("checked %d P: and %d A: positions, %d filling the width, the old form failing on %d: want ≥ 1000, 1000, 5, 1000",
			policy, env, long, oldFailed)
	}
	t.Logf("%d P: and %d A: positions (%d filling the width); the fully padded prompt failed on %d", policy, env, long, oldFailed)
}

// TestPromptBoundary: prompts as users write them, checked without their answers.
func TestPromptBoundary(t *testing.T) {
	tok, err := tokenizer.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	fen := chess.StartFEN
	full := PolicyPrefix + pad(fen, PolicyFENWidth)
	env := EnvPrompt(fen, "e2e4", nil)
	tests := []struct {
		name, prompt string
		ok           bool
		consistent   string
	}{
		{"padded", PolicyPrompt(fen, true), true, PolicyPrompt(fen, true)},
		{"bare", PolicyPrompt(fen, false), true, PolicyPrompt(fen, false)},
		{"fully padded", full, false, PolicyPrompt(fen, true)},
		{"one space of many", PolicyPrompt(fen, false) + " ", true, PolicyPrompt(fen, false) + " "},
		{"the only pad space", PolicyPrefix + longFEN(89) + " ", false, PolicyPrefix + longFEN(89)},
		{"beyond the width", full + "  ", false, full + " "},
		{"ending in M:", PolicyPrompt(fen, true) + " M:", true, PolicyPrompt(fen, true) + " M:"},
		{"A:", env, true, env},
		{"A: with a trailing space", env + " ", false, env},
		{"other text", "Hello", true, "Hello"},
		{"other text, a trailing space", "Hello ", false, "Hello"},
	}
	for _, tc := range tests {
		if ok, consistent := PromptBoundary(tok, tc.prompt); ok != tc.ok || consistent != tc.consistent {
			t.Errorf("%s: PromptBoundary(%q) = %v, %q; want %v, %q", tc.name, tc.prompt, ok, consistent, tc.ok, tc.consistent)
		}
	}
}
