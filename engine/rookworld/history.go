package rookworld

import (
	"fmt"

	"github.com/rookscript/rookscript/engine/chess"
)

// HistoryFor returns the game behind p, the prompt Mix.Prompt drew from item
// it, when the rules' answer to p depends on it: the FEN the game started
// from and the moves that led to the prompt's position, for an Input's
// StartFEN and History. An A: prompt carries the FEN, the move and at most
// ten recent moves; a fivefold repetition needs more (its first and fifth
// occurrences are at least sixteen plies apart), so without its game the
// rules see a draw by repetition as a game that goes on. ok is true only for
// such prompts, a handful in thousands: for every other prompt the bare FEN
// gives the same answer, and the prompt carries nothing more. Items without a
// full history (FEN/EPD files, training text), P: prompts and a history that
// does not replay (the scorer reports the bare prompt's own error, if any)
// give ok false.
func HistoryFor(it Item, p Prompt) (startFEN string, history []string, ok bool) {
	if p.Task != "A" || it.StartFEN == "" || p.FEN != it.FEN {
		return "", nil, false
	}
	if pos, err := chess.ParseFEN(p.FEN); err == nil && pos.HalfmoveClock()+1 < minFivefoldPlies {
		return "", nil, false // too few reversible plies for a fifth occurrence: no replay needed
	}
	with, err := EnvStepAfter(it.StartFEN, it.History, it.FEN, p.Move)
	if err != nil {
		return "", nil, false
	}
	if bare, err := EnvStep(p.FEN, p.Move); err == nil && bare == with {
		return "", nil, false
	}
	return it.StartFEN, append([]string(nil), it.History...), true
}

// minFivefoldPlies is the fewest plies without an irreversible move in which
// a position can occur five times (each return takes at least four plies).
// The halfmove clock is at least the plies since the last irreversible move,
// so a step whose clock stays below this cannot meet a fivefold repetition.
const minFivefoldPlies = 16

// HistoryError is a game that does not lead to the position it is given for
// (EnvStepAfter's history, an Input's StartFEN and History): the prompt and
// the game behind it disagree.
type HistoryError struct {
	StartFEN string // where the game starts
	Reached  string // the position its moves lead to
	Want     string // the position it was given for
}

func (e *HistoryError) Error() string {
	return fmt.Sprintf("the history from %s leads to %s, not to %s", e.StartFEN, e.Reached, e.Want)
}
