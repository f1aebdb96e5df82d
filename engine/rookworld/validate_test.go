package rookworld

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/chess"
)

func TestValidatePosition(t *testing.T) {
	tests := []struct {
		name string
		fen  string
		want string // part of the error; "" for a legal position
	}{
		// Legal, including the edge cases a strict check could get wrong.
		{"start", chess.StartFEN, ""},
		{"EPD without clocks (kiwipete)", "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq -", ""},
		{"real game (DESIGN's P: example)", "r1b1kbnr/pp2pppp/n1p5/q2PP3/3P4/2N5/PP3PPP/R1BQKBNR b KQkq - 2 6", ""},
		{"real endgame", "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 7 40", ""},
		{"ep after a white double push, no capture", "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq e3 0 1", ""},
		{"ep after a black double push, capturable", "rnbqkbnr/ppp1pppp/8/3pP3/8/8/PPPP1PPP/RNBQKBNR w KQkq d6 0 3", ""},
		{"ep after a white double push, capturable", "rnbqkbnr/pppp1ppp/8/8/3Pp3/8/PPP1PPPP/RNBQKBNR b KQkq d3 0 3", ""},
		{"all castling rights, pieces home", "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1", ""},
		{"some castling rights", "r3k3/8/8/8/8/8/8/4K2R b Kq - 0 1", ""},
		{"side to move in check", "4k3/8/8/8/8/8/8/r3K3 w - - 0 1", ""},
		{"promoted queens", "4k3/8/8/8/8/8/8/QQQ1K3 b - - 0 1", ""},

		{"syntax", "not a fen", "want 4 to 6"},
		{"no white king", "4k3/8/8/8/8/8/8/8 w - - 0 1", "white has 0 kings"},
		{"no black king", "8/8/8/8/8/8/8/4K3 b - - 0 1", "black has 0 kings"},
		{"two white kings", "4k3/8/8/8/8/8/8/3KK3 w - - 0 1", "more than one king"},
		{"two black kings", "3kk3/8/8/8/8/8/8/4K3 b - - 0 1", "more than one king"},
		{"white in check, black to move", "4k3/8/8/8/8/8/8/r3K3 b - - 0 1", "not to move is in check"},
		{"black in check, white to move", "R3k3/8/8/8/8/8/8/4K3 w - - 0 1", "not to move is in check"},
		{"white pawn on rank 8", "P3k3/8/8/8/8/8/8/4K3 w - - 0 1", "pawn on rank 8"},
		{"white pawn on rank 1", "4k3/8/8/8/8/8/8/P3K3 w - - 0 1", "pawn on rank 1"},
		{"black pawn on rank 1", "4k3/8/8/8/8/8/8/p3K3 b - - 0 1", "pawn on rank 1"},
		{"black pawn on rank 8", "p3k3/8/8/8/8/8/8/4K3 b - - 0 1", "pawn on rank 8"},
		{"nine white pawns", "4k3/8/8/8/P7/8/PPPPPPPP/4K3 w - - 0 1", "white has 9 pawns"},
		{"K without the rook on h1", "r3k2r/8/8/8/8/8/8/R3K3 w KQkq - 0 1", "right K without the rook on h1"},
		{"Q without the rook on a1", "r3k2r/8/8/8/8/8/8/4K2R w Q - 0 1", "right Q without the rook on a1"},
		{"K without the king on e1", "r3k2r/8/8/8/8/8/8/R2K3R w K - 0 1", "right K without the king on e1"},
		{"K with a black rook on h1", "r3k2r/8/8/8/8/8/8/R3K2r w K - 0 1", "right K without the rook on h1"},
		{"k without the rook on h8", "r3k3/8/8/8/8/8/8/R3K2R w k - 0 1", "right k without the rook on h8"},
		{"q without the rook on a8", "4k2r/8/8/8/8/8/8/R3K2R b q - 0 1", "right q without the rook on a8"},
		{"k without the king on e8", "r2k3r/8/8/8/8/8/8/R3K2R b kq - 0 1", "right k without the king on e8"},
		{"KQkq on bare kings", "4k3/8/8/8/8/8/8/4K3 b KQkq - 0 1", "right K without the rook on h1"},
		{"ep on rank 3, white to move", "4k3/8/8/8/4P3/8/8/4K3 w - e3 0 1", "not on rank 6 with white to move"},
		{"ep on rank 6, black to move", "4k3/8/8/4p3/8/8/8/4K3 b - e6 0 1", "not on rank 3 with black to move"},
		{"ep without a black pawn in front", "4k3/8/8/8/8/8/8/4K3 w - e6 0 1", "without a pawn on e5"},
		{"ep without a white pawn in front", "4k3/8/8/8/8/8/8/4K3 b - e3 0 1", "without a pawn on e4"},
		{"ep with a white pawn in front, white to move", "4k3/8/8/4P3/8/8/8/4K3 w - e6 0 1", "without a pawn on e5"},
		{"ep square occupied, white to move", "4k3/8/4n3/4p3/8/8/8/4K3 w - e6 0 1", "e6 or e7"},
		{"ep origin occupied, white to move", "4k3/4n3/8/4p3/8/8/8/4K3 w - e6 0 1", "e6 or e7"},
		{"ep square occupied, black to move", "4k3/8/8/8/4P3/4N3/8/4K3 b - e3 0 1", "e3 or e2"},
		{"ep origin occupied, black to move", "4k3/8/8/8/4P3/8/4N3/4K3 b - e3 0 1", "e3 or e2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidatePosition(tc.fen)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v, want it to say %q", err, tc.want)
			}
			// EnvStep judges exactly the positions ValidatePosition accepts.
			if _, serr := EnvStep(tc.fen, "a1a2"); (serr == nil) != (err == nil) {
				t.Errorf("EnvStep err = %v, ValidatePosition err = %v", serr, err)
			}
		})
	}
}

// Every position of every shipped game, and its canonical FEN, is legal: the
// validator refuses nothing real play produces.
func TestValidatePositionRealGames(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "chess", "testdata", "games.pgn"))
	if err != nil {
		t.Fatal(err)
	}
	games, err := chess.ParsePGN(string(b))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range games {
		for k := 0; k <= len(g.Moves); k++ {
			if err := ValidatePosition(g.Game().PositionAt(k).FEN()); err != nil {
				t.Errorf("game at line %d, ply %d: %v", g.Line, k, err)
			}
			n++
		}
	}
	if n < 50 {
		t.Errorf("only %d positions checked", n)
	}
}

// The class of failure behind a training run that crashed at step 3: a
// kingless FEN in a source with skip_invalid passed the loader and only the
// engine refused it. Each file source now names file:line without
// skip_invalid, and skips and counts the record with it, so every item that
// reaches training is one the engine accepts.
func TestIllegalPositionsAtLoad(t *testing.T) {
	const kingless = "5R2/6R1/8/3P4/p7/1b2R2P/2p3P1/6K1 b - - 0 58"
	legalRow := PolicyText(chess.StartFEN, []string{"e2e4"}, []float64{0.3}, "e2e4")
	// DESIGN's A: example: a public row whose board has no black king.
	kinglessRow := "A: " + kingless + "+b3d5+b3d5+5R2/6R1/8/3b4/p7/4R2P/2p3P1/6K1 w - - 0 59+0.001+0+0"
	pgn := "[Event \"a\"]\n\n1. e4 e5 *\n\n[Event \"b\"]\n[FEN \"" + kingless + "\"]\n\n1... Bxd5 *\n\n[Event \"c\"]\n\n1. d4 *\n"

	type skipper interface {
		Source
		Skipped() int64
	}
	tests := []struct {
		name, file, content string
		want                string // the error without skip_invalid: file:line and the cause
	}{
		{"fen", "pos.fen", chess.StartFEN + "\n" + kingless + "\n" + chess.StartFEN + "\n", ":2: fen"},
		{"epd castling", "pos.epd", chess.StartFEN + "\n4k3/8/8/8/8/8/8/4K3 b KQkq - hmvc 3;\n" + chess.StartFEN + "\n", ":2: fen"},
		{"text", "rows.txt", legalRow + "\n" + kinglessRow + "\n" + legalRow + "\n", ":2: fen"},
		{"pgn", "games.pgn", pgn, ":5: FEN tag: fen"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.file, tc.content)
			open := func(skip bool) skipper {
				s, err := Open(SourceSpec{Path: path, SkipInvalid: skip})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s.(skipper)
			}
			strict := open(false)
			var err error
			for err == nil {
				_, err = strict.Next(context.Background())
			}
			if err == io.EOF || !strings.Contains(err.Error(), path+tc.want) || !strings.Contains(err.Error(), "illegal position") {
				t.Errorf("err = %v, want it to name %s%s and the illegal position", err, path, tc.want)
			}
			lenient := open(true)
			items := drain(t, lenient, -1)
			if len(items) != 2 || lenient.Skipped() != 1 {
				t.Errorf("skip_invalid: %d items, %d skipped; want 2 and 1", len(items), lenient.Skipped())
			}
			for _, it := range items {
				p, err := chess.ParseFEN(it.FEN)
				if err == nil {
					err = p.Valid() // what the engine pool demands
				}
				if err != nil {
					t.Errorf("%s: %v", it.Origin, err)
				}
			}
		})
	}
}

// The generator plays legal moves from a legal start, so it never yields a
// position the validator refuses: neither an item nor the position after
// its final move.
func TestGeneratorPositionsAreLegal(t *testing.T) {
	ended := 0
	for _, style := range []string{StyleOpening, StyleRandom} {
		for seed := uint64(0); seed < 40; seed++ {
			g, err := NewGenerator(GeneratorOptions{Seed: seed, Style: style, MaxPly: 250})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range drain(t, g, 3) {
				if err := ValidatePosition(it.FEN); err != nil {
					t.Errorf("%s seed %d %s: %v", style, seed, it.Origin, err)
				}
				if it.Next == "" {
					continue
				}
				ended++
				r, err := EnvStep(it.FEN, it.Next)
				if err != nil || !r.Legal {
					t.Fatalf("%s seed %d %s: final move %s: %+v, %v", style, seed, it.Origin, it.Next, r, err)
				}
				if err := ValidatePosition(r.NewFEN); err != nil {
					t.Errorf("%s seed %d %s after %s: %v", style, seed, it.Origin, it.Next, err)
				}
			}
		}
	}
	if ended < 10 {
		t.Errorf("only %d games ended before their length; the final positions went unchecked", ended)
	}
	var ie *chess.InvalidError
	if _, err := NewGenerator(GeneratorOptions{StartFEN: "8/8/8/8/8/8/8/4K3 w - - 0 1"}); !errors.As(err, &ie) ||
		*ie != (chess.InvalidError{Side: "black", Piece: "kings", Count: 0}) {
		t.Errorf("kingless start_fen: %v, want it refused", err)
	}
}
