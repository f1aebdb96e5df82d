package rookworld

import (
	"fmt"
	"strings"

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

// FENMatches reports whether fen is the position after the move: NewFEN
// exactly, which records an en-passant square only where a capture is legal
// (python-chess), or StandardFEN, which records it after every two-square
// push (the FEN standard, and RookWorld-LM's model card). Every other field
// must match as written.
func (r EnvResult) FENMatches(fen string) bool {
	return fen == r.NewFEN || (fen != "" && fen == r.StandardFEN())
}

// StandardFEN is NewFEN with the FEN standard's en-passant square after a legal
// two-square pawn push that python-chess writes as "-"; "" where the two
// conventions agree.
func (r EnvResult) StandardFEN() string {
	f := strings.Fields(r.NewFEN)
	m := r.Move
	if !r.Legal || len(f) != 6 || f[3] != "-" || len(m) != 4 || m[0] != m[2] {
		return ""
	}
	prev, err := chess.ParseFEN(r.PrevFEN)
	if err != nil {
		return ""
	}
	switch {
	case prev.PieceAt(m[:2]) == "P" && m[1] == '2' && m[3] == '4':
		f[3] = m[:1] + "3"
	case prev.PieceAt(m[:2]) == "p" && m[1] == '7' && m[3] == '5':
		f[3] = m[:1] + "6"
	default:
		return ""
	}
	return strings.Join(f, " ")
}

// Step is the environment transition on game g: a legal move is played and
// judged; an illegal or malformed one leaves the game unchanged and yields
// reward -1.0, truncated=1, and terminated = whether the unchanged position is
// already over. The game's history decides fivefold repetition.
func Step(g *chess.Game, uci string) EnvResult {
	r, err := Play(g, uci)
	if err != nil {
		r = EnvResult{PrevFEN: g.Position().FEN(), Move: uci, Reward: RewardIllegal, Truncated: true}
		r.NewFEN = r.PrevFEN
		o := g.Outcome()
		r.Terminated, r.Termination = o.Over(), o.Termination
	}
	return r
}

// Play plays a legal move on g and judges it as Step does; an illegal or
// malformed move is an error (chess.IsMoveError) and leaves g unchanged. Like
// python-chess's push, it does not refuse a move after an automatic game end.
func Play(g *chess.Game, uci string) (EnvResult, error) {
	r := EnvResult{PrevFEN: g.Position().FEN(), Move: uci}
	if err := g.Push(uci); err != nil {
		return EnvResult{}, err
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
	return r, nil
}

// NewGame starts a game at fen, which must be a position that can arise in a
// legal game (ValidatePosition); the game then knows its history from there.
func NewGame(fen string) (*chess.Game, error) {
	p, err := parseLegal(fen)
	if err != nil {
		return nil, err
	}
	return chess.NewGameFrom(p), nil
}

// EnvStep judges a move from a bare FEN: no history, so fivefold repetition
// cannot be seen (an A: prompt's ten recent moves are too few for five
// occurrences). The error is for an invalid FEN or a position that cannot
// arise in a legal game (ValidatePosition), which has no right answer to
// train on. An illegal move in a legal position is part of the result.
func EnvStep(fen, uci string) (EnvResult, error) {
	g, err := NewGame(fen)
	if err != nil {
		return EnvResult{}, err
	}
	return Step(g, uci), nil
}

// EnvStepAfter judges a move in the position fen that the game from startFEN
// through history (UCI, oldest first) reached, with that history: a move that
// repeats a position for the fifth time ends the game. The history must lead
// to fen exactly (clocks included), else the error is a *HistoryError.
// startFEN "" is EnvStep(fen, uci).
func EnvStepAfter(startFEN string, history []string, fen, uci string) (EnvResult, error) {
	if startFEN == "" {
		return EnvStep(fen, uci)
	}
	g, err := replayLegal(startFEN, history)
	if err != nil {
		return EnvResult{}, err
	}
	want, err := parseLegal(fen)
	if err != nil {
		return EnvResult{}, err
	}
	if got := g.Position().FEN(); got != want.FEN() {
		return EnvResult{}, &HistoryError{StartFEN: startFEN, Reached: got, Want: want.FEN()}
	}
	return Step(g, uci), nil
}

// replayLegal replays a game from a legal start (legal moves keep it legal).
func replayLegal(startFEN string, moves []string) (*chess.Game, error) {
	if _, err := parseLegal(startFEN); err != nil {
		return nil, err
	}
	return chess.ReplayGame(startFEN, moves)
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
