package grpo

import (
	"fmt"

	"github.com/rookscript/rookscript/engine/gpt2"
)

// Plan sizes the micro-batches of a GRPO run from a memory budget. It counts what the policy
// holds to train on a minibatch (weights, gradients, AdamW moments, activations), to sample
// the rollouts and the evaluations (KV cache, prefill, next-token rows), and the frozen
// reference's forward when β > 0. Each group's prompt is packed once, as Step packs it, so a
// micro-batch holds whole groups when one fits.
type Plan struct {
	Model       gpt2.Config
	Budget      int64 // bytes the models may hold in all
	Prompts     int   // prompts of a step
	Group       int   // completions per prompt
	PromptLen   int   // tokens of the longest prompt
	NewTokens   int   // tokens of the longest completion
	Minibatches int   // optimizer updates per pass: a micro-batch holds at most a minibatch
	Reference   bool  // a frozen reference scores every micro-batch (β > 0)
	// An evaluation decodes EvalSlots sequences at once in the policy's KV cache, answers of
	// up to EvalNewTokens tokens (0 slots: the run does not evaluate).
	EvalSlots, EvalNewTokens int
}

// Validate reports a run GRPO cannot train: no prompts, groups too small to compare, or
// completions (rollouts' or evaluations') that leave no room for a prompt in the context.
func (p Plan) Validate() error {
	switch {
	case p.Prompts < 1:
		return fmt.Errorf("grpo: a step needs prompts, got %d", p.Prompts)
	case p.Group < MinGroup:
		return CheckGroup(p.Group)
	case p.NewTokens >= p.Model.MaxSeqLen, p.EvalSlots > 0 && p.EvalNewTokens >= p.Model.MaxSeqLen:
		return fmt.Errorf("grpo: answers of up to %d tokens leave no room for a prompt in the model's context of %d",
			max(p.NewTokens, p.EvalNewTokens*min(p.EvalSlots, 1)), p.Model.MaxSeqLen)
	}
	return nil
}

// Sequences is the completions of one minibatch: the most a micro-batch holds.
func (p Plan) Sequences() int { return (p.Prompts*p.Group + p.Minibatches - 1) / max(p.Minibatches, 1) }

// SeqLen is the longest packed sequence, a prompt and its completion, within the context.
func (p Plan) SeqLen() int { return min(p.Model.MaxSeqLen, p.PromptLen+p.NewTokens) }

// Rows is the tokens a micro-batch of seqs completions packs: each group's prompt but its
// last token once, and each completion with that token.
func (p Plan) Rows(seqs int) int {
	n, prompt := p.SeqLen(), min(p.PromptLen, p.SeqLen())
	if p.Group > 1 && prompt > 1 {
		groups := (seqs + p.Group - 1) / p.Group
		return groups*(prompt-1) + seqs*(n-prompt+1)
	}
	return seqs * n
}

// Footprint is what the run holds with micro-batches of seqs completions.
func (p Plan) Footprint(seqs int) gpt2.Footprint {
	slots, newTokens := p.Prompts*p.Group, p.NewTokens
	if p.EvalSlots > 0 {
		slots, newTokens = max(slots, p.EvalSlots), max(newTokens, p.EvalNewTokens)
	}
	rows, scored := p.Rows(seqs), seqs*min(p.NewTokens, p.SeqLen())
	f := p.Model.Footprint(gpt2.Use{Train: true, Rows: max(rows, min(p.PromptLen*slots, gpt2.PrefillRows)), Scored: scored,
		KVSlots: slots, KVCap: min(p.Model.MaxSeqLen, p.PromptLen+newTokens), SampleRows: slots})
	if p.Reference {
		f = f.Plus(p.Model.Footprint(gpt2.Use{Rows: rows, Scored: scored}))
	}
	return f
}

// MicroBatch is the completions per micro-batch (Config.MicroBatch) that fit the budget, and
// what the run then holds; fits is false when not even one completion does.
func (p Plan) MicroBatch() (seqs int, f gpt2.Footprint, fits bool) {
	seqs, fits = gpt2.FitMicroBatch(p.Sequences(), p.Group, p.Budget, p.Rows,
		func(n int) int64 { return p.Footprint(n).Total() })
	return seqs, p.Footprint(seqs), fits
}
