package chess

import "errors"

// Termination names why a game is over; the empty string means it is not.
type Termination string

// The automatic game-over rules of python-chess's Board.outcome() (no claims).
const (
	NotOver              Termination = ""
	Checkmate            Termination = "checkmate"
	Stalemate            Termination = "stalemate"
	InsufficientMaterial Termination = "insufficient_material"
	SeventyFiveMoves     Termination = "seventyfive_moves"
	FivefoldRepetition   Termination = "fivefold_repetition"
)

// Outcome of a position or game. Winner is White, Black, or "" for a draw or
// a game still in progress.
type Outcome struct {
	Termination Termination `json:"termination"`
	Winner      string      `json:"winner,omitempty"`
}

// Over reports whether the game has ended.
func (o Outcome) Over() bool { return o.Termination != NotOver }

// Outcome applies every rule that needs no history, in python-chess's order:
// checkmate, insufficient material, stalemate, the 75-move rule. Fivefold
// repetition needs the game's history; see Game.Outcome.
func (p *Position) Outcome() Outcome {
	if p.inCheck && len(p.uci) == 0 {
		if p.white {
			return Outcome{Checkmate, Black}
		}
		return Outcome{Checkmate, White}
	}
	if p.insufficientMaterial() {
		return Outcome{Termination: InsufficientMaterial}
	}
	if len(p.uci) == 0 {
		return Outcome{Termination: Stalemate}
	}
	if p.half >= 150 {
		return Outcome{Termination: SeventyFiveMoves}
	}
	return Outcome{}
}

// Game is a position with the history needed for repetition detection.
type Game struct {
	positions    []*Position
	moves        []string
	irreversible []bool // irreversible[i] is true when moves[i] was irreversible
}

// NewGame starts a game from a FEN (StartFEN for the standard start).
func NewGame(fen string) (*Game, error) {
	p, err := ParseFEN(fen)
	if err != nil {
		return nil, err
	}
	return &Game{positions: []*Position{p}}, nil
}

// ReplayGame starts from fen and plays the UCI moves; a move that cannot be played is a
// *PlyError naming its ply.
func ReplayGame(fen string, moves []string) (*Game, error) {
	g, err := NewGame(fen)
	if err != nil {
		return nil, err
	}
	for i, m := range moves {
		if err := g.Push(m); err != nil {
			return nil, &PlyError{Ply: i + 1, Err: err}
		}
	}
	return g, nil
}

// NewGameFrom starts a game at a parsed position.
func NewGameFrom(p *Position) *Game { return &Game{positions: []*Position{p}} }

// Position is the current position.
func (g *Game) Position() *Position { return g.positions[len(g.positions)-1] }

// PositionAt is the position after ply moves (0: the start); it panics outside 0..Ply().
func (g *Game) PositionAt(ply int) *Position { return g.positions[ply] }

// Moves returns the UCI moves played so far.
func (g *Game) Moves() []string { return append([]string(nil), g.moves...) }

// StartFEN is the FEN the game started from.
func (g *Game) StartFEN() string { return g.positions[0].FEN() }

// Ply is the number of moves played.
func (g *Game) Ply() int { return len(g.moves) }

// Push plays a legal move; the game is unchanged on error.
func (g *Game) Push(uci string) error {
	p := g.Position()
	next, err := p.Play(uci)
	if err != nil {
		return err
	}
	g.irreversible = append(g.irreversible, p.isIrreversible(uci, next))
	g.positions = append(g.positions, next)
	g.moves = append(g.moves, uci)
	return nil
}

// Clone returns an independent copy (positions are immutable and shared).
func (g *Game) Clone() *Game {
	return &Game{
		positions:    append([]*Position(nil), g.positions...),
		moves:        append([]string(nil), g.moves...),
		irreversible: append([]bool(nil), g.irreversible...),
	}
}

// Outcome is Position().Outcome() plus fivefold repetition.
func (g *Game) Outcome() Outcome {
	if o := g.Position().Outcome(); o.Over() {
		return o
	}
	if g.Repetitions() >= 5 {
		return Outcome{Termination: FivefoldRepetition}
	}
	return Outcome{}
}

// Repetitions is how many times the current position has occurred in the
// game, itself included, by FIDE's rule: the same placement, side to move,
// castling rights and en-passant captures. It walks back like python-chess's
// is_repetition and stops at the first irreversible move, before which no
// position can recur. Positions before the game's start are unknown.
func (g *Game) Repetitions() int {
	key := g.Position().transpositionKey()
	n := 1
	for i := len(g.moves) - 1; i >= 0; i-- {
		if g.irreversible[i] {
			break
		}
		if g.positions[i].transpositionKey() == key {
			n++
		}
	}
	return n
}

// IsMoveError reports whether err is a malformed or illegal move error.
func IsMoveError(err error) bool {
	return errors.Is(err, ErrMalformedMove) || errors.Is(err, ErrIllegalMove)
}
