package gpt2

import (
	"fmt"

	"github.com/rookscript/rookscript/engine/backend"
)

// Batch is a packed batch: sequences laid end to end with no padding, each with its own
// positions 0..len-1, plus the rows whose next-token distribution is scored.
type Batch struct {
	Tokens  []int32 // all sequences concatenated
	Lens    []int32 // length of each sequence
	Rows    []int32 // indices into Tokens whose next-token log-probability is wanted
	Targets []int32 // the token each row is scored against
}

// Add appends seq and scores its next-token predictions from position scoreFrom on: rows
// scoreFrom .. len(seq)-2 against targets seq[scoreFrom+1 ..]. scoreFrom = len(seq) scores
// nothing (context only).
func (b *Batch) Add(seq []int32, scoreFrom int) {
	start := int32(len(b.Tokens))
	b.Tokens = append(b.Tokens, seq...)
	b.Lens = append(b.Lens, int32(len(seq)))
	for t := max(scoreFrom, 0); t+1 < len(seq); t++ {
		b.Rows = append(b.Rows, start+int32(t))
		b.Targets = append(b.Targets, seq[t+1])
	}
}

// Reset empties the batch, keeping its storage.
func (b *Batch) Reset() {
	b.Tokens, b.Lens, b.Rows, b.Targets = b.Tokens[:0], b.Lens[:0], b.Rows[:0], b.Targets[:0]
}

// Validate checks the batch against a model configuration.
func (b *Batch) Validate(cfg Config) error {
	total := 0
	for i, l := range b.Lens {
		if l <= 0 {
			return fmt.Errorf("gpt2: sequence %d has length %d", i, l)
		}
		if int(l) > cfg.MaxSeqLen {
			return fmt.Errorf("gpt2: sequence %d has %d tokens, more than the model's context of %d", i, l, cfg.MaxSeqLen)
		}
		total += int(l)
	}
	if total != len(b.Tokens) {
		return fmt.Errorf("gpt2: sequence lengths add up to %d but the batch has %d tokens", total, len(b.Tokens))
	}
	for i, t := range b.Tokens {
		if t < 0 || int(t) >= cfg.VocabSize {
			return fmt.Errorf("gpt2: token %d at row %d is outside the vocabulary of %d", t, i, cfg.VocabSize)
		}
	}
	if len(b.Rows) != len(b.Targets) {
		return fmt.Errorf("gpt2: %d scored rows but %d targets", len(b.Rows), len(b.Targets))
	}
	for i, r := range b.Rows {
		if r < 0 || int(r) >= total {
			return fmt.Errorf("gpt2: scored row %d is outside the batch of %d tokens", r, total)
		}
		if i > 0 && r <= b.Rows[i-1] {
			return fmt.Errorf("gpt2: scored rows must be strictly increasing (row %d after %d)", r, b.Rows[i-1])
		}
		if t := b.Targets[i]; t < 0 || int(t) >= cfg.VocabSize {
			return fmt.Errorf("gpt2: target %d of row %d is outside the vocabulary of %d", t, r, cfg.VocabSize)
		}
	}
	return nil
}

// pack returns the backend description of the batch's sequences, reusing p's storage.
func (b *Batch) pack(p *backend.Pack) {
	p.Start, p.Len = p.Start[:0], p.Len[:0]
	var s int32
	for _, l := range b.Lens {
		p.Start = append(p.Start, s)
		p.Len = append(p.Len, l)
		s += l
	}
}

// positions fills pos with each token's position within its own sequence.
func (b *Batch) positions(pos []int32) []int32 {
	pos = pos[:0]
	for _, l := range b.Lens {
		for t := int32(0); t < l; t++ {
			pos = append(pos, t)
		}
	}
	return pos
}
