package chess

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	nc "github.com/notnil/chess"
)

// Side-to-move values as they appear in a FEN.
const (
	White = "w"
	Black = "b"
)

// StartFEN is the standard initial position.
const StartFEN = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"

// Move errors. Play, ParseSAN and Game.Push wrap them, so callers can tell a move the
// model could not even spell from one the rules forbid.
var (
	ErrMalformedMove = errors.New("malformed UCI move")
	ErrIllegalMove   = errors.New("illegal move")
)

// Position is an immutable chess position. It uses notnil/chess for move
// generation and applies python-chess conventions on top of it: castling
// rights are cleaned (a right survives only with king and rook on their
// original squares) and an en-passant square is written to the FEN only when
// an en-passant capture is legal.
//
// Like python-chess's Board(fen), it accepts some positions that cannot arise
// in a legal game, because the public ArbiterSim data contains them (its
// generator pushed moves without a legality check): a side without a king
// (never in check, so never checkmated) and a side not to move that is in
// check (its king may then be captured). It refuses what neither library
// handles alike: more than one king per side and pawns on the first or last
// rank.
type Position struct {
	np      *nc.Position
	sq      [64]byte // FEN letter per square, a1=0 .. h8=63; 0 = empty
	white   bool     // white to move
	castle  string   // cleaned castling field, "KQkq" order or "-"
	ep      int      // en-passant target used for move generation, -1 if none
	half    int
	full    int
	legal   []*nc.Move
	uci     []string // legal moves in UCI, sorted
	inCheck bool
	legalEP bool
}

// ParseFEN parses and validates a FEN. The halfmove and fullmove fields may be
// omitted (EPD style); they default to 0 and 1. Errors are *FENError, naming the offending
// field.
func ParseFEN(fen string) (p *Position, err error) {
	defer func() {
		// notnil/chess is not written for hostile input; a panic there must not
		// take down a training run, so it becomes an error naming the FEN.
		if r := recover(); r != nil {
			p, err = nil, &FENError{FEN: fen, Reason: fmt.Sprintf("rejected by move generator: %v", r)}
		}
	}()
	f := strings.Fields(fen)
	if len(f) < 4 || len(f) > 6 {
		return nil, &FENError{FEN: fen, Reason: fmt.Sprintf("want 4 to 6 space-separated fields, got %d", len(f))}
	}
	p = &Position{ep: -1, full: 1}
	if err := p.parseBoard(f[0]); err != nil {
		return nil, &FENError{FEN: fen, Field: "board", Reason: err.Error()}
	}
	switch f[1] {
	case "w":
		p.white = true
	case "b":
	default:
		return nil, &FENError{FEN: fen, Field: "side-to-move", Reason: fmt.Sprintf("want w or b, got %q", f[1])}
	}
	if err := p.parseCastling(f[2]); err != nil {
		return nil, &FENError{FEN: fen, Field: "castling", Reason: err.Error()}
	}
	if err := p.parseEP(f[3]); err != nil {
		return nil, &FENError{FEN: fen, Field: "en-passant", Reason: err.Error()}
	}
	if len(f) >= 5 {
		n, err := strconv.Atoi(f[4])
		if err != nil || n < 0 {
			return nil, &FENError{FEN: fen, Field: "halfmove", Reason: fmt.Sprintf("want a non-negative integer, got %q", f[4])}
		}
		p.half = n
	}
	if len(f) == 6 {
		n, err := strconv.Atoi(f[5])
		if err != nil || n < 0 {
			return nil, &FENError{FEN: fen, Field: "fullmove", Reason: fmt.Sprintf("want a non-negative integer, got %q", f[5])}
		}
		p.full = max(n, 1) // python-chess clamps 0 to 1
	}
	if err := p.finish(); err != nil {
		return nil, &FENError{FEN: fen, Err: err}
	}
	return p, nil
}

// MustParseFEN is ParseFEN for FENs known to be valid (tests, constants).
func MustParseFEN(fen string) *Position {
	p, err := ParseFEN(fen)
	if err != nil {
		panic(err)
	}
	return p
}

func (p *Position) parseBoard(s string) error {
	ranks := strings.Split(s, "/")
	if len(ranks) != 8 {
		return fmt.Errorf("want 8 ranks separated by '/', got %d", len(ranks))
	}
	kings := map[byte]int{}
	for i, r := range ranks {
		rank := 7 - i
		file := 0
		prevDigit := false
		for j := 0; j < len(r); j++ {
			c := r[j]
			switch {
			case c >= '1' && c <= '8':
				if prevDigit {
					return fmt.Errorf("rank %d: two digits in a row in %q", rank+1, r)
				}
				prevDigit = true
				file += int(c - '0')
			case strings.IndexByte("pnbrqkPNBRQK", c) >= 0:
				prevDigit = false
				if file >= 8 {
					return fmt.Errorf("rank %d: more than 8 squares in %q", rank+1, r)
				}
				if (c == 'p' || c == 'P') && (rank == 0 || rank == 7) {
					return fmt.Errorf("pawn on rank %d", rank+1)
				}
				if c == 'k' || c == 'K' {
					kings[c]++
				}
				p.sq[rank*8+file] = c
				file++
			default:
				return fmt.Errorf("rank %d: unexpected character %q", rank+1, c)
			}
		}
		if file != 8 {
			return fmt.Errorf("rank %d: %q covers %d squares, want 8", rank+1, r, file)
		}
	}
	if kings['K'] > 1 || kings['k'] > 1 {
		return fmt.Errorf("more than one king per side: %d white, %d black", kings['K'], kings['k'])
	}
	return nil
}

func (p *Position) parseCastling(s string) error {
	if s == "-" {
		p.castle = "-"
		return nil
	}
	seen := map[rune]bool{}
	for _, c := range s {
		if !strings.ContainsRune("KQkq", c) || seen[c] {
			return fmt.Errorf("want '-' or a subset of KQkq, got %q", s)
		}
		seen[c] = true
	}
	p.castle = cleanCastling(s, &p.sq)
	return nil
}

// cleanCastling keeps only the rights whose king and rook still stand on their
// original squares, in canonical KQkq order (python-chess clean_castling_rights).
func cleanCastling(rights string, sq *[64]byte) string {
	var b strings.Builder
	for _, c := range []struct {
		r          byte
		king, rook int
		k, R       byte
	}{{'K', 4, 7, 'K', 'R'}, {'Q', 4, 0, 'K', 'R'}, {'k', 60, 63, 'k', 'r'}, {'q', 60, 56, 'k', 'r'}} {
		if strings.IndexByte(rights, c.r) >= 0 && sq[c.king] == c.k && sq[c.rook] == c.R {
			b.WriteByte(c.r)
		}
	}
	if b.Len() == 0 {
		return "-"
	}
	return b.String()
}

func (p *Position) parseEP(s string) error {
	if s == "-" {
		return nil
	}
	sq, ok := squareIndex(s)
	if !ok {
		return fmt.Errorf("want '-' or a square, got %q", s)
	}
	p.ep = plausibleEP(&p.sq, sq, p.white)
	return nil
}

// plausibleEP returns sq when a pawn of the side not to move can just have
// double-stepped through it, else -1. Like python-chess, any square is
// accepted in a FEN, but only a plausible one can yield an en-passant
// capture; notnil would otherwise invent captures on it.
func plausibleEP(b *[64]byte, sq int, whiteToMove bool) int {
	want, pawn, from, front := 5, byte('p'), sq+8, sq-8
	if !whiteToMove {
		want, pawn, from, front = 2, 'P', sq-8, sq+8
	}
	if sq/8 != want || b[sq] != 0 || b[from] != 0 || b[front] != pawn {
		return -1
	}
	return sq
}

// engineFEN is the FEN handed to notnil: cleaned castling, plausible ep only.
func (p *Position) engineFEN() string {
	ep := "-"
	if p.ep >= 0 {
		ep = squareName(p.ep)
	}
	return fmt.Sprintf("%s %s %s %s %d %d", p.boardField(), p.Turn(), p.castle, ep, p.half, p.full)
}

// finish builds notnil's position from the validated fields and caches the
// derived ones. notnil is always fed a fresh FEN: its incremental update keeps
// a stale king square when a king is captured.
func (p *Position) finish() error {
	var np nc.Position
	if err := np.UnmarshalText([]byte(p.engineFEN())); err != nil {
		return err
	}
	p.np = &np
	p.legal = p.np.ValidMoves()
	p.uci = make([]string, len(p.legal))
	for i, m := range p.legal {
		p.uci[i] = m.String()
		if m.HasTag(nc.EnPassant) {
			p.legalEP = true
		}
	}
	sort.Strings(p.uci)
	p.inCheck = p.attacked(p.kingSquare(p.white), !p.white)
	return nil
}

// FEN returns the position in python-chess's FEN conventions.
func (p *Position) FEN() string {
	ep := "-"
	if p.legalEP {
		ep = squareName(p.ep)
	}
	return fmt.Sprintf("%s %s %s %s %d %d", p.boardField(), p.Turn(), p.castle, ep, p.half, p.full)
}

// String implements fmt.Stringer with the FEN.
func (p *Position) String() string { return p.FEN() }

// Turn is the side to move, White or Black.
func (p *Position) Turn() string {
	if p.white {
		return White
	}
	return Black
}

// InCheck reports whether the side to move is in check.
func (p *Position) InCheck() bool { return p.inCheck }

// HalfmoveClock is the number of plies since the last capture or pawn move.
func (p *Position) HalfmoveClock() int { return p.half }

// FullmoveNumber starts at 1 and increases after each black move.
func (p *Position) FullmoveNumber() int { return p.full }

// LegalMoves lists the legal moves in UCI notation, sorted.
func (p *Position) LegalMoves() []string { return append([]string(nil), p.uci...) }

// NumLegalMoves is len(LegalMoves()) without the copy.
func (p *Position) NumLegalMoves() int { return len(p.uci) }

// IsLegal reports whether uci is a legal move here.
func (p *Position) IsLegal(uci string) bool {
	i := sort.SearchStrings(p.uci, uci)
	return i < len(p.uci) && p.uci[i] == uci
}

// HasLegalEnPassant reports whether an en-passant capture is legal.
func (p *Position) HasLegalEnPassant() bool { return p.legalEP }

// Valid reports why the position could not arise in a legal game, as a subset
// of python-chess's is_valid: each side has exactly one king, at most 16
// pieces and 8 pawns, and the side not to move is not in check. The engine is
// only given valid positions. The error is an *InvalidError.
func (p *Position) Valid() error {
	var kings, pieces, pawns [2]int
	for _, c := range p.sq {
		if c == 0 {
			continue
		}
		side := 0
		if c >= 'a' {
			side = 1
		}
		pieces[side]++
		switch c | 0x20 {
		case 'k':
			kings[side]++
		case 'p':
			pawns[side]++
		}
	}
	for side, name := range []string{"white", "black"} {
		switch {
		case kings[side] != 1:
			return &InvalidError{Side: name, Piece: "kings", Count: kings[side]}
		case pieces[side] > 16:
			return &InvalidError{Side: name, Piece: "pieces", Count: pieces[side]}
		case pawns[side] > 8:
			return &InvalidError{Side: name, Piece: "pawns", Count: pawns[side]}
		}
	}
	if p.attacked(p.kingSquare(!p.white), p.white) {
		side := "white"
		if p.white {
			side = "black"
		}
		return &InvalidError{Side: side}
	}
	return nil
}

// PieceAt returns the FEN letter on a square such as "e4", or "" when empty
// or when the square name is invalid.
func (p *Position) PieceAt(square string) string {
	i, ok := squareIndex(square)
	if !ok || p.sq[i] == 0 {
		return ""
	}
	return string(p.sq[i])
}

// ValidUCI reports whether s is spelled like a UCI move: two distinct squares
// and an optional lowercase promotion piece (q, r, b, n). It says nothing about
// legality.
func ValidUCI(s string) bool {
	if len(s) != 4 && len(s) != 5 {
		return false
	}
	a, ok1 := squareIndex(s[0:2])
	b, ok2 := squareIndex(s[2:4])
	if !ok1 || !ok2 || a == b {
		return false
	}
	return len(s) == 4 || strings.IndexByte("qrbn", s[4]) >= 0
}

// Play returns the position after the UCI move. Errors wrap ErrMalformedMove
// or ErrIllegalMove; p itself never changes.
func (p *Position) Play(uci string) (*Position, error) {
	m := p.find(uci)
	if m == nil {
		if !ValidUCI(uci) {
			return nil, fmt.Errorf("%w: %q", ErrMalformedMove, uci)
		}
		return nil, fmt.Errorf("%w: %s in %s", ErrIllegalMove, uci, p.FEN())
	}
	return p.apply(m), nil
}

func (p *Position) find(uci string) *nc.Move {
	if !p.IsLegal(uci) {
		return nil
	}
	for _, m := range p.legal {
		if m.String() == uci {
			return m
		}
	}
	return nil
}

func (p *Position) apply(m *nc.Move) *Position {
	np := p.np.Update(m)
	q := &Position{white: !p.white, half: np.HalfMoveClock(), full: p.full, ep: -1}
	if !p.white {
		q.full++
	}
	b := np.Board()
	for i := 0; i < 64; i++ {
		q.sq[i] = pieceLetter(b.Piece(nc.Square(i)))
	}
	q.castle = cleanCastling(string(np.CastleRights()), &q.sq)
	if ep := np.EnPassantSquare(); ep != nc.NoSquare {
		q.ep = plausibleEP(&q.sq, int(ep), q.white)
	}
	if err := q.finish(); err != nil {
		// The fields come from a position notnil itself produced.
		panic(fmt.Sprintf("chess: re-reading %s: %v", q.engineFEN(), err))
	}
	return q
}

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

// isIrreversible mirrors python-chess Board.is_irreversible for a legal move:
// pawn moves and captures, moves that lose castling rights, and any move made
// while an en-passant capture was available.
func (p *Position) isIrreversible(uci string, next *Position) bool {
	from, _ := squareIndex(uci[0:2])
	to, _ := squareIndex(uci[2:4])
	if p.sq[from] == 'P' || p.sq[from] == 'p' || p.sq[to] != 0 {
		return true
	}
	return p.castle != next.castle || p.legalEP
}

// transpositionKey identifies a position for repetition: placement, side to
// move, castling rights and the en-passant square only when capturable.
func (p *Position) transpositionKey() string {
	f := p.FEN()
	// Drop the two clocks.
	for i := 0; i < 2; i++ {
		f = f[:strings.LastIndexByte(f, ' ')]
	}
	return f
}

func (p *Position) boardField() string {
	var b strings.Builder
	for rank := 7; rank >= 0; rank-- {
		empty := 0
		for file := 0; file < 8; file++ {
			c := p.sq[rank*8+file]
			if c == 0 {
				empty++
				continue
			}
			if empty > 0 {
				b.WriteByte(byte('0' + empty))
				empty = 0
			}
			b.WriteByte(c)
		}
		if empty > 0 {
			b.WriteByte(byte('0' + empty))
		}
		if rank > 0 {
			b.WriteByte('/')
		}
	}
	return b.String()
}

func (p *Position) kingSquare(white bool) int {
	k := byte('k')
	if white {
		k = 'K'
	}
	for i, c := range p.sq {
		if c == k {
			return i
		}
	}
	return -1
}

// attacked reports whether square sq is attacked by the given side.
func (p *Position) attacked(sq int, byWhite bool) bool {
	if sq < 0 {
		return false
	}
	own := func(c byte, letter byte) bool {
		if byWhite {
			return c == letter-'a'+'A'
		}
		return c == letter
	}
	r, f := sq/8, sq%8
	at := func(dr, df int) (byte, bool) {
		rr, ff := r+dr, f+df
		if rr < 0 || rr > 7 || ff < 0 || ff > 7 {
			return 0, false
		}
		return p.sq[rr*8+ff], true
	}
	for _, d := range [][2]int{{1, 2}, {2, 1}, {-1, 2}, {-2, 1}, {1, -2}, {2, -1}, {-1, -2}, {-2, -1}} {
		if c, ok := at(d[0], d[1]); ok && own(c, 'n') {
			return true
		}
	}
	for dr := -1; dr <= 1; dr++ {
		for df := -1; df <= 1; df++ {
			if c, ok := at(dr, df); ok && (dr != 0 || df != 0) && own(c, 'k') {
				return true
			}
		}
	}
	pawnDir := -1 // a white pawn attacks upwards, so it sits one rank below
	if !byWhite {
		pawnDir = 1
	}
	for _, df := range []int{-1, 1} {
		if c, ok := at(pawnDir, df); ok && own(c, 'p') {
			return true
		}
	}
	for _, d := range [][2]int{{1, 0}, {-1, 0}, {0, 1}, {0, -1}, {1, 1}, {1, -1}, {-1, 1}, {-1, -1}} {
		diag := d[0] != 0 && d[1] != 0
		for k := 1; k < 8; k++ {
			c, ok := at(d[0]*k, d[1]*k)
			if !ok {
				break
			}
			if c == 0 {
				continue
			}
			if own(c, 'q') || (diag && own(c, 'b')) || (!diag && own(c, 'r')) {
				return true
			}
			break
		}
	}
	return false
}

// insufficientMaterial follows python-chess: neither side can ever deliver
// mate, even with the opponent's help.
func (p *Position) insufficientMaterial() bool {
	return p.hasInsufficient(true) && p.hasInsufficient(false)
}

func (p *Position) hasInsufficient(white bool) bool {
	var ours, theirsNonKingQueen, knights, bishops, pawns, ourKnights, ourBishops, ourHeavy int
	lightBishops, darkBishops := 0, 0
	for i, c := range p.sq {
		if c == 0 {
			continue
		}
		isWhite := c >= 'A' && c <= 'Z'
		lower := c | 0x20
		switch lower {
		case 'n':
			knights++
		case 'b':
			bishops++
			if (i/8+i%8)%2 == 1 {
				lightBishops++
			} else {
				darkBishops++
			}
		case 'p':
			pawns++
		}
		if isWhite == white {
			ours++
			switch lower {
			case 'p', 'r', 'q':
				ourHeavy++
			case 'n':
				ourKnights++
			case 'b':
				ourBishops++
			}
		} else if lower != 'k' && lower != 'q' {
			theirsNonKingQueen++
		}
	}
	if ourHeavy > 0 {
		return false
	}
	if ourKnights > 0 {
		return ours <= 2 && theirsNonKingQueen == 0
	}
	if ourBishops > 0 {
		sameColor := lightBishops == 0 || darkBishops == 0
		return sameColor && pawns == 0 && knights == 0
	}
	return true
}

func pieceLetter(pc nc.Piece) byte {
	if pc == nc.NoPiece {
		return 0
	}
	c := "?kqrbnp"[pc.Type()]
	if pc.Color() == nc.White {
		c -= 'a' - 'A'
	}
	return c
}

func squareIndex(s string) (int, bool) {
	if len(s) != 2 || s[0] < 'a' || s[0] > 'h' || s[1] < '1' || s[1] > '8' {
		return 0, false
	}
	return int(s[1]-'1')*8 + int(s[0]-'a'), true
}

func squareName(i int) string {
	return string([]byte{byte('a' + i%8), byte('1' + i/8)})
}
