package chess

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParsePGNFile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "games.pgn"))
	if err != nil {
		t.Fatal(err)
	}
	games, err := ParsePGN(string(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(games) != 4 {
		t.Fatalf("%d games, want 4", len(games))
	}
	opera := games[0]
	if len(opera.Moves) != 33 || opera.Result != "1-0" || opera.Tags["White"] != "Paul Morphy" || opera.Line != 1 {
		t.Errorf("opera game: %d moves, result %q, tags %v, line %d", len(opera.Moves), opera.Result, opera.Tags, opera.Line)
	}
	if o := opera.Game().Outcome(); o.Termination != Checkmate || o.Winner != White || opera.Moves[32] != "d1d8" {
		t.Errorf("opera game ends %+v with %s", o, opera.Moves[32])
	}
	if opera.Moves[22] != "e1c1" { // 12. O-O-O
		t.Errorf("castling decoded as %s", opera.Moves[22])
	}
	study := games[1]
	if study.StartFEN() != "4k3/8/8/8/8/8/4P3/4K3 w - - 0 1" || study.Tags["Annotator"] != `A "quoted" name` || study.Result != "*" {
		t.Errorf("study: %q %q %q", study.StartFEN(), study.Tags["Annotator"], study.Result)
	}
	vars := games[2]
	if strings.Join(vars.SAN, " ") != "d4 d5 c4 e6 Nc3 Nf6 Bg5 Be7 e3 O-O" || vars.Result != "1/2-1/2" {
		t.Errorf("variations game: %v %q", vars.SAN, vars.Result)
	}
	promo := games[3]
	if got := strings.Join(promo.Moves, " "); !strings.Contains(got, "e5d6") || !strings.Contains(got, "c7b8q") ||
		!strings.HasSuffix(got, "e4f3") || promo.Result != "0-1" {
		t.Errorf("promotion game: %s %q", got, promo.Result)
	}

	var fenErr *FENError
	for _, tc := range []struct {
		pgn        string
		line, game int
		tag        string
		cause      any   // nil, or a pointer to the type errors.As must find
		is         error // nil, or what errors.Is must find
	}{
		{"1. e4 e5 2. Ke3 *", 1, 1, "", nil, ErrIllegalMove},
		{"[Event \"x\"]\n\n1. e4 {never closed\n", 4, 0, "", nil, nil}, // opened at line 3
		{"1. e4 (1. d4 *", 1, 1, "", nil, nil},
		{"1. e4 ) *", 1, 1, "", nil, nil},
		{"[Event x]\n1. e4 *", 1, 0, "Event", nil, nil},
		{"[FEN \"8/8 w\"]\n1. e4 *", 2, 1, "", &fenErr, nil},
		{"1. e4 @ *", 1, 1, "", nil, nil},
	} {
		_, err := ParsePGN(tc.pgn)
		var pe *PGNError
		if !errors.As(err, &pe) || pe.File != "pgn" || pe.Line != tc.line || pe.Game != tc.game || pe.Tag != tc.tag {
			t.Errorf("ParsePGN(%q) err = %v (%+v), want a *PGNError at pgn:%d, game at line %d, tag %q", tc.pgn, err, pe, tc.line, tc.game, tc.tag)
			continue
		}
		if tc.cause != nil && !errors.As(err, tc.cause) {
			t.Errorf("ParsePGN(%q) err = %v, want it to wrap a %T", tc.pgn, err, tc.cause)
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("ParsePGN(%q) err = %v, want it to wrap %v", tc.pgn, err, tc.is)
		}
	}
}
