package chess

import (
	"errors"
	"testing"
)

// play applies UCI moves from fen and returns the final position.
func play(t *testing.T, fen string, moves ...string) *Position {
	t.Helper()
	p, err := ParseFEN(fen)
	if err != nil {
		t.Fatalf("ParseFEN(%q): %v", fen, err)
	}
	for _, m := range moves {
		if p, err = p.Play(m); err != nil {
			t.Fatalf("Play(%s): %v", m, err)
		}
	}
	return p
}

func TestMovesAndFEN(t *testing.T) {
	tests := []struct {
		name  string
		fen   string
		moves []string
		want  string
		check bool
	}{
		{"start", StartFEN, nil, StartFEN, false},
		{"double push without capturer writes no ep", StartFEN, []string{"e2e4"},
			"rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1", false},
		{"ep written when the capture is legal", StartFEN, []string{"e2e4", "d7d5", "e4e5", "f7f5"},
			"rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6 0 3", false},
		{"ep pseudo-legal only (capturer pinned on the rank)", "8/2p5/8/KP5r/8/8/8/7k b - - 0 1", []string{"c7c5"},
			"8/8/8/KPp4r/8/8/8/7k w - - 0 2", false},
		{"ep capture played", "8/2p5/8/1P6/8/8/8/K6k b - - 0 1", []string{"c7c5", "b5c6"},
			"8/8/2P5/8/8/8/8/K6k b - - 0 2", false},
		{"white castles king side", "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1", []string{"e1g1"},
			"r3k2r/8/8/8/8/8/8/R4RK1 b kq - 1 1", false},
		{"white castles queen side", "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1", []string{"e1c1"},
			"r3k2r/8/8/8/8/8/8/2KR3R b kq - 1 1", false},
		{"black castles king side", "r3k2r/8/8/8/8/8/8/R3K2R b KQkq - 3 9", []string{"e8g8"},
			"r4rk1/8/8/8/8/8/8/R3K2R w KQ - 4 10", false},
		{"black castles queen side", "r3k2r/8/8/8/8/8/8/R3K2R b KQkq - 3 9", []string{"e8c8"},
			"2kr3r/8/8/8/8/8/8/R3K2R w KQ - 4 10", false},
		{"capturing a rook removes its right", "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1", []string{"a1a8"},
			"R3k2r/8/8/8/8/8/8/4K2R b Kk - 0 1", true},
		{"a rook move removes its right", "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1", []string{"h1h2"},
			"r3k2r/8/8/8/8/8/7R/R3K3 b Qkq - 1 1", false},
		{"promotion to queen gives check", "8/P7/8/8/8/8/8/K6k w - - 5 40", []string{"a7a8q"},
			"Q7/8/8/8/8/8/8/K6k b - - 0 40", true},
		{"under-promotion to knight", "8/P7/8/8/8/8/8/K6k w - - 0 1", []string{"a7a8n"},
			"N7/8/8/8/8/8/8/K6k b - - 0 1", false},
		{"capture-promotion to rook", "1r6/P7/8/8/8/8/8/K6k w - - 0 1", []string{"a7b8r"},
			"1R6/8/8/8/8/8/8/K6k b - - 0 1", false},
		{"black promotes to bishop", "k7/8/8/8/8/8/6p1/K7 b - - 0 1", []string{"g2g1b"},
			"k7/8/8/8/8/8/8/K5b1 w - - 0 2", false},
		{"check", "4k3/8/8/8/8/8/8/4K2R w K - 0 1", []string{"h1h8"},
			"4k2R/8/8/8/8/8/8/4K3 b - - 1 1", true},
		{"castling rights cleaned on parse", "4k3/8/8/8/8/8/8/4K3 w KQkq - 0 1", nil,
			"4k3/8/8/8/8/8/8/4K3 w - - 0 1", false},
		{"implausible ep dropped on parse", "4k3/8/8/8/8/8/8/4K3 w - e6 0 1", nil,
			"4k3/8/8/8/8/8/8/4K3 w - - 0 1", false},
		{"EPD clocks default", "4k3/8/8/8/8/8/8/4K3 b - -", nil, "4k3/8/8/8/8/8/8/4K3 b - - 0 1", false},
		{"kingless side (public ArbiterSim data)", "5R2/6R1/8/3P4/p7/1b2R2P/2p3P1/6K1 b - - 0 58", []string{"b3d5"},
			"5R2/6R1/8/3b4/p7/4R2P/2p3P1/6K1 w - - 0 59", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := play(t, tc.fen, tc.moves...)
			if got := p.FEN(); got != tc.want {
				t.Errorf("FEN = %q, want %q", got, tc.want)
			}
			if p.InCheck() != tc.check {
				t.Errorf("InCheck = %v, want %v", p.InCheck(), tc.check)
			}
		})
	}
}

func TestLegality(t *testing.T) {
	tests := []struct {
		name      string
		fen, move string
		legal     bool
		malformed bool
	}{
		{"normal", StartFEN, "g1f3", true, false},
		{"pawn cannot jump three", StartFEN, "e2e5", false, false},
		{"piece blocked", StartFEN, "f1c4", false, false},
		{"moving the opponent's piece", StartFEN, "e7e5", false, false},
		{"castling through an attacked square", "4k3/8/8/8/8/8/5r2/R3K2R w KQ - 0 1", "e1g1", false, false},
		{"castling the other way is fine", "4k3/8/8/8/8/8/5r2/R3K2R w KQ - 0 1", "e1c1", true, false},
		{"castling out of check", "4k3/8/8/8/8/8/4r3/R3K2R w KQ - 0 1", "e1g1", false, false},
		{"castling without the right", "r3k2r/8/8/8/8/8/8/R3K2R w Qkq - 0 1", "e1g1", false, false},
		{"promotion needs a piece", "8/P7/8/8/8/8/8/K6k w - - 0 1", "a7a8", false, false},
		{"king promotion is malformed", "8/P7/8/8/8/8/8/K6k w - - 0 1", "a7a8k", false, true},
		{"uppercase promotion is malformed", "8/P7/8/8/8/8/8/K6k w - - 0 1", "a7a8Q", false, true},
		{"promotion suffix on a non-promotion", StartFEN, "e2e4q", false, false},
		{"pinned piece", "4k3/4r3/8/8/8/8/4N3/4K3 w - - 0 1", "e2c3", false, false},
		{"ep capture", "8/8/8/1Pp5/8/8/8/K6k w - c6 0 2", "b5c6", true, false},
		{"pinned ep capture", "8/8/8/KPp4r/8/8/8/7k w - c6 0 2", "b5c6", false, false},
		{"garbage", StartFEN, "hello", false, true},
		{"empty", StartFEN, "", false, true},
		{"off board", StartFEN, "e2e9", false, true},
		{"same square", StartFEN, "e2e2", false, true},
		{"null move", StartFEN, "0000", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := MustParseFEN(tc.fen)
			if got := p.IsLegal(tc.move); got != tc.legal {
				t.Errorf("IsLegal(%q) = %v, want %v", tc.move, got, tc.legal)
			}
			_, err := p.Play(tc.move)
			switch {
			case tc.legal && err != nil:
				t.Errorf("Play: %v", err)
			case !tc.legal && tc.malformed && !errors.Is(err, ErrMalformedMove):
				t.Errorf("Play error = %v, want ErrMalformedMove", err)
			case !tc.legal && !tc.malformed && !errors.Is(err, ErrIllegalMove):
				t.Errorf("Play error = %v, want ErrIllegalMove", err)
			}
			if IsMoveError(err) == tc.legal {
				t.Errorf("IsMoveError(%v) = %v", err, !tc.legal)
			}
			if p.FEN() != MustParseFEN(tc.fen).FEN() {
				t.Error("Play changed the position")
			}
		})
	}
}

func TestParseFENErrors(t *testing.T) {
	tests := []struct{ fen, field string }{
		{"", ""}, // the field count
		{"8/8/8/8/8/8/8/8 w", ""},
		{StartFEN + " extra", ""},
		{"rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP w KQkq - 0 1", "board"},
		{"rnbqkbnr/pppppppp/9/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", "board"},
		{"rnbqkbnr/pppppppp/44/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", "board"},
		{"rnbqkbnr/pppppppp/7/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", "board"},
		{"rnbqkbnr/ppppxppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", "board"},
		{"rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKKNR w KQkq - 0 1", "board"},
		{"Pnbqkbnr/pppppppp/8/8/8/8/1PPPPPPP/RNBQKBNR w KQkq - 0 1", "board"},
		{"rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR x KQkq - 0 1", "side-to-move"},
		{"rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KKkq - 0 1", "castling"},
		{"rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQxq - 0 1", "castling"},
		{"rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq z9 0 1", "en-passant"},
		{"rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - -1 1", "halfmove"},
		{"rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 x", "fullmove"},
	}
	for _, tc := range tests {
		_, err := ParseFEN(tc.fen)
		var fe *FENError
		if !errors.As(err, &fe) || fe.FEN != tc.fen || fe.Field != tc.field {
			t.Errorf("ParseFEN(%q) = %v, want a *FENError naming field %q", tc.fen, err, tc.field)
		}
	}
}

func TestOutcome(t *testing.T) {
	tests := []struct {
		name   string
		fen    string
		term   Termination
		winner string
	}{
		{"in progress", StartFEN, NotOver, ""},
		{"checkmate, black wins", "rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3", Checkmate, Black},
		{"checkmate, white wins", "R5k1/5ppp/8/8/8/8/8/6K1 b - - 1 1", Checkmate, White},
		{"stalemate", "7k/5Q2/6K1/8/8/8/8/8 b - - 1 1", Stalemate, ""},
		{"K v K", "8/8/8/8/8/2k5/8/1K6 b - - 0 1", InsufficientMaterial, ""},
		{"K+B v K", "8/8/8/8/8/2k5/8/1KB5 b - - 0 1", InsufficientMaterial, ""},
		{"K+N v K", "8/8/8/8/8/2k5/8/1KN5 b - - 0 1", InsufficientMaterial, ""},
		{"K+B v K+B same colour", "8/8/8/8/8/2k1b3/8/1KB5 b - - 0 1", InsufficientMaterial, ""},
		{"K+B v K+B opposite colours", "8/8/8/8/8/2kb4/8/1KB5 b - - 0 1", NotOver, ""},
		{"K+N v K+N", "8/8/8/8/8/2kn4/8/1KN5 b - - 0 1", NotOver, ""},
		{"K+2N v K", "8/8/8/8/8/2k5/8/1KNN4 b - - 0 1", NotOver, ""},
		{"K+N v K+Q", "8/8/8/8/8/2kq4/8/1KN5 b - - 0 1", NotOver, ""},
		{"K+B v K+P", "8/8/8/8/8/2kp4/8/1KB5 b - - 0 1", NotOver, ""},
		{"K+R v K", "8/8/8/8/8/2k5/8/1KR5 b - - 0 1", NotOver, ""},
		{"75-move rule", "4k3/8/8/8/8/8/R7/4K3 b - - 150 80", SeventyFiveMoves, ""},
		{"149 plies is not yet", "4k3/8/8/8/8/8/R7/4K3 b - - 149 80", NotOver, ""},
		{"mate beats the 75-move rule", "R5k1/5ppp/8/8/8/8/8/6K1 b - - 150 80", Checkmate, White},
		{"kingless side is never mated", "5R2/6R1/8/3b4/p7/4R2P/2p3P1/6K1 w - - 0 59", NotOver, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := MustParseFEN(tc.fen).Outcome()
			if o.Termination != tc.term || o.Winner != tc.winner {
				t.Errorf("Outcome = %+v, want %q winner %q", o, tc.term, tc.winner)
			}
		})
	}
}

func TestValid(t *testing.T) {
	tests := []struct {
		fen  string
		want *InvalidError // nil: valid
	}{
		{StartFEN, nil},
		{"5R2/6R1/8/3P4/p7/1b2R2P/2p3P1/6K1 b - - 0 58", &InvalidError{Side: "black", Piece: "kings", Count: 0}},
		{"4k3/8/8/8/8/8/8/r3K3 b - - 0 1", &InvalidError{Side: "white"}}, // not to move, in check
		{"4k3/8/PPPPPPPP/PPPPPPPP/8/8/8/4K3 w - - 0 1", &InvalidError{Side: "white", Piece: "pieces", Count: 17}},
		{"4k3/8/8/PPPPPPPP/P7/8/8/4K3 w - - 0 1", &InvalidError{Side: "white", Piece: "pawns", Count: 9}},
	}
	for _, tc := range tests {
		err := MustParseFEN(tc.fen).Valid()
		var ie *InvalidError
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("Valid(%s) = %v, want nil", tc.fen, err)
		case tc.want != nil && (!errors.As(err, &ie) || *ie != *tc.want):
			t.Errorf("Valid(%s) = %v, want %+v", tc.fen, err, *tc.want)
		}
	}
}

func TestParseSAN(t *testing.T) {
	tests := []struct {
		name, fen, san, want string
	}{
		{"pawn push", StartFEN, "e4", "e2e4"},
		{"knight", StartFEN, "Nf3", "g1f3"},
		{"check suffix", "4k3/8/8/8/8/8/8/4K2R w K - 0 1", "Rh8+", "h1h8"},
		{"castle O-O", "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1", "O-O", "e1g1"},
		{"castle 0-0-0 black", "r3k2r/8/8/8/8/8/8/R3K2R b KQkq - 0 1", "0-0-0", "e8c8"},
		{"pawn capture", "rnbqkbnr/ppp1pppp/8/3p4/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2", "exd5", "e4d5"},
		{"en passant", "8/8/8/1Pp5/8/8/8/K6k w - c6 0 2", "bxc6", "b5c6"},
		{"promotion with =", "8/P7/8/8/8/8/8/K6k w - - 0 1", "a8=Q", "a7a8q"},
		{"promotion without =", "8/P7/8/8/8/8/8/K6k w - - 0 1", "a8N", "a7a8n"},
		{"file disambiguation", "4k3/8/8/8/8/8/K7/R6R w - - 0 1", "Rhd1", "h1d1"},
		{"rank disambiguation", "4k3/8/R7/8/8/8/8/R3K3 w - - 0 1", "R6a3", "a6a3"},
		{"long algebraic", StartFEN, "Ng1-f3", "g1f3"},
		{"uci", StartFEN, "e2e4", "e2e4"},
		{"annotation", StartFEN, "e4!?", "e2e4"},
		{"ambiguous", "4k3/8/8/8/8/8/K7/R6R w - - 0 1", "Rd1", "error"},
		{"illegal", StartFEN, "e5", "error"},
		{"nonsense", StartFEN, "Zz9", "error"},
		{"empty", StartFEN, "+", "error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MustParseFEN(tc.fen).ParseSAN(tc.san)
			if tc.want == "error" {
				if err == nil {
					t.Errorf("ParseSAN(%q) = %q, want an error", tc.san, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ParseSAN(%q) = %q, %v; want %q", tc.san, got, err, tc.want)
			}
		})
	}
}
