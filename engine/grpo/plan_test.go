package grpo

import (
	"testing"

	"github.com/rookscript/rookscript/engine/gpt2"
)

// TestPlanMicroBatch: the micro-batch is the largest that fits the budget, within a
// minibatch and gpt2.MicroTokens; one completion, reported as not fitting, when nothing does.
func TestPlanMicroBatch(t *testing.T) {
	p := Plan{Model: gpt2.RookWorld124M, Prompts: 64, Group: 1, PromptLen: 80, NewTokens: 64, Minibatches: 1, Reference: true}
	at := func(seqs int) int64 { return p.Footprint(seqs).Total() }
	for _, c := range []struct {
		name   string
		budget int64
		seqs   int
		fits   bool
	}{
		{"ample: MicroTokens binds", 1 << 40, gpt2.MicroTokens / 144, true},
		{"exactly 9", at(9), 9, true},
		{"a byte short of 9", at(9) - 1, 8, true},
		{"one completion", at(1), 1, true},
		{"nothing fits", at(1) - 1, 1, false},
	} {
		p.Budget = c.budget
		seqs, f, fits := p.MicroBatch()
		if seqs != c.seqs || fits != c.fits || f != p.Footprint(seqs) {
			t.Errorf("%s: %d completions (fits %v), want %d (%v)", c.name, seqs, fits, c.seqs, c.fits)
		}
	}
	p.Budget, p.Prompts = 1<<40, 5
	if seqs, _, _ := p.MicroBatch(); seqs != 5 {
		t.Errorf("5 completions in a step: micro-batches of %d", seqs)
	}
	p.Prompts, p.Minibatches = 64, 16 // a minibatch of 4
	if seqs, _, _ := p.MicroBatch(); seqs != 4 {
		t.Errorf("minibatches of 4: micro-batches of %d", seqs)
	}
}

// TestPlanSharedPrompts: completions that share a prompt pack it once per group, and the
// micro-batch holds whole groups.
func TestPlanSharedPrompts(t *testing.T) {
	p := Plan{Model: gpt2.RookWorld124M, Prompts: 8, Group: 8, PromptLen: 80, NewTokens: 64, Minibatches: 1, Reference: true, Budget: 1 << 40}
	if got, want := p.Rows(16), 2*79+16*65; got != want {
		t.Errorf("16 completions in groups of 8: %d rows, want %d", got, want)
	}
	if got, want := p.Rows(9), 2*79+9*65; got != want {
		t.Errorf("9 completions: %d rows, want %d (two groups touched)", got, want)
	}
	// Groups of 8 pack 8·65 + 79 = 599 tokens: six fit MicroTokens.
	if seqs, _, _ := p.MicroBatch(); seqs != 48 {
		t.Errorf("micro-batches of %d completions, want 48", seqs)
	}
	p.Budget = p.Footprint(8).Total() - 1 // not even one group
	if seqs, _, fits := p.MicroBatch(); seqs != 7 || !fits {
		t.Errorf("a budget below one group: %d completions (fits %v), want 7", seqs, fits)
	}
}

// TestPlanEvaluation: an evaluation wider or longer than the rollouts sizes the KV cache and
// the sampler's rows; without one they are the rollouts'.
func TestPlanEvaluation(t *testing.T) {
	p := Plan{Model: gpt2.RookWorld124M, Prompts: 8, Group: 8, PromptLen: 128, NewTokens: 72, Minibatches: 1}
	base := p.Footprint(8)
	want := p.Model.Footprint(gpt2.Use{KVSlots: 64, KVCap: 200}).KVCache
	if base.KVCache != want {
		t.Errorf("no evaluation: KV cache %d, want 64 slots of 200 positions (%d)", base.KVCache, want)
	}
	p.EvalSlots, p.EvalNewTokens = 256, 144
	f := p.Footprint(8)
	want = p.Model.Footprint(gpt2.Use{KVSlots: 256, KVCap: 272}).KVCache
	if f.KVCache != want || f.Sampling <= base.Sampling {
		t.Errorf("an evaluation of 256 answers of 144: KV cache %d (want %d), sampler %d (rollouts' %d)", f.KVCache, want, f.Sampling, base.Sampling)
	}
}
