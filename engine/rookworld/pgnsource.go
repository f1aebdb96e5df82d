package rookworld

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"

	"github.com/rookscript/rookscript/engine/chess"
)

// PGNOptions configure a PGN position source.
type PGNOptions struct {
	Seed        uint64 `json:"seed"`
	PerGame     int    `json:"per_game"` // positions sampled per game; default 1
	MinPly      int    `json:"min_ply"`  // earliest ply (0 = the start position)
	MaxPly      int    `json:"max_ply"`  // latest ply; 0 = the end of the game
	Loop        bool   `json:"loop"`
	SkipInvalid bool   `json:"skip_invalid"`
}

// PGNSource samples positions from the games of a PGN file: per game,
// PerGame distinct plies in [MinPly, MaxPly] whose position has a legal move,
// drawn with a seeded generator and emitted in ply order.
type PGNSource struct {
	path    string
	f       *os.File
	r       *chess.PGNReader
	opt     PGNOptions
	pcg     *rand.PCG
	rng     *rand.Rand
	pending []Item
	cur     Cursor // the game being emitted
	epoch   int
	count   int64
	games   int64 // games read this epoch
	skipped int64
}

// OpenPGNFile opens a PGN position source.
func OpenPGNFile(path string, opt PGNOptions) (*PGNSource, error) {
	if opt.PerGame == 0 {
		opt.PerGame = 1
	}
	if opt.PerGame < 0 || opt.MinPly < 0 || opt.MaxPly < 0 || (opt.MaxPly > 0 && opt.MaxPly < opt.MinPly) {
		return nil, fmt.Errorf("pgn source %s: bad options per_game=%d min_ply=%d max_ply=%d", path, opt.PerGame, opt.MinPly, opt.MaxPly)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pgn source: %w", err)
	}
	s := &PGNSource{path: path, f: f, opt: opt, pcg: newPCG(opt.Seed)}
	s.rng = rand.New(s.pcg)
	s.r = chess.NewPGNReader(f, path)
	return s, nil
}

// Next returns the next sampled position.
func (s *PGNSource) Next(ctx context.Context) (Item, error) {
	for len(s.pending) == 0 {
		if err := ctx.Err(); err != nil {
			return Item{}, err
		}
		cur := Cursor{Kind: "pgn", Path: s.path, Offset: s.r.Offset(), Line: s.r.LineNumber() - 1, RNG: pcgState(s.pcg)}
		g, err := s.r.Next()
		if err == io.EOF {
			if !s.opt.Loop || s.games == 0 {
				return Item{}, io.EOF
			}
			s.epoch++
			s.games = 0
			if err := s.seek(0, 0); err != nil {
				return Item{}, err
			}
			continue
		}
		if err != nil {
			if s.opt.SkipInvalid {
				s.skipped++
				if err := s.r.SkipToNextGame(); err != nil {
					return Item{}, err
				}
				continue
			}
			return Item{}, err
		}
		// Legal moves keep a position legal, so the start decides for the game.
		if fen, ok := g.Tags["FEN"]; ok {
			if err := ValidatePosition(fen); err != nil {
				if s.opt.SkipInvalid {
					s.skipped++
					continue
				}
				return Item{}, fmt.Errorf("%s:%d: FEN tag: %w", s.path, g.Line, err)
			}
		}
		s.games++
		s.cur = cur
		s.pending = s.sample(g)
	}
	it := s.pending[0]
	s.pending = s.pending[1:]
	s.cur.Index++
	s.count++
	return it, nil
}

func (s *PGNSource) sample(g *chess.PGNGame) []Item {
	hi := len(g.Moves)
	if s.opt.MaxPly > 0 {
		hi = min(hi, s.opt.MaxPly)
	}
	var plies []int
	game := g.Game()
	for k := s.opt.MinPly; k <= hi; k++ {
		if game.PositionAt(k).NumLegalMoves() > 0 {
			plies = append(plies, k)
		}
	}
	n := min(s.opt.PerGame, len(plies))
	for i := 0; i < n; i++ { // partial Fisher–Yates
		j := i + s.rng.IntN(len(plies)-i)
		plies[i], plies[j] = plies[j], plies[i]
	}
	plies = plies[:n]
	sort.Ints(plies)
	items := make([]Item, 0, n)
	for _, k := range plies {
		it := Item{FEN: game.PositionAt(k).FEN(), StartFEN: game.PositionAt(0).FEN(), History: append([]string(nil), g.Moves[:k]...),
			Origin: s.path + ":" + strconv.Itoa(g.Line) + " ply " + strconv.Itoa(k)}
		if k < len(g.Moves) {
			it.Next = g.Moves[k]
		}
		items = append(items, it)
	}
	return items
}

func (s *PGNSource) seek(offset int64, line int) error {
	if _, err := s.f.Seek(offset, io.SeekStart); err != nil {
		return fmt.Errorf("pgn source %s: %w", s.path, err)
	}
	s.r = chess.NewPGNReaderAt(s.f, s.path, offset, line+1)
	return nil
}

// Cursor returns the position in the stream.
func (s *PGNSource) Cursor() Cursor {
	c := Cursor{Kind: "pgn", Path: s.path, Epoch: s.epoch, Count: s.count}
	if len(s.pending) > 0 {
		c.Offset, c.Line, c.Index, c.RNG = s.cur.Offset, s.cur.Line, s.cur.Index, s.cur.RNG
	} else {
		c.Offset, c.Line, c.RNG = s.r.Offset(), s.r.LineNumber()-1, pcgState(s.pcg)
	}
	return c
}

// Restore continues from a cursor: the game at the cursor is re-read and
// re-sampled from the saved random state, and its first Index items dropped.
func (s *PGNSource) Restore(c Cursor) error {
	if c.Kind != "pgn" || c.Path != s.path {
		return fmt.Errorf("pgn source %s: cursor is for %s source %s", s.path, c.Kind, c.Path)
	}
	if err := s.pcg.UnmarshalBinary(c.RNG); err != nil {
		return fmt.Errorf("pgn source %s: cursor rng: %w", s.path, err)
	}
	if err := s.seek(c.Offset, c.Line); err != nil {
		return err
	}
	s.pending, s.epoch, s.count, s.games = nil, c.Epoch, c.Count, 1
	if c.Index == 0 {
		return nil
	}
	cur := Cursor{Kind: "pgn", Path: s.path, Offset: c.Offset, Line: c.Line, RNG: c.RNG}
	g, err := s.r.Next()
	if err != nil {
		if err == io.EOF {
			err = errors.New("no game at the cursor")
		}
		return fmt.Errorf("pgn source %s: restore: %w", s.path, err)
	}
	items := s.sample(g)
	if c.Index > len(items) {
		return fmt.Errorf("pgn source %s: restore: cursor index %d beyond the game's %d positions", s.path, c.Index, len(items))
	}
	s.cur = cur
	s.cur.Index = c.Index
	s.pending = items[c.Index:]
	return nil
}

// Skipped counts games skipped as invalid (SkipInvalid).
func (s *PGNSource) Skipped() int64 { return s.skipped }

// Close closes the file.
func (s *PGNSource) Close() error { return s.f.Close() }
