package rookworld

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/chess"
	"github.com/rookscript/rookscript/engine/stockfish"
)

// drain reads up to n items (all when n < 0).
func drain(t *testing.T, s Source, n int) []Item {
	t.Helper()
	var out []Item
	for n < 0 || len(out) < n {
		it, err := s.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, it)
	}
	return out
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// roundTripCursor checks a cursor survives JSON.
func roundTripCursor(t *testing.T, c Cursor) Cursor {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back Cursor
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	return back
}

// checkResume reads k items, saves the cursor, reads the rest; a second
// source restored from the cursor must produce the same rest.
func checkResume(t *testing.T, open func() Source, k, rest int) {
	t.Helper()
	a := open()
	defer a.Close()
	drain(t, a, k)
	cur := roundTripCursor(t, a.Cursor())
	want := drain(t, a, rest)
	b := open()
	defer b.Close()
	if err := b.Restore(cur); err != nil {
		t.Fatal(err)
	}
	got := drain(t, b, rest)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after restore:\n%+v\nwant\n%+v", got, want)
	}
	if a.Cursor().Count != b.Cursor().Count {
		t.Errorf("counts %d vs %d", a.Cursor().Count, b.Cursor().Count)
	}
}

func TestFENSource(t *testing.T) {
	path := filepath.Join("..", "chess", "testdata", "positions.epd")
	s, err := OpenFENFile(path, FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	items := drain(t, s, -1)
	s.Close()
	want := []struct{ fen, origin string }{
		{chess.StartFEN, ":2"},
		{"r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1", ":4"},
		{"8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 7 40", ":5"},
		{"4k3/8/8/8/8/8/8/4K3 b - - 0 1", ":6"},
	}
	if len(items) != len(want) {
		t.Fatalf("%d items, want %d", len(items), len(want))
	}
	for i, w := range want {
		if items[i].FEN != w.fen || items[i].Origin != path+w.origin {
			t.Errorf("item %d: %q from %s, want %q from %s", i, items[i].FEN, items[i].Origin, w.fen, path+w.origin)
		}
	}

	open := func() Source {
		s, err := OpenFENFile(path, FileOptions{Loop: true})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	checkResume(t, open, 3, 6) // crosses the end of the file
	loop := open()
	got := drain(t, loop, 9)
	if got[8].FEN != items[0].FEN || loop.Cursor().Epoch != 2 {
		t.Errorf("looping: item 9 %q epoch %d", got[8].FEN, loop.Cursor().Epoch)
	}

	bad := writeFile(t, "bad.fen", chess.StartFEN+"\n\nnot a fen at all\n"+chess.StartFEN+"\n")
	s, _ = OpenFENFile(bad, FileOptions{})
	drain(t, s, 1)
	if _, err := s.Next(context.Background()); err == nil || !strings.Contains(err.Error(), bad+":3:") {
		t.Errorf("err = %v, want it to name %s:3", err, bad)
	}
	s, _ = OpenFENFile(bad, FileOptions{SkipInvalid: true})
	if n := len(drain(t, s, -1)); n != 2 || s.Skipped() != 1 {
		t.Errorf("skip invalid: %d items, %d skipped", n, s.Skipped())
	}
	empty := writeFile(t, "empty.fen", "# nothing\n")
	s, _ = OpenFENFile(empty, FileOptions{Loop: true})
	if _, err := s.Next(context.Background()); err != io.EOF {
		t.Errorf("an empty looping file must end, got %v", err)
	}
	if _, err := OpenFENFile(filepath.Join(t.TempDir(), "missing.fen"), FileOptions{}); err == nil {
		t.Error("missing file accepted")
	}
}

func TestSampleSources(t *testing.T) {
	policy := PolicyText(chess.StartFEN, []string{"e2e4", "d2d4"}, []float64{0.3, 0.25}, "e2e4")
	r, _ := EnvStep(chess.StartFEN, "e2e4")
	env := EnvText(r, []string{"h2h3"})
	text := writeFile(t, "rows.txt", policy+"\n\n"+env+"\n")
	s, err := OpenSampleFile(text, false, FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	items := drain(t, s, -1)
	if len(items) != 2 || items[0].Sample.Task != TaskPolicy || items[1].Sample.Task != TaskEnv {
		t.Fatalf("items %+v", items)
	}
	if items[1].Next != "e2e4" || !reflect.DeepEqual(items[1].History, []string{"h2h3"}) || items[1].Origin != text+":3" {
		t.Errorf("env item %+v", items[1])
	}
	if items[0].Sample.Text() != policy {
		t.Errorf("policy row %q", items[0].Sample.Text())
	}

	var jl strings.Builder
	for _, row := range []string{policy, env, policy} {
		b, _ := json.Marshal(map[string]any{"text": row, "source": "test"})
		jl.Write(append(b, '\n'))
	}
	jsonl := writeFile(t, "rows.jsonl", jl.String())
	open := func() Source {
		s, err := Open(SourceSpec{Path: jsonl, Loop: true})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got := drain(t, open(), 2); got[1].Sample.Text() != env {
		t.Errorf("jsonl row %q", got[1].Sample.Text())
	}
	checkResume(t, open, 2, 4)

	for _, tc := range []struct{ content, want string }{
		{`{"text": 3}` + "\n", ":1: invalid JSON"},
		{"{\"other\": \"x\"}\n", `:1: no "text" field`},
		{`{"text": "` + policy + `"}` + "\n" + `{"text": "P: nonsense"}` + "\n", ":2: policy sample"},
	} {
		p := writeFile(t, "bad.jsonl", tc.content)
		s, _ := OpenSampleFile(p, true, FileOptions{})
		_, err := s.Next(context.Background())
		if err == nil && strings.Count(tc.content, "\n") == 2 {
			_, err = s.Next(context.Background())
		}
		if err == nil || !strings.Contains(err.Error(), p+tc.want) {
			t.Errorf("err = %v, want %q", err, p+tc.want)
		}
	}
}

func TestPGNSource(t *testing.T) {
	path := filepath.Join("..", "chess", "testdata", "games.pgn")
	open := func(seed uint64) *PGNSource {
		s, err := OpenPGNFile(path, PGNOptions{Seed: seed, PerGame: 3, MinPly: 1, Loop: true})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b, c := drain(t, open(7), 12), drain(t, open(7), 12), drain(t, open(8), 12)
	if !reflect.DeepEqual(a, b) {
		t.Error("same seed, different positions")
	}
	if reflect.DeepEqual(a, c) {
		t.Error("different seeds, same positions")
	}
	for _, it := range a {
		g, err := it.Game()
		if err != nil || g.Position().FEN() != it.FEN || g.Ply() < 1 {
			t.Errorf("%s: history does not lead to the FEN: %v", it.Origin, err)
		}
		if it.Next != "" && !g.Position().IsLegal(it.Next) {
			t.Errorf("%s: next move %s is not legal", it.Origin, it.Next)
		}
	}
	if !strings.HasPrefix(a[0].Origin, path+":1 ply ") || !strings.HasPrefix(a[3].Origin, path+":13 ply ") {
		t.Errorf("origins %q %q", a[0].Origin, a[3].Origin)
	}
	// Resume mid-game (index 1 of 3) and across a loop.
	checkResume(t, func() Source { return open(7) }, 4, 12)
	checkResume(t, func() Source { return open(7) }, 12, 3)

	window, _ := OpenPGNFile(path, PGNOptions{PerGame: 100, MinPly: 2, MaxPly: 3})
	all := drain(t, window, -1)
	if len(all) != 8 {
		t.Errorf("plies 2..3 of 4 games: %d positions, want 8", len(all))
	}

	bad := writeFile(t, "bad.pgn", "[Event \"a\"]\n\n1. e4 e5 *\n\n[Event \"b\"]\n\n1. e4 e4 *\n\n[Event \"c\"]\n\n1. d4 *\n")
	s, _ := OpenPGNFile(bad, PGNOptions{})
	drain(t, s, 1)
	if _, err := s.Next(context.Background()); err == nil || !strings.Contains(err.Error(), bad+":7: game at line 5") {
		t.Errorf("err = %v", err)
	}
	s, _ = OpenPGNFile(bad, PGNOptions{SkipInvalid: true})
	if got := drain(t, s, -1); len(got) != 2 || s.Skipped() != 1 {
		t.Errorf("skip invalid: %d items, %d skipped", len(got), s.Skipped())
	}
	if _, err := OpenPGNFile(path, PGNOptions{MinPly: 5, MaxPly: 2}); err == nil {
		t.Error("max_ply < min_ply accepted")
	}
}

func TestGenerator(t *testing.T) {
	open := func(seed uint64, style string) *Generator {
		g, err := NewGenerator(GeneratorOptions{Seed: seed, Style: style, MinPly: 2, MaxPly: 30})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	a, b := drain(t, open(1, ""), 20), drain(t, open(1, ""), 20)
	if !reflect.DeepEqual(a, b) {
		t.Error("same seed, different games")
	}
	if reflect.DeepEqual(a, drain(t, open(2, ""), 20)) || reflect.DeepEqual(a, drain(t, open(1, StyleRandom), 20)) {
		t.Error("seed or style made no difference")
	}
	for _, it := range a {
		g, err := it.Game()
		if err != nil || g.Position().FEN() != it.FEN || g.Outcome().Over() || g.Position().NumLegalMoves() == 0 {
			t.Errorf("%s: bad item: %v", it.Origin, err)
		}
		if it.Next != "" {
			if Step(g, it.Next); !g.Outcome().Over() {
				t.Errorf("%s: the next move should end the game", it.Origin)
			}
		} else if n := len(it.History); n < 2 || n > 30 {
			t.Errorf("%s: %d plies outside [2, 30]", it.Origin, n)
		}
	}
	checkResume(t, func() Source { return open(3, "") }, 5, 5)

	// Many short random games: some end early and report the final move.
	g := open(4, StyleRandom)
	g.opt.MinPly, g.opt.MaxPly = 200, 400
	ended := 0
	for _, it := range drain(t, g, 10) {
		if it.Next != "" {
			ended++
		}
	}
	if ended == 0 {
		t.Error("no random game of 200+ plies ended")
	}

	for _, bad := range []GeneratorOptions{{MinPly: 5, MaxPly: 2}, {Style: "wild"}, {GuideProb: 0.5},
		{StartFEN: "7k/5Q2/6K1/8/8/8/8/8 b - - 1 1"}, {StartFEN: "junk"}} {
		if _, err := NewGenerator(bad); err == nil {
			t.Errorf("options %+v accepted", bad)
		}
	}
}

func TestGeneratorGuided(t *testing.T) {
	pool := newTestPool(t, stockfish.Config{Depth: 4})
	open := func() Source {
		g, err := NewGenerator(GeneratorOptions{Seed: 5, MaxPly: 6, MinPly: 6, Engine: pool, GuideProb: 1, GuideDepth: 3, GuideTop: 1})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	a, b := drain(t, open(), 2), drain(t, open(), 2)
	if !reflect.DeepEqual(a, b) {
		t.Error("engine-guided generation is not deterministic")
	}
	// With GuideTop 1 every move is the engine's best at depth 3.
	g, _ := chess.NewGame(chess.StartFEN)
	for _, m := range a[0].History {
		an, err := pool.AnalyseWith(context.Background(), stockfish.Request{FEN: g.Position().FEN(), Depth: 3, MultiPV: 1})
		if err != nil || an.Best() != m {
			t.Fatalf("played %s, engine best %s (%v)", m, an.Best(), err)
		}
		g.Push(m)
	}
}

func TestOpenSpec(t *testing.T) {
	for _, spec := range []SourceSpec{{Path: "x.unknown"}, {Kind: "sql", Path: "x"}} {
		if _, err := Open(spec); err == nil {
			t.Errorf("Open(%+v) accepted", spec)
		}
	}
	s, err := Open(SourceSpec{Kind: "generator", Generator: GeneratorOptions{Seed: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if c := s.Cursor(); c.Kind != "generator" {
		t.Errorf("cursor %+v", c)
	}
	if err := s.Restore(Cursor{Kind: "fen"}); err == nil {
		t.Error("restored a generator from a fen cursor")
	}
	p, err := Open(SourceSpec{Path: filepath.Join("..", "chess", "testdata", "games.pgn")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Restore(Cursor{Kind: "pgn", Path: "other.pgn"}); err == nil {
		t.Error("restored from another file's cursor")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Next: %v", err)
	}
}
