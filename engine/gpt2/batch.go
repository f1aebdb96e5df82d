package gpt2

import (
	"fmt"

	"github.com/rookscript/rookscript/engine/backend"
)

// Batch is a packed batch: sequences laid end to end with no padding, each with its own
// positions 0..len-1, plus the rows whose next-token distribution is scored.
//
// A sequence may continue another (AddContinuation): its tokens then follow the other's, the
// prefix, as if written after it — positions continuing the prefix's, attention over the
// prefix's rows before their own — while the prefix is computed once for all its
// continuations. A GRPO group is a prompt and G completions: packed as one prefix and G
// continuations, the prompt costs one pass instead of G.
type Batch struct {
	Tokens  []int32 // all sequences concatenated
	Lens    []int32 // length of each sequence
	Rows    []int32 // indices into Tokens whose next-token log-probability is wanted
	Targets []int32 // the token each row is scored against
	// Prefix gives each sequence the sequence it continues, or -1; nil when none does. A
	// prefix continues nothing, and its continuations follow it, one after the other.
	Prefix []int32
}

// Add appends seq and scores its next-token predictions from position scoreFrom on: rows
// scoreFrom .. len(seq)-2 against targets seq[scoreFrom+1 ..]. scoreFrom = len(seq) scores
// nothing (context only).
func (b *Batch) Add(seq []int32, scoreFrom int) {
	if b.Prefix != nil {
		b.Prefix = append(b.Prefix, -1)
	}
	b.add(seq, scoreFrom)
}

// AddContinuation appends seq as a continuation of the last sequence added with Add (its
// prefix), scoring from position scoreFrom of seq as Add does. Nothing may have been added
// between that prefix and its continuations.
func (b *Batch) AddContinuation(seq []int32, scoreFrom int) {
	if b.Prefix == nil {
		b.Prefix = make([]int32, len(b.Lens), cap(b.Lens))
		for i := range b.Prefix {
			b.Prefix[i] = -1
		}
	}
	k := len(b.Prefix) - 1
	if k < 0 {
		panic("gpt2: AddContinuation with no sequence before it")
	}
	pre := b.Prefix[k]
	if pre < 0 {
		pre = int32(k)
	}
	b.Prefix = append(b.Prefix, pre)
	b.add(seq, scoreFrom)
}

func (b *Batch) add(seq []int32, scoreFrom int) {
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
	if b.Prefix != nil {
		b.Prefix = b.Prefix[:0]
	}
}

// prefixOf is the sequence sequence i continues, or -1.
func (b *Batch) prefixOf(i int) int {
	if b.Prefix == nil {
		return -1
	}
	return int(b.Prefix[i])
}

// Validate checks the batch against a model configuration.
func (b *Batch) Validate(cfg Config) error {
	total := 0
	if b.Prefix != nil && len(b.Prefix) != len(b.Lens) {
		return fmt.Errorf("gpt2: %d prefixes for %d sequences", len(b.Prefix), len(b.Lens))
	}
	root := -1
	for i, l := range b.Lens {
		if l <= 0 {
			return fmt.Errorf("gpt2: sequence %d has length %d", i, l)
		}
		span := int(l)
		switch pre := b.prefixOf(i); {
		case pre < 0:
			root = i
		case pre != root || root < 0:
			return fmt.Errorf("gpt2: sequence %d continues sequence %d, which is not the prefix before it", i, pre)
		default:
			span += int(b.Lens[pre])
		}
		if span > cfg.MaxSeqLen {
			return fmt.Errorf("gpt2: sequence %d has %d tokens with its prefix, more than the model's context of %d", i, span, cfg.MaxSeqLen)
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
	p.Start, p.Len, p.Prefix = p.Start[:0], p.Len[:0], p.Prefix[:0]
	var s int32
	for _, l := range b.Lens {
		p.Start = append(p.Start, s)
		p.Len = append(p.Len, l)
		s += l
	}
	if b.Prefix != nil {
		p.Prefix = append(p.Prefix, b.Prefix...)
	} else {
		p.Prefix = nil
	}
}

// positions fills pos with each token's position: within its own sequence, after its
// prefix's for a continuation.
func (b *Batch) positions(pos []int32) []int32 {
	pos = pos[:0]
	for i, l := range b.Lens {
		off := int32(0)
		if pre := b.prefixOf(i); pre >= 0 {
			off = b.Lens[pre]
		}
		for t := int32(0); t < l; t++ {
			pos = append(pos, off+t)
		}
	}
	return pos
}
