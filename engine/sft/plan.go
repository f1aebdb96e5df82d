package sft

import (
	"math"

	"github.com/rookscript/rookscript/engine/gpt2"
)

// Plan sizes the micro-batches of an SFT run from a memory budget: Batch documents a step of
// up to SeqLen tokens each, every token scored, on one trained model.
type Plan struct {
	Model  gpt2.Config
	Budget int64 // bytes the model may hold
	Batch  int   // documents of a step
	SeqLen int   // tokens of the longest document, within the context
}

// HostDocBytes is what one document of a step costs on the host before its tokens: the
// training-text item a source returns and the document made of it, as Lua tables (their
// resident memory, measured over many documents, rounded up).
const HostDocBytes = 3 << 10

// Footprint is what the run holds with micro-batches of docs documents: the model's buffers
// and the whole step's documents, which the host holds however the step is split.
func (p Plan) Footprint(docs int) gpt2.Footprint {
	f := p.Model.Footprint(gpt2.Use{Train: true, Rows: docs * p.SeqLen, Scored: docs * p.SeqLen})
	// In floating point: a batch of 1e18 must be refused, not wrap around.
	f.Data = int64(min(float64(p.Batch)*float64(HostDocBytes+4*p.SeqLen), math.MaxInt64/4))
	return f
}

// MicroBatch is the documents per micro-batch that fit the budget (Config.MicroTokens is
// that times SeqLen), and what the run then holds; fits is false when not even one does.
func (p Plan) MicroBatch() (docs int, f gpt2.Footprint, fits bool) {
	docs, fits = gpt2.FitMicroBatch(p.Batch, 1, p.Budget, func(n int) int { return n * p.SeqLen },
		func(n int) int64 { return p.Footprint(n).Total() })
	return docs, p.Footprint(docs), fits
}
