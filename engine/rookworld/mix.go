package rookworld

import (
	"fmt"
	"hash/fnv"

	"github.com/rookscript/rookscript/engine/chess"
)

// The prompt mixes a position stream can be drawn as.
const (
	MixPolicy = "policy" // every item becomes a P: prompt
	MixEnv    = "env"    // every item becomes an A: prompt (P: when the position has no legal move)
	MixBoth   = "mix"    // A: with probability EnvFraction, else P:
)

// Mix turns the items of a source into prompts of either task. Its draws are
// a pure function of Seed and an item's index in the stream, so the mix needs
// no random state of its own: the source's cursor says everything.
type Mix struct {
	Task        string  // MixPolicy, MixEnv or MixBoth
	EnvFraction float64 // MixBoth: share of A: prompts
	Seed        uint64
	Pad         bool // P: prompts padded to PolicyFENWidth
}

// Prompt is one prompt drawn from a source item.
type Prompt struct {
	Prompt string
	Task   string // "P" or "A"; a training-string item keeps its Sample's task
	FEN    string
	Move   string // A: the move to judge
	Target string // training-string items: the row's target
	Origin string
}

// Choose is a deterministic draw in [0, 1) from a seed, an item's index and a salt.
func Choose(seed uint64, index int64, salt string) float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d/%s", seed, index, salt)
	return float64(h.Sum64()>>11) / (1 << 53)
}

// Prompt builds the prompt for item it, the index-th of its stream; task
// overrides m.Task when not empty. A training-string item keeps its own
// prompt and target, and an item with its own task (a data set's task column)
// that task. An A: prompt judges the source's next move when known, else a
// legal move drawn with Choose.
func (m Mix) Prompt(it Item, index int64, task string) Prompt {
	if task == "" {
		task = m.Task
	}
	if it.Task != "" {
		task = it.Task
	}
	p := Prompt{FEN: it.FEN, Origin: it.Origin}
	if s := it.Sample; s != nil {
		p.Prompt, p.Task, p.Target = s.Prompt, string(s.Task), s.Target
		return p
	}
	env := task == MixEnv || (task == MixBoth && Choose(m.Seed, index, "task") < m.EnvFraction)
	pos, err := chess.ParseFEN(it.FEN)
	if env && err == nil && len(pos.LegalMoves()) > 0 {
		move := it.Next
		if move == "" {
			legal := pos.LegalMoves()
			move = legal[int(Choose(m.Seed, index, "move")*float64(len(legal)))]
		}
		p.Prompt, p.Task, p.Move = EnvPrompt(it.FEN, move, it.History), "A", move
		return p
	}
	p.Prompt, p.Task = PolicyPrompt(it.FEN, m.Pad), "P"
	return p
}
