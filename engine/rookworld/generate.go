package rookworld

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/rookscript/rookscript/engine/chess"
	"github.com/rookscript/rookscript/engine/stockfish"
)

// Generator play styles.
const (
	StyleRandom  = "random"  // every legal move equally likely
	StyleOpening = "opening" // development-minded weights for the first plies
)

// GeneratorOptions configure the built-in position generator.
type GeneratorOptions struct {
	Seed     uint64 `json:"seed"`
	StartFEN string `json:"start_fen"` // default StartFEN
	MinPly   int    `json:"min_ply"`   // shortest game played before a position is taken
	MaxPly   int    `json:"max_ply"`   // longest; default 60
	Style    string `json:"style"`     // StyleOpening (default) or StyleRandom
	// With Engine set, each ply follows the engine with probability
	// GuideProb: a move drawn uniformly from its top GuideTop lines at
	// GuideDepth (defaults 3 and 6).
	Engine     *stockfish.Pool `json:"-"`
	GuideProb  float64         `json:"guide_prob"`
	GuideDepth int             `json:"guide_depth"`
	GuideTop   int             `json:"guide_top"`
}

// Generator plays seeded games and yields one position per game: the
// position after a game length drawn uniformly from [MinPly, MaxPly].
// When the game ends earlier, it yields the position before the final move,
// with that move as Item.Next (so A: rows see checkmates and draws).
type Generator struct {
	opt   GeneratorOptions
	start *chess.Position
	pcg   *rand.PCG
	rng   *rand.Rand
	count int64
}

// NewGenerator validates the options and seeds the generator.
func NewGenerator(opt GeneratorOptions) (*Generator, error) {
	if opt.StartFEN == "" {
		opt.StartFEN = chess.StartFEN
	}
	if opt.MaxPly == 0 {
		opt.MaxPly = 60
	}
	if opt.Style == "" {
		opt.Style = StyleOpening
	}
	if opt.GuideTop == 0 {
		opt.GuideTop = 3
	}
	if opt.GuideDepth == 0 {
		opt.GuideDepth = 6
	}
	switch {
	case opt.MinPly < 0 || opt.MaxPly < opt.MinPly || opt.MaxPly > 10000:
		return nil, fmt.Errorf("generator: min_ply=%d max_ply=%d, want 0 <= min <= max <= 10000", opt.MinPly, opt.MaxPly)
	case opt.Style != StyleRandom && opt.Style != StyleOpening:
		return nil, fmt.Errorf("generator: style %q, want %q or %q", opt.Style, StyleRandom, StyleOpening)
	case opt.GuideProb < 0 || opt.GuideProb > 1:
		return nil, fmt.Errorf("generator: guide_prob=%v, want 0..1", opt.GuideProb)
	case opt.GuideProb > 0 && opt.Engine == nil:
		return nil, fmt.Errorf("generator: guide_prob=%v needs an engine", opt.GuideProb)
	case opt.GuideTop < 1 || opt.GuideDepth < 1:
		return nil, fmt.Errorf("generator: guide_top=%d guide_depth=%d, want >= 1", opt.GuideTop, opt.GuideDepth)
	}
	start, err := parseLegal(opt.StartFEN)
	if err != nil {
		return nil, fmt.Errorf("generator: start_fen: %w", err)
	}
	if start.NumLegalMoves() == 0 {
		return nil, fmt.Errorf("generator: start_fen %s has no legal moves", start.FEN())
	}
	g := &Generator{opt: opt, start: start, pcg: newPCG(opt.Seed)}
	g.rng = rand.New(g.pcg)
	return g, nil
}

// Next plays one game and returns its position.
func (g *Generator) Next(ctx context.Context) (Item, error) {
	if err := ctx.Err(); err != nil {
		return Item{}, err
	}
	game := chess.NewGameFrom(g.start)
	target := g.opt.MinPly + g.rng.IntN(g.opt.MaxPly-g.opt.MinPly+1)
	next := ""
	for game.Ply() < target {
		m, err := g.choose(ctx, game)
		if err != nil {
			return Item{}, err
		}
		before := game.Clone()
		_ = game.Push(m) // chosen among the legal moves
		if game.Outcome().Over() {
			game, next = before, m
			break
		}
	}
	g.count++
	return Item{FEN: game.Position().FEN(), StartFEN: g.start.FEN(), History: game.Moves(), Next: next,
		Origin: "generator #" + strconv.FormatInt(g.count, 10)}, nil
}

func (g *Generator) choose(ctx context.Context, game *chess.Game) (string, error) {
	p := game.Position()
	if g.opt.Engine != nil && g.opt.GuideProb > 0 && g.rng.Float64() < g.opt.GuideProb {
		a, err := g.opt.Engine.AnalyseWith(ctx, stockfish.Request{FEN: p.FEN(), Depth: g.opt.GuideDepth, MultiPV: g.opt.GuideTop})
		if err != nil {
			return "", fmt.Errorf("generator: %w", err)
		}
		return a.Lines[g.rng.IntN(len(a.Lines))].Move, nil
	}
	moves := p.LegalMoves()
	if g.opt.Style == StyleRandom {
		return moves[g.rng.IntN(len(moves))], nil
	}
	weights := make([]float64, len(moves))
	total := 0.0
	for i, m := range moves {
		weights[i] = openingWeight(p, m, game.Ply())
		total += weights[i]
	}
	x := g.rng.Float64() * total
	for i, w := range weights {
		if x < w {
			return moves[i], nil
		}
		x -= w
	}
	return moves[len(moves)-1], nil
}

// openingWeight favours what openings do in the first 16 plies: central pawn
// moves, knight and bishop development and castling, with few early queen,
// rook and king walks. Captures are favoured throughout.
func openingWeight(p *chess.Position, uci string, ply int) float64 {
	fromFile, toFile := int(uci[0]-'a'), int(uci[2]-'a')
	piece := p.PieceAt(uci[0:2])[0] | 0x20
	w := 1.0
	if ply < 16 {
		switch piece {
		case 'p':
			if fromFile >= 2 && fromFile <= 5 {
				w = 4
			}
		case 'n':
			w = 3
		case 'b':
			w = 2
		case 'q':
			w = 0.5
		case 'r':
			w = 0.7
		case 'k':
			w = 0.3
			if fromFile-toFile == 2 || toFile-fromFile == 2 {
				w = 6 // castling
			}
		}
	}
	if p.PieceAt(uci[2:4]) != "" {
		w *= 3
	}
	return w
}

// Cursor returns the generator's state.
func (g *Generator) Cursor() Cursor {
	return Cursor{Kind: "generator", Count: g.count, RNG: pcgState(g.pcg)}
}

// Restore continues from a cursor.
func (g *Generator) Restore(c Cursor) error {
	if c.Kind != "generator" {
		return fmt.Errorf("generator: cursor is for a %s source", c.Kind)
	}
	if err := g.pcg.UnmarshalBinary(c.RNG); err != nil {
		return fmt.Errorf("generator: cursor rng: %w", err)
	}
	g.count = c.Count
	return nil
}

// Close does nothing; the engine belongs to the caller.
func (g *Generator) Close() error { return nil }
