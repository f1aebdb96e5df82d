package sft

import (
	"testing"

	"github.com/rookscript/rookscript/engine/gpt2"
)

// TestPlan: as many documents per micro-batch as fit the budget and gpt2.MicroTokens, up to
// the batch.
func TestPlan(t *testing.T) {
	p := Plan{Model: gpt2.RookWorld124M, Budget: 1 << 40, Batch: 64, SeqLen: 256}
	if docs, _, fits := p.MicroBatch(); docs != gpt2.MicroTokens/256 || !fits {
		t.Errorf("ample budget: %d documents (fits %v), want %d", docs, fits, gpt2.MicroTokens/256)
	}
	p.Budget = p.Footprint(5).Total()
	if docs, f, fits := p.MicroBatch(); docs != 5 || !fits || f != p.Footprint(5) {
		t.Errorf("a budget of 5 documents: %d (fits %v)", docs, fits)
	}
	p.Budget--
	if docs, _, _ := p.MicroBatch(); docs != 4 {
		t.Errorf("a byte short of 5 documents: %d", docs)
	}
	p.Budget, p.Batch = 1<<40, 3
	if docs, _, _ := p.MicroBatch(); docs != 3 {
		t.Errorf("a batch of 3: micro-batches of %d", docs)
	}
	p.Budget = 1
	if docs, _, fits := p.MicroBatch(); docs != 1 || fits {
		t.Errorf("nothing fits: %d documents (fits %v), want 1 (false)", docs, fits)
	}
}

// The step's documents are held on the host whatever the micro-batch: a batch too large for
// the budget does not fit at any micro-batch, and an absurd one neither wraps nor fits.
func TestPlanCountsTheBatch(t *testing.T) {
	p := Plan{Model: gpt2.RookWorld124M, Budget: 16 << 30, Batch: 16, SeqLen: 256}
	small := p.Footprint(1)
	if want := int64(16 * (HostDocBytes + 4*256)); small.Data != want {
		t.Errorf("batch data %d, want %d", small.Data, want)
	}
	for _, batch := range []int{10_000_000, 1_000_000_000, 1 << 62} {
		p.Batch = batch
		if _, f, fits := p.MicroBatch(); fits || f.Data <= 0 || f.Total() < 0 {
			t.Errorf("batch %d fits a 16 GiB budget (data %d, total %d)", batch, f.Data, f.Total())
		}
	}
}
