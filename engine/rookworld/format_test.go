package rookworld

import (
	"math"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/chess"
	"github.com/rookscript/rookscript/engine/stockfish"
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
