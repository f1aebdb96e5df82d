package rookworld

import (
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/chess"
)

func TestMixPrompt(t *testing.T) {
	start := Item{FEN: chess.StartFEN, Origin: "f:1"}
	mate := Item{FEN: "R5k1/5ppp/8/8/8/8/8/6K1 b - - 1 1", Origin: "f:2"}
	sample, err := ParseSample(PolicyText(chess.StartFEN, []string{"e2e4"}, []float64{0.3}, "e2e4"))
	if err != nil {
		t.Fatal(err)
	}
	row := Item{FEN: chess.StartFEN, Sample: &sample, Origin: "f:3"}
	tests := []struct {
		name string
		mix  Mix
		it   Item
		task string
		want Prompt
	}{
		{"policy padded", Mix{Task: MixPolicy, Pad: true}, start, "",
			Prompt{Prompt: PolicyPrompt(chess.StartFEN, true), Task: "P", FEN: chess.StartFEN, Origin: "f:1"}},
		{"env judges the next move", Mix{Task: MixPolicy}, Item{FEN: chess.StartFEN, Next: "g1f3", History: []string{"e2e4"}}, MixEnv,
			Prompt{Prompt: EnvPrompt(chess.StartFEN, "g1f3", []string{"e2e4"}), Task: "A", FEN: chess.StartFEN, Move: "g1f3"}},
		{"env without a legal move falls back to P:", Mix{Task: MixEnv}, mate, "",
			Prompt{Prompt: PolicyPrompt(mate.FEN, false), Task: "P", FEN: mate.FEN, Origin: "f:2"}},
		{"a training string keeps its own prompt", Mix{Task: MixEnv}, row, "",
			Prompt{Prompt: sample.Prompt, Task: "policy", FEN: chess.StartFEN, Target: sample.Target, Origin: "f:3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.mix.Prompt(tc.it, 7, tc.task); got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestMixIsAFunctionOfSeedAndIndex(t *testing.T) {
	m := Mix{Task: MixBoth, EnvFraction: 0.25, Seed: 3}
	it := Item{FEN: chess.StartFEN}
	env := 0
	for i := range int64(2000) {
		a, b := m.Prompt(it, i, ""), m.Prompt(it, i, "")
		if a != b {
			t.Fatalf("index %d: %+v then %+v", i, a, b)
		}
		if a.Task == "A" {
			env++
			if !chess.MustParseFEN(chess.StartFEN).IsLegal(a.Move) || !strings.HasPrefix(a.Prompt, EnvPrefix) {
				t.Fatalf("index %d: %+v", i, a)
			}
		}
	}
	// 2000 draws at p = 0.25: the count lies within 5 standard deviations (~97).
	if env < 500-97 || env > 500+97 {
		t.Errorf("%d A: prompts of 2000 at env_fraction 0.25", env)
	}
	for _, salt := range []string{"task", "move"} {
		if x := Choose(1, 2, salt); x < 0 || x >= 1 || x != Choose(1, 2, salt) || x == Choose(2, 2, salt) {
			t.Errorf("Choose(1, 2, %q) = %v", salt, x)
		}
	}
}
