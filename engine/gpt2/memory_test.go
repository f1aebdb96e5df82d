package gpt2

import "testing"

// TestFootprintParts: hand-computed sizes of GPT-2 124M's parts (weights, gradients, moments,
// KV cache) and the rule that a training model holds every layer and a scoring one one layer.
func TestFootprintParts(t *testing.T) {
	c := RookWorld124M
	const params = 124439808 // GPT-2 124M with the unpadded vocabulary of 50257
	f := c.Footprint(Use{Train: true, Rows: 2304, Scored: 1024, KVSlots: 64, KVCap: 144, SampleRows: 64})
	if f.Weights != 4*params || f.Grads != 4*params || f.Moments != 8*params {
		t.Errorf("weights %d, grads %d, moments %d; want %d, %d, %d", f.Weights, f.Grads, f.Moments, 4*params, 4*params, 8*params)
	}
	if want := int64(4*2*12*64*144*768 + 8*64); f.KVCache != want {
		t.Errorf("KV cache %d, want %d", f.KVCache, want)
	}
	if want := int64(4 * 64 * (2*50257 + 768 + 1)); f.Sampling != want {
		t.Errorf("sampling %d, want %d", f.Sampling, want)
	}
	perRow := int64(4 * (12*(16*768+4+12) + 2*768 + 5))
	if f.Activations != 2304*perRow {
		t.Errorf("training activations %d, want %d", f.Activations, 2304*perRow)
	}
	s := c.Footprint(Use{Rows: 2304, Scored: 1024})
	if want := int64(2304 * 4 * ((16*768 + 4 + 12) + 2*768 + 5)); s.Activations != want || s.Grads != 0 || s.Backward != 0 {
		t.Errorf("scoring: activations %d (want %d), grads %d, backward %d", s.Activations, want, s.Grads, s.Backward)
	}
	if want := int64(4 * (1024*(768+7) + 320*50257)); s.Head != want {
		t.Errorf("scoring head %d, want %d: one chunk of 320 rows", s.Head, want)
	}
}

// TestPlanMicroBatch: the micro-batch is the largest that fits the budget, within the step's
// sequences and MicroTokens; one sequence, reported as not fitting, when nothing does.
func TestPlanMicroBatch(t *testing.T) {
	p := Plan{Config: RookWorld124M, SeqLen: 144, Scored: 64, Sequences: 64, Reference: true,
		KVSlots: 64, KVCap: 144, Prefill: 640, SampleRows: 64}
	at := func(seqs int) int64 { return p.Footprint(seqs).Total() }
	for _, c := range []struct {
		name   string
		budget int64
		seqs   int
		fits   bool
	}{
		{"ample: MicroTokens binds", 1 << 40, MicroTokens / 144, true},
		{"exactly 9", at(9), 9, true},
		{"a byte short of 9", at(9) - 1, 8, true},
		{"one sequence", at(1), 1, true},
		{"nothing fits", at(1) - 1, 1, false},
	} {
		p.Budget = c.budget
		seqs, f, fits := p.MicroBatch()
		if seqs != c.seqs || fits != c.fits || f != p.Footprint(seqs) {
			t.Errorf("%s: %d sequences (fits %v), want %d (%v)", c.name, seqs, fits, c.seqs, c.fits)
		}
	}
	p.Budget, p.Sequences = 1<<40, 5
	if seqs, _, _ := p.MicroBatch(); seqs != 5 {
		t.Errorf("5 sequences in a step: micro-batches of %d", seqs)
	}
}

// TestPlanSharedPrompts: sequences that share a prompt pack it once per group, and the
// micro-batch holds whole groups.
func TestPlanSharedPrompts(t *testing.T) {
	p := Plan{Config: RookWorld124M, SeqLen: 144, Scored: 64, Sequences: 64, Group: 8, Prompt: 80, Reference: true, Budget: 1 << 40}
	if got, want := p.Rows(16), 2*79+16*65; got != want {
		t.Errorf("16 sequences in groups of 8: %d rows, want %d", got, want)
	}
	if got, want := p.Rows(9), 2*79+9*65; got != want {
		t.Errorf("9 sequences: %d rows, want %d (two groups touched)", got, want)
	}
	// Groups of 8 pack 8·65 + 79 = 599 tokens: six fit MicroTokens.
	if seqs, _, _ := p.MicroBatch(); seqs != 48 {
		t.Errorf("micro-batches of %d sequences, want 48", seqs)
	}
	p.Budget = p.Footprint(8).Total() - 1 // not even one group
	if seqs, _, fits := p.MicroBatch(); seqs != 7 || !fits {
		t.Errorf("a budget below one group: %d sequences (fits %v), want 7", seqs, fits)
	}
}
