package chess

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
)

// ParseSAN resolves a move in standard algebraic notation (also long
// algebraic like "Ng1-f3" or "e2e4", "0-0" castling, check and annotation
// suffixes) to UCI. It errors when no legal move or more than one matches.
func (p *Position) ParseSAN(san string) (string, error) {
	s := strings.TrimRight(san, "+#!?")
	s = strings.TrimSuffix(s, "e.p.")
	if s == "" {
		return "", fmt.Errorf("%w: empty SAN %q", ErrMalformedMove, san)
	}
	switch s {
	case "O-O", "0-0", "O-O-O", "0-0-0":
		from, to := "e1", "g1"
		if len(s) == 5 {
			to = "c1"
		}
		if !p.white {
			from, to = "e8", to[:1]+"8"
		}
		if k := p.sq[mustSquare(from)]; k != 'K' && k != 'k' || !p.IsLegal(from+to) {
			return "", fmt.Errorf("%w: %s in %s", ErrIllegalMove, san, p.FEN())
		}
		return from + to, nil
	}
	piece := byte('p')
	if strings.IndexByte("KQRBN", s[0]) >= 0 {
		piece = s[0] | 0x20
		s = s[1:]
	}
	var promo byte
	if k := strings.IndexByte(s, '='); k >= 0 {
		if k != len(s)-2 {
			return "", fmt.Errorf("%w: bad promotion in SAN %q", ErrMalformedMove, san)
		}
		promo, s = s[k+1]|0x20, s[:k]
	} else if piece == 'p' && len(s) > 2 && strings.IndexByte("QRBNqrbn", s[len(s)-1]) >= 0 &&
		s[len(s)-2] >= '1' && s[len(s)-2] <= '8' {
		promo, s = s[len(s)-1]|0x20, s[:len(s)-1]
	}
	if promo != 0 && strings.IndexByte("qrbn", promo) < 0 {
		return "", fmt.Errorf("%w: bad promotion piece in SAN %q", ErrMalformedMove, san)
	}
	s = strings.NewReplacer("x", "", "-", "", ":", "").Replace(s)
	if len(s) < 2 || len(s) > 4 {
		return "", fmt.Errorf("%w: SAN %q", ErrMalformedMove, san)
	}
	to, ok := squareIndex(s[len(s)-2:])
	if !ok {
		return "", fmt.Errorf("%w: SAN %q has no target square", ErrMalformedMove, san)
	}
	dis := s[:len(s)-2]
	fromFile, fromRank := byte(0), byte(0)
	for i := 0; i < len(dis); i++ {
		switch c := dis[i]; {
		case c >= 'a' && c <= 'h' && fromFile == 0:
			fromFile = c
		case c >= '1' && c <= '8' && fromRank == 0:
			fromRank = c
		default:
			return "", fmt.Errorf("%w: SAN %q", ErrMalformedMove, san)
		}
	}
	want := piece
	if p.white {
		want -= 'a' - 'A'
	}
	var match string
	for _, u := range p.uci {
		from, _ := squareIndex(u[0:2])
		t, _ := squareIndex(u[2:4])
		if t != to || p.sq[from] != want {
			continue
		}
		if fromFile != 0 && u[0] != fromFile || fromRank != 0 && u[1] != fromRank {
			continue
		}
		var up byte
		if len(u) == 5 {
			up = u[4]
		}
		if up != promo {
			continue
		}
		if piece == 'k' && abs(int(u[0])-int(u[2])) == 2 {
			continue // castling is written O-O
		}
		if match != "" {
			return "", fmt.Errorf("%w: SAN %q is ambiguous (%s, %s) in %s", ErrIllegalMove, san, match, u, p.FEN())
		}
		match = u
	}
	if match == "" {
		return "", fmt.Errorf("%w: %s in %s", ErrIllegalMove, san, p.FEN())
	}
	return match, nil
}

func mustSquare(s string) int {
	i, _ := squareIndex(s)
	return i
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// PGNGame is one game read from PGN.
type PGNGame struct {
	Tags   map[string]string `json:"tags"`
	Moves  []string          `json:"moves"` // UCI
	SAN    []string          `json:"san"`   // as written
	Result string            `json:"result"`
	Line   int               `json:"line"`   // line of the game's first token
	Offset int64             `json:"offset"` // byte offset of the game's first token
	game   *Game
}

// StartFEN is the FEN tag's position, or the standard start.
func (g *PGNGame) StartFEN() string { return g.game.StartFEN() }

// Game returns the replayed game (shared; clone before pushing moves).
func (g *PGNGame) Game() *Game { return g.game }

// PGNReader streams games from PGN text. It handles tag pairs with escapes,
// brace and semicolon comments, '%' escape lines, nested variations (skipped),
// NAGs, move numbers, annotation glyphs and results; games end at a result
// token, at the next game's tags or at end of input. Errors name the input,
// the line and the game's first line.
type PGNReader struct {
	name   string
	br     *bufio.Reader
	offset int64
	line   int  // 1-based line of the next byte
	bol    bool // the next byte starts a line
	undo   struct {
		ok           bool
		offset       int64
		line         int
		bol, wasLine bool
	}
}

// NewPGNReader reads PGN from r; name is used in error messages.
func NewPGNReader(r io.Reader, name string) *PGNReader {
	return &PGNReader{name: name, br: bufio.NewReaderSize(r, 64*1024), line: 1, bol: true}
}

// Offset is the byte offset of the next unread byte.
func (r *PGNReader) Offset() int64 { return r.offset }

// LineNumber is the line of the next unread byte.
func (r *PGNReader) LineNumber() int { return r.line }

func (r *PGNReader) readByte() (byte, error) {
	c, err := r.br.ReadByte()
	if err != nil {
		return 0, err
	}
	r.undo.ok, r.undo.offset, r.undo.line, r.undo.bol = true, r.offset, r.line, r.bol
	r.offset++
	r.bol = c == '\n'
	if c == '\n' {
		r.line++
	}
	return c, nil
}

func (r *PGNReader) unreadByte() {
	if !r.undo.ok {
		return
	}
	_ = r.br.UnreadByte()
	r.offset, r.line, r.bol, r.undo.ok = r.undo.offset, r.undo.line, r.undo.bol, false
}

func (r *PGNReader) errorf(startLine int, format string, a ...any) error {
	if startLine < 0 {
		startLine = r.line
	}
	return fmt.Errorf("%s:%d: game at line %d: %s", r.name, r.line, startLine, fmt.Sprintf(format, a...))
}

func isSymbolByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.IndexByte("_+#=:-/", c) >= 0
}

// Next returns the next game, or io.EOF when no game is left.
func (r *PGNReader) Next() (*PGNGame, error) {
	g := &PGNGame{Tags: map[string]string{}, Line: -1}
	started, inMoves := false, false
	depth := 0
	start := func() {
		if !started {
			started = true
			g.Line, g.Offset = r.line, r.offset-1
		}
	}
	beginMoves := func() error {
		if inMoves {
			return nil
		}
		inMoves = true
		fen := StartFEN
		if f, ok := g.Tags["FEN"]; ok {
			fen = f
		}
		game, err := NewGame(fen)
		if err != nil {
			return r.errorf(g.Line, "FEN tag: %v", err)
		}
		g.game = game
		return nil
	}
	finish := func(result string) (*PGNGame, error) {
		if err := beginMoves(); err != nil {
			return nil, err
		}
		if depth != 0 {
			return nil, r.errorf(g.Line, "unclosed variation")
		}
		g.Result = result
		return g, nil
	}
	for {
		c, err := r.readByte()
		if err == io.EOF {
			if !started {
				return nil, io.EOF
			}
			return finish("*")
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", r.name, r.line, err)
		}
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
		case c == '%' && r.undo.bol:
			if err := r.skipLine(); err != nil {
				return nil, err
			}
		case c == ';':
			if err := r.skipLine(); err != nil {
				return nil, err
			}
		case c == '{':
			open := r.line
			for {
				c, err := r.readByte()
				if err == io.EOF {
					return nil, fmt.Errorf("%s:%d: comment opened at line %d is never closed", r.name, r.line, open)
				}
				if err != nil {
					return nil, err
				}
				if c == '}' {
					break
				}
			}
		case c == '[':
			if inMoves {
				r.unreadByte() // the next game's tags
				return finish("*")
			}
			start()
			if err := r.readTag(g); err != nil {
				return nil, err
			}
		case c == '(':
			start()
			depth++
		case c == ')':
			if depth == 0 {
				return nil, r.errorf(g.Line, "')' without '('")
			}
			depth--
		case c == '$':
			for {
				c, err := r.readByte()
				if err != nil || c < '0' || c > '9' {
					if err == nil {
						r.unreadByte()
					}
					break
				}
			}
		case c == '!' || c == '?' || c == '.':
		case c == '*':
			start()
			if depth == 0 {
				return finish("*")
			}
		case isSymbolByte(c):
			start()
			sym := []byte{c}
			for {
				c, err := r.readByte()
				if err != nil {
					break
				}
				if !isSymbolByte(c) {
					r.unreadByte()
					break
				}
				sym = append(sym, c)
			}
			tok := string(sym)
			if depth > 0 {
				continue
			}
			switch {
			case tok == "1-0" || tok == "0-1" || tok == "1/2-1/2":
				return finish(tok)
			case isDigits(tok):
				// A move number; its dots are skipped as separate bytes.
			default:
				if err := beginMoves(); err != nil {
					return nil, err
				}
				uci, err := g.game.Position().ParseSAN(tok)
				if err != nil {
					return nil, r.errorf(g.Line, "move %d %q: %v", len(g.Moves)+1, tok, err)
				}
				_ = g.game.Push(uci)
				g.Moves = append(g.Moves, uci)
				g.SAN = append(g.SAN, tok)
			}
		default:
			return nil, r.errorf(g.Line, "unexpected character %q", c)
		}
	}
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func (r *PGNReader) skipLine() error {
	for {
		c, err := r.readByte()
		if err == io.EOF || c == '\n' {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readTag reads `Name "value"]` after the '['.
func (r *PGNReader) readTag(g *PGNGame) error {
	line := r.line
	var name, val []byte
	state := 0 // 0 before name, 1 in name, 2 before value, 3 in value, 4 after value
	for {
		c, err := r.readByte()
		if err != nil {
			return fmt.Errorf("%s:%d: tag pair is never closed", r.name, line)
		}
		switch state {
		case 0, 1:
			switch {
			case isSymbolByte(c):
				name, state = append(name, c), 1
			case (c == ' ' || c == '\t') && state == 1:
				state = 2
			case c == ' ' || c == '\t':
			case c == '"' && state == 1:
				state = 3
			default:
				return fmt.Errorf("%s:%d: malformed tag pair", r.name, line)
			}
		case 2:
			switch c {
			case ' ', '\t':
			case '"':
				state = 3
			default:
				return fmt.Errorf("%s:%d: tag %s: value must be quoted", r.name, line, name)
			}
		case 3:
			switch c {
			case '\\':
				c2, err := r.readByte()
				if err != nil {
					return fmt.Errorf("%s:%d: tag pair is never closed", r.name, line)
				}
				val = append(val, c2)
			case '"':
				state = 4
			case '\n':
				return fmt.Errorf("%s:%d: tag %s: value is not closed on its line", r.name, line, name)
			default:
				val = append(val, c)
			}
		case 4:
			switch c {
			case ' ', '\t':
			case ']':
				g.Tags[string(name)] = string(val)
				return nil
			default:
				return fmt.Errorf("%s:%d: tag %s: want ']' after the value", r.name, line, name)
			}
		}
	}
}

// ParsePGN reads every game of a PGN text.
func ParsePGN(text string) ([]*PGNGame, error) {
	r := NewPGNReader(strings.NewReader(text), "pgn")
	var out []*PGNGame
	for {
		g, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, g)
	}
}

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
	r       *PGNReader
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
	s.r = NewPGNReader(f, path)
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
				if err := s.resync(); err != nil {
					return Item{}, err
				}
				continue
			}
			return Item{}, err
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

// resync skips to the next line starting with '[' after a bad game.
func (s *PGNSource) resync() error {
	for {
		c, err := s.r.readByte()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if c == '[' && s.r.undo.bol {
			s.r.unreadByte()
			return nil
		}
	}
}

func (s *PGNSource) sample(g *PGNGame) []Item {
	hi := len(g.Moves)
	if s.opt.MaxPly > 0 {
		hi = min(hi, s.opt.MaxPly)
	}
	var plies []int
	pos := g.game.positions
	for k := s.opt.MinPly; k <= hi; k++ {
		if pos[k].NumLegalMoves() > 0 {
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
		it := Item{FEN: pos[k].FEN(), StartFEN: pos[0].FEN(), History: append([]string(nil), g.Moves[:k]...),
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
	s.r = NewPGNReader(s.f, s.path)
	s.r.offset, s.r.line = offset, line+1
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
