package rookworld

import (
	"context"
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

// The scorer judges a fivefold repetition by the game's history, given on the input or kept
// by Histories from the source's item: the right answer (a draw, terminated) scores 1 and the
// answer the bare FEN would give (the game goes on) less. Without a history the scorer judges
// the bare FEN, as it does for sources that have none (FEN/EPD files, training text).
func TestFivefoldRepetitionIsJudgedWithTheGame(t *testing.T) {
	items, prompts := envRows(t, "testdata/repetition.pgn")
	plain, err := NewScorer(nil, DefaultRewardConfig())
	if err != nil {
		t.Fatal(err)
	}
	book := NewHistories()
	withBook, _ := NewScorer(nil, DefaultRewardConfig())
	withBook.Histories = book
	score := func(s *Scorer, in Input) float64 {
		t.Helper()
		r, err := s.Score(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		return r.Total
	}
	var found []string
	for i, it := range items {
		p := prompts[i]
		book.Add(it, p)
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
		full := Input{Prompt: p.Prompt, StartFEN: it.StartFEN, History: it.History}
		for name, s := range map[string]*Scorer{"input": plain, "histories": withBook} {
			in := full
			if name == "histories" {
				in = Input{Prompt: p.Prompt}
			}
			in.Completion = right.Completion()
			if got := score(s, in); got != 1 {
				t.Errorf("%s (history from the %s): the right answer %q scores %v, want 1", it.Origin, name, in.Completion, got)
			}
			in.Completion = bare.Completion()
			if got := score(s, in); got >= 1 {
				t.Errorf("%s (history from the %s): the bare FEN's answer %q scores %v, want < 1", it.Origin, name, in.Completion, got)
			}
		}
		// Without the game: the bare FEN's answer, 0.775 for the right one (flags half right,
		// reward field wrong). This is what sources without history still get.
		if got := score(plain, Input{Prompt: p.Prompt, Completion: right.Completion()}); math.Abs(got-0.775) > 1e-12 {
			t.Errorf("%s: without the game the right answer scores %v, want 0.775", it.Origin, got)
		}
	}
	if !slices.Equal(found, fivefoldRows) {
		t.Errorf("rows whose answer needs the game:\n%s\nwant\n%s", strings.Join(found, "\n"), strings.Join(fivefoldRows, "\n"))
	}
	if book.Len() != len(fivefoldRows) {
		t.Errorf("Histories kept %d prompts, want only the %d that need their game", book.Len(), len(fivefoldRows))
	}
}

// Histories keeps a prompt only while its latest game needs it: the same text drawn from a game
// where the bare FEN is right forgets it.
func TestHistoriesForgetAPromptTheBareFENJudges(t *testing.T) {
	items, prompts := envRows(t, "testdata/repetition.pgn")
	book := NewHistories()
	k := slices.IndexFunc(items, func(it Item) bool { return it.Origin == fivefoldRows[0] })
	book.Add(items[k], prompts[k])
	if _, h, ok := book.Lookup(prompts[k].Prompt); !ok || !slices.Equal(h, items[k].History) {
		t.Fatalf("Lookup = %v, %v after Add", h, ok)
	}
	short := items[k]
	short.History = short.History[len(short.History)-10:] // the same prompt from a game that began 10 plies earlier
	short.StartFEN = replayFEN(t, items[k].StartFEN, items[k].History[:len(items[k].History)-10])
	book.Add(short, prompts[k])
	if _, _, ok := book.Lookup(prompts[k].Prompt); ok || book.Len() != 0 {
		t.Errorf("the prompt is still kept after a game that does not need it")
	}
	book.Add(items[k], Prompt{Prompt: "P: " + items[k].FEN, Task: "P", FEN: items[k].FEN})
	book.Add(Item{FEN: items[k].FEN}, prompts[k]) // no full history
	if book.Len() != 0 {
		t.Errorf("P: prompts and items without a full history are kept")
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
	if _, err := EnvStepAfter(chess.StartFEN, []string{"d2d4"}, after, "e7e5"); err == nil || !strings.Contains(err.Error(), "leads to") {
		t.Errorf("a history that does not reach the FEN: err = %v", err)
	}
	if _, err := EnvStepAfter(chess.StartFEN, []string{"e2e5"}, after, "e7e5"); err == nil || !strings.Contains(err.Error(), "ply 1") {
		t.Errorf("an illegal history: err = %v", err)
	}
	if _, err := EnvStepAfter("4k3/8/8/8/8/8/8/8 w - - 0 1", nil, after, "e7e5"); err == nil || !strings.Contains(err.Error(), "illegal position") {
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
	book := NewHistories()
	s, _ := NewScorer(nil, DefaultRewardConfig())
	s.Histories = book
	mix := Mix{Task: MixEnv}
	for i := range int64(5) {
		it, err := gen.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		p := mix.Prompt(it, i, "")
		book.Add(it, p)
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
			r, err := s.Score(context.Background(), Input{Prompt: p.Prompt, Completion: c.completion})
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(r.Total-c.want) > 1e-12 {
				t.Errorf("%s: %q scores %v, want %v", it.Origin, c.completion, r.Total, c.want)
			}
		}
	}
}
