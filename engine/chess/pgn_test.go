package chess

import (
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

	for _, tc := range []struct{ pgn, want string }{
		{"1. e4 e5 2. Ke3 *", "pgn:1: game at line 1: move 3 \"Ke3\""},
		{"[Event \"x\"]\n\n1. e4 {never closed\n", "comment opened at line 3 is never closed"},
		{"1. e4 (1. d4 *", "unclosed variation"},
		{"1. e4 ) *", "')' without '('"},
		{"[Event x]\n1. e4 *", "pgn:1: tag Event: value must be quoted"},
		{"[FEN \"8/8 w\"]\n1. e4 *", "FEN tag"},
		{"1. e4 @ *", "unexpected character '@'"},
	} {
		_, err := ParsePGN(tc.pgn)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParsePGN(%q) err = %v, want %q", tc.pgn, err, tc.want)
		}
	}
}
