package chess

import (
	"io"
	"strings"
	"testing"
)

// Fuzz targets for every parser. Each asserts no panic plus the round trip
// the format allows. Seeds: f.Add below and testdata/fuzz.

func FuzzParseFEN(f *testing.F) {
	for _, s := range []string{StartFEN, "8/8/8/KPp4r/8/8/8/7k w - c6 0 2", "4k3/8/8/8/8/8/8/4K3 b KQkq e3",
		"5R2/6R1/8/3P4/p7/1b2R2P/2p3P1/6K1 b - - 0 58", "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1", "8/8/8/8 w", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, fen string) {
		p, err := ParseFEN(fen)
		if err != nil {
			return
		}
		// The written FEN is canonical: re-reading it changes nothing.
		q, err := ParseFEN(p.FEN())
		if err != nil {
			t.Fatalf("re-reading %q: %v", p.FEN(), err)
		}
		if q.FEN() != p.FEN() || strings.Join(q.LegalMoves(), " ") != strings.Join(p.LegalMoves(), " ") {
			t.Fatalf("%q -> %q differs", p.FEN(), q.FEN())
		}
		for _, m := range p.LegalMoves() {
			n, err := p.Play(m)
			if err != nil {
				t.Fatalf("legal move %s in %s: %v", m, p.FEN(), err)
			}
			if _, err := ParseFEN(n.FEN()); err != nil {
				t.Fatalf("after %s in %s: %v", m, p.FEN(), err)
			}
		}
		_ = p.Outcome()
	})
}

func FuzzParseSAN(f *testing.F) {
	f.Add(StartFEN, "Nf3")
	f.Add("r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1", "O-O-O")
	f.Add("8/P7/8/8/8/8/8/K6k w - - 0 1", "a8=N+")
	f.Fuzz(func(t *testing.T, fen, san string) {
		p, err := ParseFEN(fen)
		if err != nil {
			return
		}
		uci, err := p.ParseSAN(san)
		if err != nil {
			return
		}
		if !p.IsLegal(uci) {
			t.Fatalf("ParseSAN(%q) = %q, not legal in %s", san, uci, p.FEN())
		}
	})
}

func FuzzPGN(f *testing.F) {
	f.Add("[Event \"x\"]\n\n1. e4 {comment} e5 (1... c5 2. Nf3) 2. Nf3 $1 Nc6?! 1-0\n")
	f.Add("1. e4 e5 *\n[FEN \"4k3/8/8/8/8/8/8/4K3 w - - 0 1\"]\n1. Kd2 1/2-1/2")
	f.Add("% escape\n; comment\n1. d4 ((1. e4)) d5 0-1")
	f.Fuzz(func(t *testing.T, text string) {
		r := NewPGNReader(strings.NewReader(text), "fuzz")
		for i := 0; i < 100; i++ {
			g, err := r.Next()
			if err == io.EOF || err != nil {
				return
			}
			// The moves replay from the start position to the same game.
			if _, err := ReplayGame(g.StartFEN(), g.Moves); err != nil {
				t.Fatalf("game %d does not replay: %v", i, err)
			}
		}
	})
}
