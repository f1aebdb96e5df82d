package rookworld

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/chess"
	"github.com/rookscript/rookscript/engine/stockfish"
)

// Benchmarks at the default reward setting: depth 10, MultiPV 5, 2 workers.
// "Cold" positions were never analysed by the pool; "warm" ones are all in
// its cache. Each reports positions/s.

const benchDepth, benchWorkers = 10, 2

// benchPositions returns n distinct positions from seeded opening-style play.
func benchPositions(b *testing.B, seed uint64, n int) []string {
	b.Helper()
	g, err := NewGenerator(GeneratorOptions{Seed: seed, MinPly: 10, MaxPly: 50})
	if err != nil {
		b.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	for len(out) < n {
		it, err := g.Next(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if !seen[it.FEN] {
			seen[it.FEN] = true
			out = append(out, it.FEN)
		}
	}
	return out
}

// benchAnswers pairs each position with a plausible model answer: five
// random legal candidates (most outside the engine's lines, so they need
// their own searches) and the first as best.
func benchAnswers(fens []string) []Input {
	rng := rand.New(rand.NewPCG(1, 2))
	ins := make([]Input, len(fens))
	for i, f := range fens {
		moves := chess.MustParseFEN(f).LegalMoves()
		rng.Shuffle(len(moves), func(a, b int) { moves[a], moves[b] = moves[b], moves[a] })
		moves = moves[:min(5, len(moves))]
		ins[i] = Input{Prompt: PolicyPrompt(f, true), Completion: PolicyCompletion(moves, make([]float64, len(moves)), moves[0])}
	}
	return ins
}

func benchPool(b *testing.B) *stockfish.Pool {
	return newTestPool(b, stockfish.Config{Depth: benchDepth, Workers: benchWorkers})
}

func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "positions/s")
}

func BenchmarkAnalyseCold(b *testing.B) {
	requireStockfish(b)
	fens := benchPositions(b, uint64(b.N), b.N)
	p := benchPool(b)
	reqs := make([]stockfish.Request, len(fens))
	for i, f := range fens {
		reqs[i] = stockfish.Request{FEN: f}
	}
	b.ResetTimer()
	if _, err := p.AnalyseBatch(context.Background(), reqs); err != nil {
		b.Fatal(err)
	}
	reportRate(b)
}

func BenchmarkAnalyseWarm(b *testing.B) {
	requireStockfish(b)
	fens := benchPositions(b, 1, 32)
	p := benchPool(b)
	reqs := make([]stockfish.Request, b.N)
	for i := range reqs {
		reqs[i] = stockfish.Request{FEN: fens[i%len(fens)]}
	}
	if _, err := p.AnalyseBatch(context.Background(), reqs[:min(b.N, len(fens))]); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	if _, err := p.AnalyseBatch(context.Background(), reqs); err != nil {
		b.Fatal(err)
	}
	reportRate(b)
}

func BenchmarkScorePolicyCold(b *testing.B) {
	requireStockfish(b)
	ins := benchAnswers(benchPositions(b, uint64(b.N)+1000, b.N))
	s, err := NewScorer(benchPool(b), DefaultRewardConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	if _, err := s.ScoreBatch(context.Background(), ins); err != nil {
		b.Fatal(err)
	}
	reportRate(b)
}

func BenchmarkScorePolicyWarm(b *testing.B) {
	requireStockfish(b)
	base := benchAnswers(benchPositions(b, 1, 32))
	s, err := NewScorer(benchPool(b), DefaultRewardConfig())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.ScoreBatch(context.Background(), base); err != nil {
		b.Fatal(err)
	}
	ins := make([]Input, b.N)
	for i := range ins {
		ins[i] = base[i%len(base)]
	}
	b.ResetTimer()
	if _, err := s.ScoreBatch(context.Background(), ins); err != nil {
		b.Fatal(err)
	}
	reportRate(b)
}

func BenchmarkScoreEnv(b *testing.B) {
	g, _ := NewGenerator(GeneratorOptions{Seed: 9, MinPly: 10, MaxPly: 50})
	var ins []Input
	for range 64 {
		it, _ := g.Next(context.Background())
		m := chess.MustParseFEN(it.FEN).LegalMoves()[0]
		r, _ := EnvStep(it.FEN, m)
		ins = append(ins, Input{Prompt: EnvPrompt(it.FEN, m, it.History), Completion: r.Completion()})
	}
	s, _ := NewScorer(nil, DefaultRewardConfig())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := s.Score(context.Background(), ins[i%len(ins)])
		if err != nil || r.Total != 1 {
			b.Fatal(err, strings.Join(r.Problems, "; "))
		}
	}
	reportRate(b)
}
