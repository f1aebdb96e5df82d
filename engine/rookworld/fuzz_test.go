package rookworld

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/chess"
)

// Fuzz targets for every parser. Each asserts no panic plus the round trip
// the format allows. Seeds: f.Add below and testdata/fuzz.

func FuzzEnvStep(f *testing.F) {
	f.Add(chess.StartFEN, "e2e4")
	f.Add("8/P7/8/8/8/8/8/K6k w - - 0 1", "a7a8k")
	f.Add("5R2/6R1/8/3P4/p7/1b2R2P/2p3P1/6K1 b - - 0 58", "b3d5")
	f.Fuzz(func(t *testing.T, fen, move string) {
		r, err := EnvStep(fen, move)
		if err != nil {
			return
		}
		out := ParseEnvCompletion(r.Completion())
		if !out.WellFormed() || out.FEN != r.NewFEN || out.Reward != r.Reward ||
			out.Terminated != r.Terminated || out.Truncated != r.Truncated {
			t.Fatalf("completion %q does not parse back: %+v", r.Completion(), out)
		}
		if !r.Legal && r.NewFEN != r.PrevFEN {
			t.Fatal("an illegal move changed the board")
		}
		// A legal move from a legal position leads to a legal position.
		if err := ValidatePosition(r.NewFEN); err != nil {
			t.Fatalf("%s after %s: %v", fen, move, err)
		}
	})
}

func FuzzParsePolicyCompletion(f *testing.F) {
	for _, s := range []string{"M: e2e4 d2d4      E: 0.3 0.25     B: e2e4", "M:E:B:", "E: 1 M: a1a2 B: a1a2",
		"M: a7a8q E: -999.97 B: a7a8q", "B: M: E:", "M: e2e4 E: 1e309 B: e2e4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o := ParsePolicyCompletion(s)
		if !o.WellFormed() {
			return
		}
		// Rendering the parsed answer in the data's format parses back the same.
		back := ParsePolicyCompletion(PolicyCompletion(o.Moves, o.Evals, o.Best))
		if !back.WellFormed() || strings.Join(back.Moves, " ") != strings.Join(o.Moves, " ") || back.Best != o.Best {
			t.Fatalf("%q -> %+v", s, back)
		}
		for i, v := range back.Evals {
			if math.Abs(v-o.Evals[i]) > 0.005+1e-9*math.Abs(v) {
				t.Fatalf("eval %d: %v -> %v", i, o.Evals[i], v)
			}
		}
	})
}

func FuzzParseEnvCompletion(f *testing.F) {
	f.Add(chess.StartFEN + "+0.001+0+0")
	f.Add(" + + + ")
	f.Add(chess.StartFEN + "+-1.0+1+1+junk")
	f.Fuzz(func(t *testing.T, s string) {
		o := ParseEnvCompletion(s)
		if !o.WellFormed() {
			return
		}
		again := o.FEN + "+" + PyFloat(o.Reward) + "+" + flag(o.Terminated) + "+" + flag(o.Truncated)
		back := ParseEnvCompletion(again)
		if !back.WellFormed() || back.FEN != o.FEN || back.Reward != o.Reward ||
			back.Terminated != o.Terminated || back.Truncated != o.Truncated {
			t.Fatalf("%q -> %q -> %+v", s, again, back)
		}
	})
}

func FuzzParseSample(f *testing.F) {
	f.Add(PolicyText(chess.StartFEN, []string{"e2e4"}, []float64{0.3}, "e2e4"))
	f.Add("A: " + chess.StartFEN + "+e2e4+e2e4+rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1+0.001+0+0")
	f.Add("+++++++")
	f.Fuzz(func(t *testing.T, text string) {
		s, err := ParseSample(text)
		if err != nil {
			return
		}
		if s.Text() != strings.TrimRight(text, " \t\r\n") {
			t.Fatalf("Prompt+Target %q != %q", s.Text(), text)
		}
		again, err := ParseSample(s.Text())
		if err != nil || again.Prompt != s.Prompt || again.Target != s.Target {
			t.Fatalf("re-parse: %+v, %v", again, err)
		}
	})
}

func FuzzParseEnvPrompt(f *testing.F) {
	f.Add("A: " + chess.StartFEN + "+e2e4+e2e4+")
	f.Add("A: ++++")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseEnvPrompt(s)
		if err != nil {
			return
		}
		// Rebuilding the prompt from its fields parses back the same.
		prev := p.History
		if n := len(prev); n > 0 {
			prev = prev[:n-1]
		}
		q, err := ParseEnvPrompt("A: " + p.FEN + "+" + p.Move + "+" + strings.Join(append(prev, p.Move), " ") + "+")
		if err != nil || q.FEN != p.FEN || q.Move != p.Move {
			t.Fatalf("%q: rebuilt prompt: %+v, %v", s, q, err)
		}
	})
}

func FuzzPyFloat(f *testing.F) {
	f.Add(0.001)
	f.Add(-2.07)
	f.Add(1e-300)
	f.Fuzz(func(t *testing.T, x float64) {
		s := PyFloat(x)
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v != x {
			t.Fatalf("PyFloat(%v) = %q does not round-trip", x, s)
		}
		if !strings.ContainsAny(s, ".e") {
			t.Fatalf("PyFloat(%v) = %q has neither '.' nor 'e'", x, s)
		}
	})
}

func FuzzParseFENLine(f *testing.F) {
	f.Add(`r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - bm e5g6; id "kiwipete";`)
	f.Add(chess.StartFEN)
	f.Add("# comment")
	f.Fuzz(func(t *testing.T, line string) {
		it, ok, err := parseFENLine(line, "f:1")
		if err != nil || !ok {
			return
		}
		// The item's FEN is canonical and reads back as itself.
		it2, ok2, err := parseFENLine(it.FEN, "f:1")
		if err != nil || !ok2 || it2.FEN != it.FEN {
			t.Fatalf("%q -> %q -> %q, %v", line, it.FEN, it2.FEN, err)
		}
	})
}
