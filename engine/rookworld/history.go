package rookworld

import (
	"sync"

	"github.com/rookscript/rookscript/engine/chess"
)

// Histories remembers the games behind the A: prompts whose rules' answer
// depends on the game's history, so that a scorer handed only a prompt's text
// (all a rollout keeps) judges it as the game went. An A: prompt carries the
// FEN, the move and at most ten recent moves; a fivefold repetition needs more
// (its first and fifth occurrences are at least sixteen plies apart), so
// without its game the rules see a draw by repetition as a game that goes on.
// Only such prompts are kept, a handful in thousands, so the book needs no
// bound; for every other prompt the bare FEN gives the same answer and nothing
// is stored. A Histories is safe for concurrent use; the zero value is not
// (NewHistories).
type Histories struct {
	mu sync.Mutex
	m  map[string]gameHistory
}

type gameHistory struct {
	start string
	moves []string
}

// NewHistories returns an empty book.
func NewHistories() *Histories { return &Histories{m: map[string]gameHistory{}} }

// Add notes the history of item it for p, the prompt Mix.Prompt drew from it:
// kept when p is an A: prompt whose answer with the item's full history
// (it.StartFEN set: PGN, generator) differs from its answer from the bare FEN,
// forgotten otherwise. One prompt text can arise from two games; the latest
// Add decides how it is judged. Items without a full history (FEN/EPD files,
// training text) and P: prompts change nothing.
func (h *Histories) Add(it Item, p Prompt) {
	if p.Task != "A" || it.StartFEN == "" || p.FEN != it.FEN {
		return
	}
	if pos, err := chess.ParseFEN(p.FEN); err == nil && pos.HalfmoveClock()+1 < minFivefoldPlies {
		h.forget(p.Prompt) // too few reversible plies for a fifth occurrence: no replay needed
		return
	}
	with, err := EnvStepAfter(it.StartFEN, it.History, it.FEN, p.Move)
	if err != nil {
		return // the scorer reports the bare prompt's own error, if any
	}
	if bare, err := EnvStep(p.FEN, p.Move); err == nil && bare == with {
		h.forget(p.Prompt)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.m[p.Prompt] = gameHistory{it.StartFEN, append([]string(nil), it.History...)}
}

// minFivefoldPlies is the fewest plies without an irreversible move in which
// a position can occur five times (each return takes at least four plies).
// The halfmove clock is at least the plies since the last irreversible move,
// so a step whose clock stays below this cannot meet a fivefold repetition.
const minFivefoldPlies = 16

func (h *Histories) forget(prompt string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, prompt)
}

// Lookup returns the game behind an A: prompt, if Add kept one: the FEN it
// started from and the moves that led to the prompt's position.
func (h *Histories) Lookup(prompt string) (startFEN string, history []string, ok bool) {
	if h == nil {
		return "", nil, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	g, ok := h.m[prompt]
	return g.start, g.moves, ok
}

// Len is the number of prompts kept.
func (h *Histories) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.m)
}
