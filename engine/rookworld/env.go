package rookworld

import (
	"fmt"

	"github.com/rookscript/rookscript/engine/chess"
)

// Environment rewards, exactly the values of the public RookWorld data.
const (
	RewardLegal   = 0.001
	RewardWin     = 1.0
	RewardDraw    = 0.5
	RewardIllegal = -1.0
)

// EnvResult is the environment task's answer to (position, move).
type EnvResult struct {
	PrevFEN     string            `json:"prev_fen"`
	Move        string            `json:"move"`
	NewFEN      string            `json:"new_fen"`
	Reward      float64           `json:"reward"`
	Terminated  bool              `json:"terminated"`
	Truncated   bool              `json:"truncated"`
	Legal       bool              `json:"legal"`
	Termination chess.Termination `json:"termination,omitempty"`
}

// Completion renders the A: target: new_fen+reward+terminated+truncated.
func (r EnvResult) Completion() string {
	return fmt.Sprintf("%s+%s+%s+%s", r.NewFEN, FormatReward(r.Reward), flag(r.Terminated), flag(r.Truncated))
}

// Step is the environment transition on game g: a legal move is played and
// judged; an illegal or malformed one leaves the game unchanged and yields
// reward -1.0, truncated=1, and terminated = whether the unchanged position is
// already over.
func Step(g *chess.Game, uci string) EnvResult {
	prev := g.Position()
	r := EnvResult{PrevFEN: prev.FEN(), Move: uci}
	if err := g.Push(uci); err != nil {
		r.NewFEN = r.PrevFEN
		r.Reward = RewardIllegal
		r.Truncated = true
		o := g.Outcome()
		r.Terminated, r.Termination = o.Over(), o.Termination
		return r
	}
	r.Legal = true
	r.NewFEN = g.Position().FEN()
	o := g.Outcome()
	r.Terminated, r.Termination = o.Over(), o.Termination
	switch {
	case !o.Over():
		r.Reward = RewardLegal
	case o.Winner != "":
		r.Reward = RewardWin // only the mover can have just won
	default:
		r.Reward = RewardDraw
	}
	return r
}

// EnvStep judges a move from a bare FEN (no history, so fivefold repetition
// cannot be seen). The error is for an invalid FEN or a position that cannot
// arise in a legal game (ValidatePosition), which has no right answer to
// train on. An illegal move in a legal position is part of the result.
func EnvStep(fen, uci string) (EnvResult, error) {
	p, err := parseLegal(fen)
	if err != nil {
		return EnvResult{}, err
	}
	return Step(chess.NewGameFrom(p), uci), nil
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
