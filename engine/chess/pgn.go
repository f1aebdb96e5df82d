package chess

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

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
// token, at the next game's tags or at end of input. Errors are *PGNError, naming the
// input, the line and the game's first line.
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

// NewPGNReaderAt reads PGN from r, whose first byte is at byte offset and on
// the 1-based line of the named input (a reader resumed mid-file).
func NewPGNReaderAt(r io.Reader, name string, offset int64, line int) *PGNReader {
	pr := NewPGNReader(r, name)
	pr.offset, pr.line = offset, line
	return pr
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

// gameError is a *PGNError in the game that starts at startLine (<0: not started, r.line).
func (r *PGNReader) gameError(startLine int, reason string, err error) error {
	if startLine < 0 {
		startLine = r.line
	}
	return &PGNError{File: r.name, Line: r.line, Game: startLine, Reason: reason, Err: err}
}

func isSymbolByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.IndexByte("_+#=:-/", c) >= 0
}

// Next returns the next game, or io.EOF when no game is left.
func (r *PGNReader) Next() (*PGNGame, error) {
	p := &pgnParse{r: r, g: &PGNGame{Tags: map[string]string{}, Line: -1}}
	for {
		c, err := r.readByte()
		if err == io.EOF {
			if !p.started {
				return nil, io.EOF
			}
			return p.finish("*")
		}
		if err != nil {
			return nil, &PGNError{File: r.name, Line: r.line, Err: err}
		}
		result, end, err := p.step(c)
		if err != nil {
			return nil, err
		}
		if end {
			return p.finish(result)
		}
	}
}

// pgnParse is the state of the game Next is reading.
type pgnParse struct {
	r       *PGNReader
	g       *PGNGame
	started bool // a token of the game has been read
	inMoves bool // past the tag pairs; g.game is set
	depth   int  // nesting of variations, whose moves are skipped
}

// step consumes the token that starts with byte c; end reports that the game ended with result.
func (p *pgnParse) step(c byte) (result string, end bool, err error) {
	r := p.r
	switch {
	case c == ' ' || c == '\t' || c == '\r' || c == '\n':
	case c == '%' && r.undo.bol, c == ';':
		return "", false, r.skipLine()
	case c == '{':
		return "", false, r.skipComment()
	case c == '[':
		if p.inMoves {
			r.unreadByte() // the next game's tags
			return "*", true, nil
		}
		p.start()
		return "", false, r.readTag(p.g)
	case c == '(':
		p.start()
		p.depth++
	case c == ')':
		if p.depth == 0 {
			return "", false, r.gameError(p.g.Line, "')' without '('", nil)
		}
		p.depth--
	case c == '$':
		r.skipNAG()
	case c == '!' || c == '?' || c == '.':
	case c == '*':
		p.start()
		return "*", p.depth == 0, nil
	case isSymbolByte(c):
		p.start()
		tok := r.readSymbol(c)
		if p.depth > 0 {
			return "", false, nil
		}
		return p.symbol(tok)
	default:
		return "", false, r.gameError(p.g.Line, fmt.Sprintf("unexpected character %q", c), nil)
	}
	return "", false, nil
}

// symbol handles a symbol token outside variations: a result, a move number or a move.
func (p *pgnParse) symbol(tok string) (result string, end bool, err error) {
	switch {
	case tok == "1-0" || tok == "0-1" || tok == "1/2-1/2":
		return tok, true, nil
	case isDigits(tok):
		return "", false, nil // a move number; its dots are skipped as separate bytes
	}
	if err := p.beginMoves(); err != nil {
		return "", false, err
	}
	g := p.g
	uci, err := g.game.Position().ParseSAN(tok)
	if err != nil {
		return "", false, p.r.gameError(g.Line, fmt.Sprintf("move %d %q", len(g.Moves)+1, tok), err)
	}
	_ = g.game.Push(uci)
	g.Moves = append(g.Moves, uci)
	g.SAN = append(g.SAN, tok)
	return "", false, nil
}

// start records where the game's first token is.
func (p *pgnParse) start() {
	if !p.started {
		p.started = true
		p.g.Line, p.g.Offset = p.r.line, p.r.offset-1
	}
}

// beginMoves ends the tag section: the game starts at the FEN tag or the standard position.
func (p *pgnParse) beginMoves() error {
	if p.inMoves {
		return nil
	}
	p.inMoves = true
	fen := StartFEN
	if f, ok := p.g.Tags["FEN"]; ok {
		fen = f
	}
	game, err := NewGame(fen)
	if err != nil {
		return p.r.gameError(p.g.Line, "FEN tag", err)
	}
	p.g.game = game
	return nil
}

func (p *pgnParse) finish(result string) (*PGNGame, error) {
	if err := p.beginMoves(); err != nil {
		return nil, err
	}
	if p.depth != 0 {
		return nil, p.r.gameError(p.g.Line, "unclosed variation", nil)
	}
	p.g.Result = result
	return p.g, nil
}

// skipComment skips a brace comment after its '{'.
func (r *PGNReader) skipComment() error {
	open := r.line
	for {
		c, err := r.readByte()
		if err == io.EOF {
			return &PGNError{File: r.name, Line: r.line, Reason: fmt.Sprintf("comment opened at line %d is never closed", open)}
		}
		if err != nil {
			return err
		}
		if c == '}' {
			return nil
		}
	}
}

// skipNAG skips the digits of a numeric annotation glyph after its '$'.
func (r *PGNReader) skipNAG() {
	for {
		c, err := r.readByte()
		if err != nil {
			return
		}
		if c < '0' || c > '9' {
			r.unreadByte()
			return
		}
	}
}

// readSymbol reads the rest of a symbol token that starts with c.
func (r *PGNReader) readSymbol(c byte) string {
	sym := []byte{c}
	for {
		c, err := r.readByte()
		if err != nil {
			return string(sym)
		}
		if !isSymbolByte(c) {
			r.unreadByte()
			return string(sym)
		}
		sym = append(sym, c)
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

// SkipToNextGame discards input up to the next line that starts with '[' (the
// next game's tags), so a reader can go on after a game it could not parse.
func (r *PGNReader) SkipToNextGame() error {
	for {
		c, err := r.readByte()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if c == '[' && r.undo.bol {
			r.unreadByte()
			return nil
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
			return &PGNError{File: r.name, Line: line, Reason: "tag pair is never closed"}
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
				return &PGNError{File: r.name, Line: line, Reason: "malformed tag pair"}
			}
		case 2:
			switch c {
			case ' ', '\t':
			case '"':
				state = 3
			default:
				return &PGNError{File: r.name, Line: line, Tag: string(name), Reason: "value must be quoted"}
			}
		case 3:
			switch c {
			case '\\':
				c2, err := r.readByte()
				if err != nil {
					return &PGNError{File: r.name, Line: line, Reason: "tag pair is never closed"}
				}
				val = append(val, c2)
			case '"':
				state = 4
			case '\n':
				return &PGNError{File: r.name, Line: line, Tag: string(name), Reason: "value is not closed on its line"}
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
				return &PGNError{File: r.name, Line: line, Tag: string(name), Reason: "want ']' after the value"}
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
