package rookworld

import (
	"context"
	"errors"
	"io"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/chess"
)

// envRows are the A: prompts positions:next draws from every position of a PGN file that has a
// next move, with the items they came from.
func envRows(t *testing.T, path string) ([]Item, []Prompt) {
	t.Helper()
	src, err := OpenPGNFile(path, PGNOptions{PerGame: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	mix := Mix{Task: MixEnv}
	var items []Item
	var prompts []Prompt
	for i := int64(0); ; i++ {
		it, err := src.Next(context.Background())
		if err == io.EOF {
			return items, prompts
		}
		if err != nil {
			t.Fatal(err)
		}
		if it.Next == "" {
			continue
		}
		items, prompts = append(items, it), append(prompts, mix.Prompt(it, i, ""))
	}
}

// The rows of testdata/repetition.pgn whose move repeats a position for the fifth time (one
// after a castling right was lost, so the start does not count; one from a position that
// itself occurred once, the rook having stepped away and back). An A: prompt's ten recent
// moves cannot show that, so only the game's history judges them right (DESIGN §3: terminated
// is python-chess's is_game_over, which includes fivefold repetition).
var fivefoldRows = []string{
	"testdata/repetition.pgn:4 ply 17",
	"testdata/repetition.pgn:10 ply 16",
	"testdata/repetition.pgn:18 ply 16",
	"testdata/repetition.pgn:18 ply 17",
	"testdata/repetition.pgn:18 ply 18",
	"testdata/repetition.pgn:18 ply 19",
	"testdata/repetition.pgn:18 ply 22",
	"testdata/repetition.pgn:18 ply 23",
}

// The scorer judges a fivefold repetition by the game's history the input carries, which
// HistoryFor gives for exactly the prompts whose answer needs it: the right answer (a draw,
// terminated) scores 1 and the answer the bare FEN would give (the game goes on) less. Without
// a history the scorer judges the bare FEN, as it does for sources that have none (FEN/EPD
// files, training text).
func TestFivefoldRepetitionIsJudgedWithTheGame(t *testing.T) {
	items, prompts := envRows(t, "testdata/repetition.pgn")
	s, err := NewScorer(nil, DefaultRewardConfig())
	if err != nil {
		t.Fatal(err)
	}
	score := func(in Input) float64 {
		t.Helper()
		r, err := s.Score(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		return r.Total
	}
	var found, kept []string
	for i, it := range items {
		p := prompts[i]
		start, history, ok := HistoryFor(it, p)
		if ok {
			kept = append(kept, it.Origin)
			if start != it.StartFEN || !slices.Equal(history, it.History) {
				t.Errorf("%s: HistoryFor = %s %v, want the item's game", it.Origin, start, history)
			}
		}
		right, err := EnvStepAfter(it.StartFEN, it.History, it.FEN, p.Move)
		if err != nil {
			t.Fatal(err)
		}
		bare, err := EnvStep(it.FEN, p.Move)
		if err != nil {
			t.Fatal(err)
		}
		if right == bare {
			continue
		}
		found = append(found, it.Origin)
		if right.Termination != chess.FivefoldRepetition || right.Reward != RewardDraw || bare.Terminated {
			t.Errorf("%s: with the game %+v, bare %+v", it.Origin, right, bare)
		}
		for _, tc := range []struct {
			name       string
			in         Input
			completion string
			want       float64 // -1: below 1
		}{
			{"the item's game, the right answer", Input{StartFEN: it.StartFEN, History: it.History}, right.Completion(), 1},
			{"the item's game, the bare FEN's answer", Input{StartFEN: it.StartFEN, History: it.History}, bare.Completion(), -1},
			{"HistoryFor's game, the right answer", Input{StartFEN: start, History: history}, right.Completion(), 1},
			{"HistoryFor's game, the bare FEN's answer", Input{StartFEN: start, History: history}, bare.Completion(), -1},
			// Without the game: the bare FEN's answer, 0.775 for the right one (flags half
			// right, reward field wrong). This is what sources without history still get.
			{"no game, the right answer", Input{}, right.Completion(), 0.775},
		} {
			in := tc.in
			in.Prompt, in.Completion = p.Prompt, tc.completion
			got := score(in)
			if (tc.want == -1 && got >= 1) || (tc.want != -1 && math.Abs(got-tc.want) > 1e-12) {
				t.Errorf("%s: %s %q scores %v, want %v", it.Origin, tc.name, tc.completion, got, map[bool]any{true: "< 1", false: tc.want}[tc.want == -1])
			}
		}
	}
	if !slices.Equal(found, fivefoldRows) {
		t.Errorf("rows whose answer needs the game:\n%s\nwant\n%s", strings.Join(found, "\n"), strings.Join(fivefoldRows, "\n"))
	}
	if !slices.Equal(kept, fivefoldRows) {
		t.Errorf("HistoryFor gave the game of\n%s\nwant only the rows that need it\n%s", strings.Join(kept, "\n"), strings.Join(fivefoldRows, "\n"))
	}
}

// HistoryFor gives a prompt's game only where that game changes the answer: the same prompt
// text drawn from a game that began ten plies earlier (too short for a fifth occurrence), a P:
// prompt and an item without a full history get none. Each prompt is judged by its own item:
// nothing is remembered between calls.
func TestHistoryForOnlyWhereTheGameDecides(t *testing.T) {
	items, prompts := envRows(t, "testdata/repetition.pgn")
	k := slices.IndexFunc(items, func(it Item) bool { return it.Origin == fivefoldRows[0] })
	short := items[k]
	short.History = short.History[len(short.History)-10:] // the same prompt from a game that began 10 plies earlier
	short.StartFEN = replayFEN(t, items[k].StartFEN, items[k].History[:len(items[k].History)-10])
	if again := (Mix{Task: MixEnv}).Prompt(short, 0, ""); again.Prompt != prompts[k].Prompt {
		t.Fatalf("the short game's prompt %q is not the long one's %q", again.Prompt, prompts[k].Prompt)
	}
	for _, tc := range []struct {
		name string
		it   Item
		p    Prompt
		want bool
	}{
		{"the fivefold game", items[k], prompts[k], true},
		{"the same prompt from a short game", short, prompts[k], false},
		{"a P: prompt", items[k], Prompt{Prompt: "P: " + items[k].FEN, Task: "P", FEN: items[k].FEN}, false},
		{"no full history", Item{FEN: items[k].FEN, History: items[k].History}, prompts[k], false},
		{"a history that does not replay", Item{FEN: items[k].FEN, StartFEN: chess.StartFEN, History: []string{"e2e5"}}, prompts[k], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start, h, ok := HistoryFor(tc.it, tc.p)
			if ok != tc.want || (ok && (start != tc.it.StartFEN || !slices.Equal(h, tc.it.History))) || (!ok && (start != "" || h != nil)) {
				t.Errorf("HistoryFor = %q, %v, %v; want ok %v", start, h, ok, tc.want)
			}
		})
	}
}

// replayFEN is the FEN after moves from start.
func replayFEN(t *testing.T, start string, moves []string) string {
	t.Helper()
	g, err := chess.ReplayGame(start, moves)
	if err != nil {
		t.Fatal(err)
	}
	return g.Position().FEN()
}

func TestEnvStepAfterChecksTheHistory(t *testing.T) {
	after := "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
	r, err := EnvStepAfter(chess.StartFEN, []string{"e2e4"}, after, "e7e5")
	if err != nil || !r.Legal || r.Reward != RewardLegal {
		t.Errorf("EnvStepAfter = %+v, %v", r, err)
	}
	var he *HistoryError
	if _, err := EnvStepAfter(chess.StartFEN, []string{"d2d4"}, after, "e7e5"); !errors.As(err, &he) || he.StartFEN != chess.StartFEN || he.Want != after {
		t.Errorf("a history that does not reach the FEN: err = %v, want a *HistoryError from the start to %s", err, after)
	}
	var pe *chess.PlyError
	if _, err := EnvStepAfter(chess.StartFEN, []string{"e2e5"}, after, "e7e5"); !errors.As(err, &pe) || pe.Ply != 1 {
		t.Errorf("an illegal history: err = %v", err)
	}
	var ie *chess.InvalidError
	if _, err := EnvStepAfter("4k3/8/8/8/8/8/8/8 w - - 0 1", nil, after, "e7e5"); !errors.As(err, &ie) || ie.Side != "white" || ie.Piece != "kings" {
		t.Errorf("an illegal start: err = %v", err)
	}
}

// Play is Step for legal moves and an error, with the game unchanged, for the rest.
func TestPlay(t *testing.T) {
	g, err := NewGame(chess.StartFEN)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Play(g, "e2e4")
	if err != nil || r != Step(chess.NewGameFrom(chess.MustParseFEN(chess.StartFEN)), "e2e4") {
		t.Errorf("Play = %+v, %v", r, err)
	}
	if _, err := Play(g, "e2e4"); !chess.IsMoveError(err) || g.Ply() != 1 {
		t.Errorf("an illegal move: err = %v, ply %d", err, g.Ply())
	}
	if _, err := NewGame("8/8/8/8/8/8/8/4K3 w - - 0 1"); err == nil {
		t.Error("NewGame accepts a board without a black king")
	}
}

// The generator knows its games too. From this start only the kings can move, each within
// four squares (every pawn is blocked, neither bishop has a free square), so a random game
// soon repeats a position five times; the generator then yields the position before that
// move with the move as Next, and its A: prompt is judged with the game.
func TestGeneratorGamesJudgeFivefold(t *testing.T) {
	const cage = "4b2k/3p1p2/3P1Pp1/p5Pp/Pp5P/1Pp1p3/2P1P3/K2B4 w - - 0 1"
	gen, err := NewGenerator(GeneratorOptions{Seed: 1, MinPly: 100, MaxPly: 100, Style: StyleRandom, StartFEN: cage})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := NewScorer(nil, DefaultRewardConfig())
	mix := Mix{Task: MixEnv}
	for i := range int64(5) {
		it, err := gen.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		p := mix.Prompt(it, i, "")
		start, history, ok := HistoryFor(it, p)
		if !ok {
			t.Fatalf("%s: HistoryFor gives no game for a fivefold repetition", it.Origin)
		}
		right, err := EnvStepAfter(it.StartFEN, it.History, it.FEN, p.Move)
		if err != nil {
			t.Fatal(err)
		}
		if right.Termination != chess.FivefoldRepetition || p.Move != it.Next {
			t.Fatalf("%s: %+v after %v, want the generator to stop before a fivefold repetition", it.Origin, right, it.History)
		}
		bare, _ := EnvStep(it.FEN, p.Move)
		for _, c := range []struct {
			completion string
			want       float64
		}{{right.Completion(), 1}, {bare.Completion(), 0.775}} {
			r, err := s.Score(context.Background(), Input{Prompt: p.Prompt, Completion: c.completion, StartFEN: start, History: history})
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(r.Total-c.want) > 1e-12 {
				t.Errorf("%s: %q scores %v, want %v", it.Origin, c.completion, r.Total, c.want)
			}
		}
	}
}
