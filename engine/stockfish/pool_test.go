package stockfish

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rookscript/rookscript/engine/chess"
)

// requireStockfish skips only when ROOKSCRIPT_NO_STOCKFISH=1 is set: in CI a
// missing engine must fail the tests, not hide them.
func requireStockfish(t testing.TB) {
	t.Helper()
	if os.Getenv("ROOKSCRIPT_NO_STOCKFISH") == "1" {
		t.Skip("ROOKSCRIPT_NO_STOCKFISH=1: skipping a test that needs Stockfish")
	}
}

func newTestPool(t testing.TB, cfg Config) *Pool {
	t.Helper()
	requireStockfish(t)
	p, err := NewPool(context.Background(), testConfig(cfg))
	if err != nil {
		t.Fatalf("NewPool: %v (install Stockfish with `make setup`, or set ROOKSCRIPT_NO_STOCKFISH=1 to skip)", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// testConfig is the default configuration at depth 6 with the fields set in
// over replacing it (tests name only what they change).
func testConfig(over Config) Config {
	c := DefaultConfig()
	c.Depth = 6
	dst, src := reflect.ValueOf(&c).Elem(), reflect.ValueOf(over)
	for i := range src.NumField() {
		if !src.Field(i).IsZero() {
			dst.Field(i).Set(src.Field(i))
		}
	}
	return c
}

var testFENs = []string{
	chess.StartFEN,
	"r1b1kbnr/pp2pppp/n1p5/q2PP3/3P4/2N5/PP3PPP/R1BQKBNR b KQkq - 2 6",
	"r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
	"8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1",
	"r4rk1/1pp1qppp/p1np1n2/2b1p1B1/2B1P1b1/P1NP1N2/1PP1QPPP/R4RK1 w - - 0 10",
}

func TestPoolAnalyse(t *testing.T) {
	p := newTestPool(t, Config{Workers: 2})
	ctx := context.Background()
	a, err := p.Analyse(ctx, chess.StartFEN)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Lines) != 5 || a.Depth != 6 || a.MultiPV != 5 || !strings.HasPrefix(a.Engine, "Stockfish") {
		t.Fatalf("analysis %+v", a)
	}
	pos := chess.MustParseFEN(chess.StartFEN)
	seen := map[string]bool{}
	for i, l := range a.Lines {
		if !pos.IsLegal(l.Move) || seen[l.Move] || l.Depth != 6 || l.PV[0] != l.Move {
			t.Errorf("line %d: %+v", i, l)
		}
		seen[l.Move] = true
		if i > 0 && l.Score.Centipawns() > a.Lines[i-1].Score.Centipawns() {
			t.Errorf("line %d scores above line %d", i+1, i)
		}
	}
	if a.Rank(a.Best()) != 1 || a.Rank("a2a3") > 5 || a.Rank("zz") != 0 {
		t.Error("Rank")
	}

	// Fewer legal moves than MultiPV: one line per legal move.
	two, err := p.Analyse(ctx, "7k/8/8/8/8/8/6q1/7K w - - 0 1")
	if err != nil || len(two.Lines) != 1 || two.Best() != "h1g2" {
		t.Errorf("single legal move: %+v, %v", two, err)
	}

	// No legal move: answered without the engine.
	before := p.Stats().Searches
	for fen, term := range map[string]chess.Termination{
		"R5k1/5ppp/8/8/8/8/8/6K1 b - - 1 1": chess.Checkmate,
		"7k/5Q2/6K1/8/8/8/8/8 b - - 1 1":    chess.Stalemate,
	} {
		a, err := p.Analyse(ctx, fen)
		if err != nil || a.Terminal != term || len(a.Lines) != 0 || a.Best() != "" {
			t.Errorf("%s: %+v, %v", fen, a, err)
		}
	}
	if p.Stats().Searches != before {
		t.Error("a terminal position reached the engine")
	}
	if m := (&Analysis{Terminal: chess.Checkmate}).Score(); m.Pawns() != -1000 {
		t.Errorf("checkmated score %v", m)
	}

	if _, err := p.Analyse(ctx, "not a fen"); err == nil {
		t.Error("invalid FEN accepted")
	}
	// A kingless position (python-chess accepts it) never reaches the engine.
	if _, err := p.Analyse(ctx, "5R2/6R1/8/3P4/p7/1b2R2P/2p3P1/6K1 b - - 0 58"); !errors.As(err, new(*chess.InvalidError)) {
		t.Errorf("kingless position: %v", err)
	}
}

func TestPoolScoresAreForTheSideToMove(t *testing.T) {
	p := newTestPool(t, Config{})
	ctx := context.Background()
	// Black to move with an extra queen: good for the side to move.
	a, err := p.Analyse(ctx, "4k3/8/8/3q4/8/8/8/4K3 b - - 0 1")
	if err != nil || a.Score().Centipawns() < 500 {
		t.Errorf("black up a queen: %+v, %v", a.Score(), err)
	}
	// The same material, white to move: bad for the side to move.
	a, err = p.Analyse(ctx, "4k3/8/8/3q4/8/8/8/4K3 w - - 0 1")
	if err != nil || a.Score().Centipawns() > -500 {
		t.Errorf("white down a queen: %+v, %v", a.Score(), err)
	}
	// Mate in one for the side to move.
	a, err = p.Analyse(ctx, "6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1")
	if err != nil || a.Best() != "a1a8" || a.Score() != (Score{Mate: true, Value: 1}) || a.Evals()[0] != 999.99 {
		t.Errorf("mate in one: %+v, %v", a, err)
	}
}

func TestPoolDeterministic(t *testing.T) {
	ctx := context.Background()
	p1 := newTestPool(t, Config{Workers: 2})
	p2 := newTestPool(t, Config{Workers: 1})
	reqs := make([]Request, len(testFENs))
	rev := make([]Request, len(testFENs))
	for i, f := range testFENs {
		reqs[i] = Request{FEN: f}
		rev[len(testFENs)-1-i] = Request{FEN: f}
	}
	a1, err := p1.AnalyseBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := p2.AnalyseBatch(ctx, rev)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a1 {
		if !reflect.DeepEqual(a1[i].Lines, a2[len(a2)-1-i].Lines) {
			t.Errorf("%s: results differ between pools and orders:\n%+v\n%+v", testFENs[i], a1[i].Lines, a2[len(a2)-1-i].Lines)
		}
	}
}

func TestPoolCacheFile(t *testing.T) {
	requireStockfish(t)
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "sf.jsonl")
	p := newTestPool(t, Config{CacheFile: file})
	first, err := p.Analyse(ctx, testFENs[1])
	if err != nil {
		t.Fatal(err)
	}
	again, err := p.Analyse(ctx, testFENs[1])
	if err != nil || !again.Cached || !reflect.DeepEqual(first.Lines, again.Lines) {
		t.Fatalf("second request: cached=%v err=%v", again.Cached, err)
	}
	if s := p.Stats(); s.Searches != 1 || s.CacheHits != 1 {
		t.Errorf("stats %+v", s)
	}
	// A different depth is a different entry.
	if a, err := p.AnalyseWith(ctx, Request{FEN: testFENs[1], Depth: 5}); err != nil || a.Cached {
		t.Errorf("depth 5: cached=%v err=%v", a.Cached, err)
	}
	p.Close()

	// A new pool reads the file and answers without searching.
	p2 := newTestPool(t, Config{CacheFile: file})
	if s := p2.Stats(); s.CacheLoaded != 2 {
		t.Errorf("loaded %d entries, want 2", s.CacheLoaded)
	}
	b, err := p2.Analyse(ctx, testFENs[1])
	if err != nil || !b.Cached || !reflect.DeepEqual(first.Lines, b.Lines) || p2.Stats().Searches != 0 {
		t.Errorf("after restart: %+v %v %+v", b, err, p2.Stats())
	}
	p2.Close()

	data, _ := os.ReadFile(file)
	lines := strings.SplitAfter(string(data), "\n")
	bad := []struct {
		name, content string
		line          int
		field         string // "" for the line as a whole
	}{
		{"corrupt JSON", lines[0] + "{not json\n", 2, ""},
		{"unknown field", lines[0] + `{"fen":"x","bogus":1}` + "\n", 2, ""},
		{"illegal move", strings.Replace(lines[0], `"move":"`, `"move":"a1`, 1), 1, "lines[0].move"},
		{"bad fen", strings.Replace(lines[0], "R1BQKBNR", "R1BQKBN", 1), 1, "fen"},
		{"torn last line", lines[0] + lines[1][:20], 2, ""},
	}
	for _, tc := range bad {
		f := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".jsonl")
		os.WriteFile(f, []byte(tc.content), 0o644)
		_, err := NewPool(ctx, testConfig(Config{CacheFile: f}))
		var ce *CacheError
		if !errors.As(err, &ce) || ce.File != f || ce.Line != tc.line || ce.Field != tc.field {
			t.Errorf("%s: err = %v, want a *CacheError at %s:%d, field %q", tc.name, err, f, tc.line, tc.field)
		}
	}

	// Entries from another engine are ignored, not trusted.
	other := filepath.Join(dir, "other.jsonl")
	os.WriteFile(other, []byte(strings.Replace(lines[0], `"engine":"Stockfish`, `"engine":"Other`, 1)), 0o644)
	p3 := newTestPool(t, Config{CacheFile: other})
	if s := p3.Stats(); s.CacheLoaded != 0 {
		t.Errorf("loaded %d entries from another engine", s.CacheLoaded)
	}
}

func TestPoolMemoryCacheBound(t *testing.T) {
	p := newTestPool(t, Config{CacheSize: 2, Depth: 4})
	ctx := context.Background()
	for _, f := range testFENs[:3] {
		if _, err := p.Analyse(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	if a, _ := p.Analyse(ctx, testFENs[0]); a.Cached {
		t.Error("the oldest entry should have been evicted")
	}
	if a, _ := p.Analyse(ctx, testFENs[2]); !a.Cached {
		t.Error("the newest entry should be cached")
	}
}

// waitBusy returns the PID of an engine that is working on a request.
func waitBusy(t *testing.T, p *Pool) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, w := range p.Workers() {
			if w.Busy && w.PID != 0 {
				return w.PID
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no engine became busy")
	return 0
}

func TestPoolEngineKilledMidRequest(t *testing.T) {
	p := newTestPool(t, Config{Workers: 2, Depth: 12})
	ctx := context.Background()
	reqs := []Request{{FEN: testFENs[2]}, {FEN: testFENs[4]}, {FEN: testFENs[1]}, {FEN: testFENs[3]}}
	var res []*Analysis
	var err error
	done := make(chan struct{})
	go func() {
		res, err = p.AnalyseBatch(ctx, reqs)
		close(done)
	}()
	pid := waitBusy(t, p)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done
	if err != nil {
		t.Fatalf("batch failed after a kill: %v", err)
	}
	if s := p.Stats(); s.Restarts < 1 || s.Failures != 0 {
		t.Errorf("stats %+v, want a restart and no failure", s)
	}
	// The retried searches give exactly what an undisturbed pool gives.
	q := newTestPool(t, Config{Depth: 12})
	for i, r := range reqs {
		want, err := q.AnalyseWith(ctx, r)
		if err != nil || !reflect.DeepEqual(res[i].Lines, want.Lines) {
			t.Errorf("%s: retried result differs: %v", r.FEN, err)
		}
	}
}

func TestPoolHungEngineIsReplaced(t *testing.T) {
	p := newTestPool(t, Config{Depth: 12, Timeout: 2})
	ctx := context.Background()
	var a *Analysis
	var err error
	done := make(chan struct{})
	go func() {
		a, err = p.Analyse(ctx, testFENs[2])
		close(done)
	}()
	pid := waitBusy(t, p)
	// SIGSTOP freezes the real engine: a hang, not a crash.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	<-done
	if err != nil || len(a.Lines) != 5 {
		t.Fatalf("after a hang: %+v, %v", a, err)
	}
	if s := p.Stats(); s.Restarts != 1 {
		t.Errorf("restarts = %d, want 1", s.Restarts)
	}
	if w := p.Workers()[0]; w.PID == pid || w.Restarts != 1 {
		t.Errorf("worker %+v still runs the frozen process %d", w, pid)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("the frozen process %d is still alive", pid)
	}
}

func TestPoolGivesUpAfterRetries(t *testing.T) {
	p := newTestPool(t, Config{Depth: 30, Timeout: 0.05, Retries: 1})
	_, err := p.Analyse(context.Background(), testFENs[2])
	if g := (*GiveUpError)(nil); !errors.As(err, &g) || g.Attempts != 2 || g.FEN != testFENs[2] {
		t.Errorf("err = %v, want a *GiveUpError naming the FEN", err)
	}
	if s := p.Stats(); s.Failures != 1 || s.Restarts != 2 {
		t.Errorf("stats %+v", s)
	}
}

func TestPoolCallerCancels(t *testing.T) {
	p := newTestPool(t, Config{Depth: 30})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := p.Analyse(ctx, testFENs[2])
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the caller's deadline", err)
	}
	// The pool still works.
	if _, err := p.AnalyseWith(context.Background(), Request{FEN: testFENs[1], Depth: 4}); err != nil {
		t.Error(err)
	}
}

func TestPoolConcurrentCallers(t *testing.T) {
	p := newTestPool(t, Config{Workers: 2, Depth: 5})
	ctx := context.Background()
	var wg sync.WaitGroup
	results := make([][]*Analysis, 8)
	for g := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, f := range testFENs {
				a, err := p.Analyse(ctx, f)
				if err != nil {
					t.Error(err)
					return
				}
				results[g] = append(results[g], a)
			}
		}()
	}
	wg.Wait()
	for g := 1; g < len(results); g++ {
		for i := range results[g] {
			if !reflect.DeepEqual(results[g][i].Lines, results[0][i].Lines) {
				t.Errorf("caller %d got a different analysis of %s", g, testFENs[i])
			}
		}
	}
	if s := p.Stats(); s.Searches != int64(len(testFENs)) {
		t.Errorf("searches = %d, want %d (one per distinct position): %+v", s.Searches, len(testFENs), s)
	}
}

func TestPoolClose(t *testing.T) {
	p := newTestPool(t, Config{Workers: 2})
	var pids []int
	for _, w := range p.Workers() {
		pids = append(pids, w.PID)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("engine %d still running after Close", pid)
		}
	}
	if _, err := p.Analyse(context.Background(), chess.StartFEN); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("after Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestMoveScores(t *testing.T) {
	p := newTestPool(t, Config{})
	ctx := context.Background()
	fen := "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1"
	s, root, err := p.MoveScores(ctx, fen, 0, []string{"a1a8", "a1a2", "h2h3", "e2e4", "junk", "a1a8"})
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 3 {
		t.Errorf("scores for %d moves, want 3 (illegal and malformed left out): %v", len(s), s)
	}
	if s["a1a8"] != (Score{Mate: true, Value: 1}) {
		t.Errorf("mating move scored %v", s["a1a8"])
	}
	for m, sc := range s {
		if r := root.Rank(m); r > 0 && root.Lines[r-1].Score != sc {
			t.Errorf("%s: %v, its line says %v", m, sc, root.Lines[r-1].Score)
		}
	}
	// A move outside the lines is scored from the position after it.
	pos := chess.MustParseFEN(fen)
	var outside string
	for _, m := range pos.LegalMoves() {
		if root.Rank(m) == 0 {
			outside = m
			break
		}
	}
	s2, _, err := p.MoveScores(ctx, fen, 0, []string{outside})
	if err != nil {
		t.Fatal(err)
	}
	child, _ := pos.Play(outside)
	a, err := p.AnalyseWith(ctx, Request{FEN: child.FEN(), Depth: 5, MultiPV: 1})
	if err != nil || s2[outside] != parentScore(a.Score()) {
		t.Errorf("%s scored %v, child says %v (%v)", outside, s2[outside], a.Score(), err)
	}
}
