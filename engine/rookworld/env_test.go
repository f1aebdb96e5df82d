package rookworld

import (
	"errors"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/chess"
)

func TestEnvStep(t *testing.T) {
	tests := []struct {
		name      string
		fen, move string
		want      string // the completion
		term      chess.Termination
	}{
		{"legal", chess.StartFEN, "e2e4",
			"rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1+0.001+0+0", chess.NotOver},
		{"checkmate pays the mover", "rnbqkbnr/pppp1ppp/8/4p3/6P1/5P2/PPPPP2P/RNBQKBNR b KQkq - 0 2", "d8h4",
			"rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3+1.0+1+0", chess.Checkmate},
		{"back-rank mate", "6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1", "a1a8",
			"R5k1/5ppp/8/8/8/8/8/6K1 b - - 1 1+1.0+1+0", chess.Checkmate},
		{"stalemate is a draw", "7k/8/6K1/8/8/8/8/5Q2 w - - 0 1", "f1f7",
			"7k/5Q2/6K1/8/8/8/8/8 b - - 1 1+0.5+1+0", chess.Stalemate},
		{"insufficient material after a capture", "8/8/8/8/8/2k5/8/Kn6 w - - 0 1", "a1b1",
			"8/8/8/8/8/2k5/8/1K6 b - - 0 1+0.5+1+0", chess.InsufficientMaterial},
		{"75-move rule", "4k3/8/8/8/8/8/8/R3K3 w - - 149 80", "a1a2",
			"4k3/8/8/8/8/8/R7/4K3 b - - 150 80+0.5+1+0", chess.SeventyFiveMoves},
		{"a pawn move resets the clock", "4k3/8/8/8/8/8/P7/4K3 w - - 149 80", "a2a3",
			"4k3/8/8/8/8/P7/8/4K3 b - - 0 80+0.001+0+0", chess.NotOver},
		{"illegal move leaves the board", chess.StartFEN, "e2e5", chess.StartFEN + "+-1.0+0+1", chess.NotOver},
		{"malformed move leaves the board", chess.StartFEN, "xyz", chess.StartFEN + "+-1.0+0+1", chess.NotOver},
		{"illegal move in a finished game", "7k/5Q2/6K1/8/8/8/8/8 b - - 1 1", "h8g8",
			"7k/5Q2/6K1/8/8/8/8/8 b - - 1 1+-1.0+1+1", chess.Stalemate},
		{"ep square written after the step", "rnbqkbnr/pppppppp/8/4P3/8/8/PPPP1PPP/RNBQKBNR b KQkq - 0 2", "d7d5",
			"rnbqkbnr/ppp1pppp/8/3pP3/8/8/PPPP1PPP/RNBQKBNR w KQkq d6 0 3+0.001+0+0", chess.NotOver},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := EnvStep(tc.fen, tc.move)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Completion(); got != tc.want {
				t.Errorf("completion = %q\nwant          %q", got, tc.want)
			}
			if r.Termination != tc.term {
				t.Errorf("termination = %q, want %q", r.Termination, tc.term)
			}
		})
	}
}

// The A: example of DESIGN §3, reproduced byte for byte. Its board has no
// black king (the public rollouts pushed illegal moves), so EnvStep refuses
// it; the rules still play it, which is all the text format needs.
func TestEnvTextDesignExample(t *testing.T) {
	const fen = "5R2/6R1/8/3P4/p7/1b2R2P/2p3P1/6K1 b - - 0 58"
	const want = "A: " + fen + "+b3d5+e1e3 a2b3 f7f2 b5b4 g5g7 b4c3 f2f8 c3c2 d4d5 b3d5+5R2/6R1/8/3b4/p7/4R2P/2p3P1/6K1 w - - 0 59+0.001+0+0"
	var ie *chess.InvalidError
	if _, err := EnvStep(fen, "b3d5"); !errors.As(err, &ie) || *ie != (chess.InvalidError{Side: "black", Piece: "kings", Count: 0}) {
		t.Errorf("EnvStep on the kingless example: %v, want it refused", err)
	}
	g, err := chess.NewGame(fen)
	if err != nil {
		t.Fatal(err)
	}
	r := Step(g, "b3d5")
	previous := strings.Fields("c2c4 d7d6 e1e3 a2b3 f7f2 b5b4 g5g7 b4c3 f2f8 c3c2 d4d5")
	if got := EnvText(r, previous); got != want {
		t.Errorf("EnvText =\n%q\nwant\n%q", got, want)
	}
}

func TestFivefoldRepetition(t *testing.T) {
	g, err := chess.NewGame(chess.StartFEN)
	if err != nil {
		t.Fatal(err)
	}
	shuffle := []string{"g1f3", "g8f6", "f3g1", "f6g8"}
	for i := 0; i < 3; i++ {
		for _, m := range shuffle {
			if err := g.Push(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The start position has now occurred 4 times.
	if o := g.Outcome(); o.Over() {
		t.Fatalf("after 4 occurrences: %+v, want the game to go on", o)
	}
	for _, m := range shuffle[:3] {
		if r := Step(g, m); r.Terminated {
			t.Fatalf("%s terminated early: %+v", m, r)
		}
	}
	r := Step(g, "f6g8")
	if !r.Terminated || r.Termination != chess.FivefoldRepetition || r.Reward != RewardDraw {
		t.Fatalf("fifth occurrence: %+v, want a fivefold draw", r)
	}
	// The bare FEN has no history, so the same step from it is not a draw.
	r2, _ := EnvStep(r.PrevFEN, "f6g8")
	if r2.Terminated {
		t.Errorf("EnvStep without history: %+v, want no termination", r2)
	}
}

// TestFENMatches: the next FEN is judged in either en-passant convention, python-chess's
// (a square only where a capture is legal) and the FEN standard's (a square after every
// two-square push); any other difference, a square the move did not pass among them, is
// wrong.
func TestFENMatches(t *testing.T) {
	const afterE4 = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
	const capturable = "rnbqkbnr/pppppppp/8/4P3/8/8/PPPP1PPP/RNBQKBNR b KQkq - 0 2"
	const afterD5 = "rnbqkbnr/ppp1pppp/8/3pP3/8/8/PPPP1PPP/RNBQKBNR w KQkq d6 0 3"
	const blackPush = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
	tests := []struct {
		name, fen, move, answer string
		standard                string // StandardFEN
		match                   bool
	}{
		{"python-chess", chess.StartFEN, "e2e4", afterE4, strings.Replace(afterE4, " - 0", " e3 0", 1), true},
		{"FEN standard", chess.StartFEN, "e2e4", strings.Replace(afterE4, " - 0", " e3 0", 1), strings.Replace(afterE4, " - 0", " e3 0", 1), true},
		{"another square", chess.StartFEN, "e2e4", strings.Replace(afterE4, " - 0", " e4 0", 1), strings.Replace(afterE4, " - 0", " e3 0", 1), false},
		{"square and a wrong clock", chess.StartFEN, "e2e4", strings.Replace(afterE4, " - 0 1", " e3 1 1", 1), strings.Replace(afterE4, " - 0", " e3 0", 1), false},
		{"black's push", blackPush, "c7c5", "rnbqkbnr/pp1ppppp/8/2p5/4P3/8/PPPP1PPP/RNBQKBNR w KQkq c6 0 2", "rnbqkbnr/pp1ppppp/8/2p5/4P3/8/PPPP1PPP/RNBQKBNR w KQkq c6 0 2", true},
		{"capture legal: both write it", capturable, "d7d5", afterD5, "", true},
		{"capture legal: left out", capturable, "d7d5", strings.Replace(afterD5, " d6 ", " - ", 1), "", false},
		{"one-square push", chess.StartFEN, "e2e3", "rnbqkbnr/pppppppp/8/8/8/4P3/PPPP1PPP/RNBQKBNR b KQkq e2 0 1", "", false},
		{"knight move", chess.StartFEN, "g1f3", "rnbqkbnr/pppppppp/8/8/8/5N2/PPPPPPPP/RNBQKB1R b KQkq - 1 1", "", true},
		{"illegal move", chess.StartFEN, "e2e5", chess.StartFEN, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := EnvStep(tc.fen, tc.move)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.StandardFEN(); got != tc.standard {
				t.Errorf("StandardFEN = %q, want %q", got, tc.standard)
			}
			if got := r.FENMatches(tc.answer); got != tc.match {
				t.Errorf("FENMatches(%q) = %v, want %v (rules: %q)", tc.answer, got, tc.match, r.NewFEN)
			}
		})
	}
}
