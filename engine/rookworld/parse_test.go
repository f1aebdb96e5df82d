package rookworld

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/chess"
)

func TestParsePolicyCompletion(t *testing.T) {
	tests := []struct {
		name             string
		in               string
		moves, evals, ok bool // MovesOK, EvalsOK, BestOK
		best             string
	}{
		{"data padding", "M: e2e4 d2d4      E: 0.3 0.25     B: e2e4", true, true, true, "e2e4"},
		{"leading padding", "        M: e2e4 E: 0.3 B: e2e4", true, true, true, "e2e4"},
		{"after the padded prompt", " M: e2e4 d2d4" + strings.Repeat(" ", 20) + "E: 0.3 0.25" + strings.Repeat(" ", 29) + "B: e2e4", true, true, true, "e2e4"},
		{"no spaces after colons", "M:e2e4 E:0.3 B:e2e4", true, true, true, "e2e4"},
		{"trailing newline", "M: e2e4 E: 0.3 B: e2e4\n", true, true, true, "e2e4"},
		{"promotion", "M: a7a8q E: 9.0 B: a7a8q", true, true, true, "a7a8q"},
		{"empty", "", false, false, false, ""},
		{"no M", "E: 0.3 B: e2e4", false, false, true, "e2e4"},
		{"no E", "M: e2e4 B: e2e4", true, false, true, "e2e4"},
		{"no B", "M: e2e4 E: 0.3", true, true, false, ""},
		{"M empty", "M: E: B: e2e4", false, false, true, "e2e4"},
		{"six moves", "M: a2a3 b2b3 c2c3 d2d3 e2e3 f2f3 E: 1 1 1 1 1 1 B: a2a3", false, true, true, "a2a3"},
		{"bad move token", "M: e2e4 Nf3 E: 0.3 0.2 B: e2e4", false, true, true, "e2e4"},
		{"fewer evals", "M: e2e4 d2d4 E: 0.3 B: e2e4", true, false, true, "e2e4"},
		{"more evals", "M: e2e4 E: 0.3 0.4 B: e2e4", true, false, true, "e2e4"},
		{"eval not a number", "M: e2e4 E: abc B: e2e4", true, false, true, "e2e4"},
		{"eval nan", "M: e2e4 E: nan B: e2e4", true, false, true, "e2e4"},
		{"eval inf", "M: e2e4 E: inf B: e2e4", true, false, true, "e2e4"},
		{"eval hex", "M: e2e4 E: 0x1p3 B: e2e4", true, false, true, "e2e4"},
		{"eval underscore", "M: e2e4 E: 1_0 B: e2e4", true, false, true, "e2e4"},
		{"B empty", "M: e2e4 E: 0.3 B:", true, true, false, ""},
		{"B two tokens", "M: e2e4 E: 0.3 B: e2e4 e7e5", true, true, false, "e2e4 e7e5"},
		{"B off the board", "M: e2e4 E: 0.3 B: e2e9", true, true, false, "e2e9"},
		{"text after B", "M: e2e4 E: 0.3 B: e2e4<|endoftext|>", true, true, false, "e2e4<|endoftext|>"},
		{"junk before M", "hello M: e2e4 E: 0.3 B: e2e4", false, true, true, "e2e4"},
		{"fields out of order", "E: 0.3 M: e2e4 B: e2e4", false, false, true, "e2e4"},
		{"repeated prompt", "P: 8/8 M: e2e4 E: 0.3 B: e2e4", false, true, true, "e2e4"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := ParsePolicyCompletion(tc.in)
			if o.MovesOK != tc.moves || o.EvalsOK != tc.evals || o.BestOK != tc.ok || o.Best != tc.best {
				t.Errorf("got moves=%v evals=%v best=%v %q (%v), want %v %v %v %q",
					o.MovesOK, o.EvalsOK, o.BestOK, o.Best, o.Problems, tc.moves, tc.evals, tc.ok, tc.best)
			}
			if o.WellFormed() != (tc.moves && tc.evals && tc.ok) {
				t.Error("WellFormed disagrees with the fields")
			}
			if !o.WellFormed() && len(o.Problems) == 0 {
				t.Error("a malformed answer must say what is wrong")
			}
		})
	}
}

func TestParseEnvCompletion(t *testing.T) {
	fen := "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
	tests := []struct {
		name                string
		in                  string
		fen, rew, term, trn bool
		fields              int
	}{
		{"valid", fen + "+0.001+0+0", true, true, true, true, 4},
		{"whitespace", "  " + fen + " + 0.001 + 1 + 0 \n", true, true, true, true, 4},
		{"empty", "", false, false, false, false, 0},
		{"three fields", fen + "+0.001+0", true, true, true, false, 3},
		{"five fields", fen + "+0.001+0+0+1", true, true, true, false, 4},
		{"bad fen", "8/8/8 w - - 0 1+0.001+0+0", false, true, true, true, 4},
		{"reward not a number", fen + "+win+0+0", true, false, true, true, 4},
		{"flag 2", fen + "+0.001+2+0", true, true, false, true, 4},
		{"flag word", fen + "+0.001+0+false", true, true, true, false, 4},
		{"fen only", fen, true, false, false, false, 1},
		{"card's final +", fen + "+0.001+0+0+", true, true, true, true, 4},
		{"card's final +, trailing whitespace", fen + "+0.001+0+1+ \r\n", true, true, true, true, 4},
		{"final + after spaces", fen + "+0.001+0+0 + ", true, true, true, true, 4},
		{"trailing tab", fen + "+0.001+0+0\t", true, true, true, true, 4},
		{"two final +", fen + "+0.001+0+0++", true, true, true, false, 4},
		{"text after the final +", fen + "+0.001+0+0+A: x", true, true, true, false, 4},
		{"text after the flag", fen + "+0.001+0+0 ok", true, true, true, false, 4},
		{"final + on three fields", fen + "+0.001+0+", true, true, true, false, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := ParseEnvCompletion(tc.in)
			if o.FENOK != tc.fen || o.RewardOK != tc.rew || o.TerminatedOK != tc.term || o.TruncatedOK != tc.trn || o.Fields != tc.fields {
				t.Errorf("got %+v", o)
			}
		})
	}
}

func TestParseSample(t *testing.T) {
	policy := PolicyText(chess.StartFEN, []string{"e2e4", "d2d4"}, []float64{0.3, 0.25}, "e2e4")
	env := "A: " + chess.StartFEN + "+e2e4+e2e4+rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1+0.001+0+0"
	raw := strings.TrimPrefix(env, "A: ")
	tests := []struct {
		name, text string
		task       Task
		prompt     string
		err        string
	}{
		{"policy", policy, TaskPolicy, PolicyPrompt(chess.StartFEN, true), ""},
		{"policy with newline", policy + "\r\n", TaskPolicy, PolicyPrompt(chess.StartFEN, true), ""},
		{"env", env, TaskEnv, "A: " + chess.StartFEN + "+e2e4+e2e4+", ""},
		{"env with trailing space", env + " ", TaskEnv, "A: " + chess.StartFEN + "+e2e4+e2e4+", ""},
		{"raw arbiter row", raw, TaskEnv, chess.StartFEN + "+e2e4+e2e4+", ""},
		{"unknown", "hello", "", "", "P: or A:"},
		{"policy without M", "P: " + chess.StartFEN, "", "", "no M:"},
		{"policy bad FEN", "P: 8/8 w - - M: e2e4 E: 1 B: e2e4", "", "", "fen"},
		{"policy cleared fields", "P: " + chess.StartFEN + " M: ---- E: ---- B: e2e4", "", "", "not a UCI move"},
		{"env bad completion", "A: " + chess.StartFEN + "+e2e4+e2e4+xx+0.001+0+0", "", "", "fen"},
		{"env too few fields", "A: " + chess.StartFEN + "+e2e4+", "", "", "7"},
		{"env long history", "A: " + chess.StartFEN + "+e2e4+1 2 3 4 5 6 7 8 9 10 11+" + chess.StartFEN + "+0.001+0+0", "", "", "history"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSample(tc.text)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Task != tc.task || s.Prompt != tc.prompt {
				t.Errorf("task %q prompt %q", s.Task, s.Prompt)
			}
			if s.Text() != strings.TrimRight(tc.text, " \r\n") {
				t.Errorf("Prompt+Target = %q", s.Text())
			}
		})
	}
}

func TestPromptFields(t *testing.T) {
	fen, tail, err := PolicyPromptFields("P: " + chess.StartFEN + "    M:")
	if err != nil || fen != chess.StartFEN || tail != "M:" {
		t.Errorf("PolicyPromptFields = %q %q %v", fen, tail, err)
	}
	p, err := ParseEnvPrompt("A: " + chess.StartFEN + "+e2e4+d2d4 e2e4+")
	want := EnvPromptFields{FEN: chess.StartFEN, Move: "e2e4", History: []string{"d2d4", "e2e4"}}
	if err != nil || !reflect.DeepEqual(p, want) {
		t.Errorf("ParseEnvPrompt = %+v, %v", p, err)
	}
	for _, bad := range []string{"P: " + chess.StartFEN + "+e2e4+e2e4+", "A: " + chess.StartFEN + "+e2e4", "A: " + chess.StartFEN + "+e2e4+e2e4+junk",
		"A: 8/8+e2e4+e2e4+", "A: " + chess.StartFEN + "++e2e4+"} {
		if _, err := ParseEnvPrompt(bad); err == nil {
			t.Errorf("ParseEnvPrompt(%q) accepted", bad)
		}
	}
	for prompt, want := range map[string]Task{"P: x": TaskPolicy, "  A: x": TaskEnv, "\nP:": TaskPolicy} {
		if got, err := DetectTask(prompt); err != nil || got != want {
			t.Errorf("DetectTask(%q) = %q, %v", prompt, got, err)
		}
	}
	if _, err := DetectTask("B: e2e4"); err == nil {
		t.Error("DetectTask accepted an unknown prefix")
	}
}
