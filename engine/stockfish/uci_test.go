package stockfish

import (
	"errors"
	"reflect"
	"testing"
)

func TestParseInfo(t *testing.T) {
	tests := []struct {
		line string
		want InfoLine
		err  *InfoError // the key and value it names; nil: parses
	}{
		{"info depth 10 seldepth 15 multipv 2 score cp -250 nodes 44279 nps 606561 hashfull 21 tbhits 0 time 73 pv a6c7 d5c6 b7c6",
			InfoLine{Depth: 10, SelDepth: 15, MultiPV: 2, Score: Score{Value: -250}, HasScore: true, Nodes: 44279,
				PV: []string{"a6c7", "d5c6", "b7c6"}}, nil},
		{"info depth 1 seldepth 1 multipv 1 score mate 1 nodes 127 nps 127000 hashfull 0 tbhits 0 time 1 pv f7g7",
			InfoLine{Depth: 1, SelDepth: 1, MultiPV: 1, Score: Score{Mate: true, Value: 1}, HasScore: true, Nodes: 127, PV: []string{"f7g7"}}, nil},
		{"info depth 20 score cp 15 upperbound nodes 5 pv e2e4",
			InfoLine{Depth: 20, MultiPV: 1, Score: Score{Value: 15}, HasScore: true, Bound: "upper", Nodes: 5, PV: []string{"e2e4"}}, nil},
		{"info depth 0 score mate 0", InfoLine{MultiPV: 1, Score: Score{Mate: true}, HasScore: true}, nil},
		{"info depth 5 score cp 3 wdl 500 400 100 pv d2d4",
			InfoLine{Depth: 5, MultiPV: 1, Score: Score{Value: 3}, HasScore: true, PV: []string{"d2d4"}}, nil},
		{"info string NNUE evaluation using nn.nnue enabled", InfoLine{MultiPV: 1, String: "NNUE evaluation using nn.nnue enabled"}, nil},
		{"info currmove e2e4 currmovenumber 1", InfoLine{MultiPV: 1}, nil},
		{"bestmove e2e4", InfoLine{}, &InfoError{}}, // not an info line
		{"info depth x", InfoLine{}, &InfoError{Key: "depth", Value: "x"}},
		{"info depth", InfoLine{}, &InfoError{Key: "depth"}},
		{"info score cp", InfoLine{}, &InfoError{Key: "score"}},
		{"info score wdl 1 pv e2e4", InfoLine{}, &InfoError{Key: "score", Value: "wdl"}},
		{"info multipv 0", InfoLine{}, &InfoError{Key: "multipv", Value: "0"}},
		{"info score cp 99999999999", InfoLine{}, &InfoError{Key: "score cp", Value: "99999999999"}},
	}
	for _, tc := range tests {
		got, err := ParseInfo(tc.line)
		if tc.err != nil {
			var ie *InfoError
			if !errors.As(err, &ie) || ie.Line != tc.line || ie.Key != tc.err.Key || ie.Value != tc.err.Value {
				t.Errorf("ParseInfo(%q) err = %v, want a *InfoError for key %q, value %q", tc.line, err, tc.err.Key, tc.err.Value)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseInfo(%q) = %+v, %v\nwant %+v", tc.line, got, err, tc.want)
		}
	}
}

func TestParentScore(t *testing.T) {
	tests := []struct{ child, want Score }{
		{Score{Value: 40}, Score{Value: -40}},
		{Score{Mate: true, Value: 0}, Score{Mate: true, Value: 1}},  // we just mated
		{Score{Mate: true, Value: -1}, Score{Mate: true, Value: 2}}, // they are mated next move
		{Score{Mate: true, Value: 2}, Score{Mate: true, Value: -2}}, // they mate in 2
		{Score{Mate: true, Value: -3}, Score{Mate: true, Value: 4}},
	}
	for _, tc := range tests {
		if got := parentScore(tc.child); got != tc.want {
			t.Errorf("parentScore(%v) = %v, want %v", tc.child, got, tc.want)
		}
	}
}
