package rookworld

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/rookscript/rookscript/engine/chess"
	"github.com/rookscript/rookscript/engine/stockfish"
)

// Ways an A: row picks its move.
const (
	EnvMoveNext   = "next"   // the source's next move when known, else a random legal move
	EnvMoveRandom = "random" // a random legal move
)

// DatasetOptions configure BuildDataset.
type DatasetOptions struct {
	Rows        int     `json:"rows"`         // rows to write; 0 = until the source ends
	EnvFraction float64 `json:"env_fraction"` // share of A: rows, 0..1
	Seed        uint64  `json:"seed"`
	Depth       int     `json:"depth"` // P: labels; 0 = the pool's depth
	// PublicBestQuirk reproduces the public ROOK data: with black to move,
	// B: is the last MultiPV line instead of the best.
	PublicBestQuirk bool `json:"public_best_quirk"`
	// ShuffleCandidates shuffles the M:/E: pairs (seeded), as the public
	// generator did; otherwise they are in MultiPV order.
	ShuffleCandidates bool    `json:"shuffle_candidates"`
	IllegalFraction   float64 `json:"illegal_fraction"` // share of A: rows given an illegal move
	EnvMove           string  `json:"env_move"`         // EnvMoveNext (default) or EnvMoveRandom
	JSONL             bool    `json:"jsonl"`            // write {"text": …} lines instead of plain text

	Progress func(rows int) `json:"-"` // if set, told after each row is written
}

// DatasetStats counts what BuildDataset wrote.
type DatasetStats struct {
	Rows       int `json:"rows"`
	Policy     int `json:"policy"`
	Env        int `json:"env"`
	EnvIllegal int `json:"env_illegal"`
	Skipped    int `json:"skipped"` // items that give no row (no legal move; P: rows of invalid boards)
}

// BuildDataset writes RookWorld training text from a position source: P: rows
// labelled by the pool (MultiPV moves and evaluations, B: the engine's best)
// and A: rows labelled by the rules. The output is a function of the source,
// the options and the engine's fixed-depth results, so the same seed and
// depth give the same file. pool may be nil when EnvFraction is 1.
func BuildDataset(ctx context.Context, src Source, pool *stockfish.Pool, w io.Writer, opt DatasetOptions) (DatasetStats, error) {
	var st DatasetStats
	if opt.EnvFraction < 0 || opt.EnvFraction > 1 || opt.IllegalFraction < 0 || opt.IllegalFraction > 1 || opt.Rows < 0 {
		return st, fmt.Errorf("dataset: env_fraction=%v illegal_fraction=%v rows=%d out of range", opt.EnvFraction, opt.IllegalFraction, opt.Rows)
	}
	if opt.EnvMove == "" {
		opt.EnvMove = EnvMoveNext
	}
	if opt.EnvMove != EnvMoveNext && opt.EnvMove != EnvMoveRandom {
		return st, fmt.Errorf("dataset: env_move %q, want %q or %q", opt.EnvMove, EnvMoveNext, EnvMoveRandom)
	}
	if pool == nil && opt.EnvFraction < 1 {
		return st, errors.New("dataset: policy rows need a Stockfish pool")
	}
	rng := rand.New(newPCG(opt.Seed))
	bw := bufio.NewWriter(w)
	for opt.Rows == 0 || st.Rows < opt.Rows {
		it, err := src.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return st, err
		}
		env := rng.Float64() < opt.EnvFraction
		var text string
		if env {
			text, err = envRow(it, rng, opt, &st)
		} else {
			text, err = policyRow(ctx, it, pool, rng, opt)
		}
		if err != nil {
			return st, fmt.Errorf("dataset: %s: %w", it.Origin, err)
		}
		if text == "" {
			st.Skipped++
			continue
		}
		if opt.JSONL {
			b, _ := json.Marshal(struct {
				Text string `json:"text"`
			}{text})
			text = string(b)
		}
		if _, err := bw.WriteString(text + "\n"); err != nil {
			return st, fmt.Errorf("dataset: %w", err)
		}
		st.Rows++
		if env {
			st.Env++
		} else {
			st.Policy++
		}
		if opt.Progress != nil {
			opt.Progress(st.Rows)
		}
	}
	if err := bw.Flush(); err != nil {
		return st, fmt.Errorf("dataset: %w", err)
	}
	return st, nil
}

func policyRow(ctx context.Context, it Item, pool *stockfish.Pool, rng *rand.Rand, opt DatasetOptions) (string, error) {
	pos, err := chess.ParseFEN(it.FEN)
	if err != nil {
		return "", err
	}
	if pos.Valid() != nil {
		return "", nil // e.g. a kingless board from public A: rows: no engine label
	}
	a, err := pool.AnalyseWith(ctx, stockfish.Request{FEN: it.FEN, Depth: opt.Depth})
	if err != nil {
		return "", err
	}
	if len(a.Lines) == 0 {
		return "", nil
	}
	moves, evals := a.Moves(), a.Evals()
	best := a.Best()
	if opt.PublicBestQuirk && pos.Turn() == chess.Black {
		best = moves[len(moves)-1]
	}
	if opt.ShuffleCandidates {
		rng.Shuffle(len(moves), func(i, j int) {
			moves[i], moves[j] = moves[j], moves[i]
			evals[i], evals[j] = evals[j], evals[i]
		})
	}
	return PolicyText(a.FEN, moves, evals, best), nil
}

func envRow(it Item, rng *rand.Rand, opt DatasetOptions, st *DatasetStats) (string, error) {
	g, err := it.Game()
	if err != nil {
		return "", err
	}
	p := g.Position()
	illegal := rng.Float64() < opt.IllegalFraction
	var move string
	switch {
	case illegal:
		move = randomIllegal(p, rng)
	case opt.EnvMove == EnvMoveNext && it.Next != "":
		move = it.Next
	case p.NumLegalMoves() > 0:
		legal := p.LegalMoves()
		move = legal[rng.IntN(len(legal))]
	}
	if move == "" {
		return "", nil
	}
	r := Step(g, move)
	if !r.Legal {
		st.EnvIllegal++
	}
	return EnvText(r, it.History), nil
}

// randomIllegal draws a well-formed move of a piece of the side to move that
// the rules forbid, or "" if none is found quickly.
func randomIllegal(p *chess.Position, rng *rand.Rand) string {
	white := p.Turn() == chess.White
	var own []int
	for i := range 64 {
		if c := p.PieceAt(squareName(i)); c != "" && (c[0] >= 'A' && c[0] <= 'Z') == white {
			own = append(own, i)
		}
	}
	if len(own) == 0 {
		return ""
	}
	for range 100 {
		from := own[rng.IntN(len(own))]
		to := rng.IntN(64)
		if to == from {
			continue
		}
		m := squareName(from) + squareName(to)
		if pc := p.PieceAt(squareName(from)); (pc == "P" && to/8 == 7) || (pc == "p" && to/8 == 0) {
			m += "q"
		}
		if !p.IsLegal(m) {
			return m
		}
	}
	return ""
}

// squareName is the name of square i, a1 = 0 .. h8 = 63.
func squareName(i int) string {
	return string([]byte{byte('a' + i%8), byte('1' + i/8)})
}
