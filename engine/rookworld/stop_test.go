package rookworld

import (
	"testing"

	"github.com/rookscript/rookscript/engine/chess"
)

// TestAnswerEnd: where the RookWorld rule ends answers fed a token's text at a time: the
// piece at which it ends and how many of that piece's bytes belong to the answer (0: none,
// the answer ended with the piece before).
func TestAnswerEnd(t *testing.T) {
	white7 := PolicyPrompt("4k3/4P3/8/8/8/8/8/4K3 w - - 0 1", true)  // a white pawn on e7
	rook7 := PolicyPrompt("4k3/4R3/8/8/8/8/8/4K3 w - - 0 1", true)   // a white rook on e7
	black2 := PolicyPrompt("4k3/8/8/8/8/8/3p4/4K3 b - - 0 1", false) // a black pawn on d2
	start := PolicyPrompt(chess.StartFEN, true)
	env := EnvPrompt(chess.StartFEN, "e2e4", nil)
	after := "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
	tests := []struct {
		name   string
		prompt string
		pieces []string
		piece  int // index of the piece the answer ends at; -1: it does not end
		end    int
	}{
		{"P: after the move", start, []string{" M", ":", " e", "2", "e", "4", " E", ":", " 0", ".", "3", " B", ":", " e", "2", "e", "4", " A", ":"}, 16, 1},
		{"P: the move inside a token", start, []string{" M: e2e4 E: 0.3", " B: e2", "e4 A: "}, 2, 2},
		{"P: no space after B:", start, []string{"M: e2e4 E: 0.3 B:e2e4"}, 0, len("M: e2e4 E: 0.3 B:e2e4")},
		{"P: runs on without a move", start, []string{" M: e2e4 E: 0.3 B:", " xyz e2e4", " A: e2e4"}, -1, 0},
		{"P: a second B: counts", start, []string{" B: x", " B: g1f3"}, 1, 8},
		{"P: a promotion letter", white7, []string{" B: e7", "e8", "q", " "}, 2, 1},
		{"P: a promotion without its letter", white7, []string{" B: e7", "e8", " A"}, 2, 0},
		{"P: a promotion, a letter in the same token", white7, []string{" B: e7e8", "q A"}, 1, 1},
		{"P: a promotion cut inside a token", white7, []string{" B: e7e8 A:"}, 0, len(" B: e7e8")},
		{"P: a rook to the last rank", rook7, []string{" B: e7", "e8", "q"}, 1, 2},
		{"P: black's promotion", black2, []string{"  M: d2d1q E: 9.0 B: d2d1", "n"}, 1, 1},
		{"P: a FEN that does not parse", "P: not a fen", []string{" B: a7a8", "x", " B: a2a4"}, 1, 0},
		{"P: the prompt holds M: to B:", start + " M: e2e4 E: 0.3 B:", []string{" e2", "e4"}, 1, 2},
		{"A: the data's answer", env, []string{after, "+", "0", ".", "001", "+", "0", "+", "0"}, -1, 0},
		{"A: the card's final +", env, []string{after, "+", "0", ".", "001", "+", "0", "+", "0", "+", "\n"}, 9, 1},
		{"A: the fourth + inside a token", env, []string{after + "+0.001", "+0+0+A: "}, 1, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAnswerEnd(tc.prompt)
			if a == nil {
				t.Fatal("no rule for the prompt")
			}
			piece, end := -1, 0
			for i, p := range tc.pieces {
				if e := a.Feed(p); e >= 0 && piece < 0 {
					piece, end = i, e
				} else if e >= 0 {
					t.Fatalf("ended again at piece %d", i)
				}
			}
			if piece != tc.piece || end != tc.end {
				t.Errorf("ends at piece %d, %d bytes in; want %d, %d", piece, end, tc.piece, tc.end)
			}
		})
	}
	if NewAnswerEnd("Hello") != nil {
		t.Error("a rule for a prompt of neither task")
	}
}
