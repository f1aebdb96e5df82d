package gpt2

import (
	"fmt"

	"github.com/rookscript/rookscript/engine/backend"
)

// KVCache holds every layer's keys and values for Slots sequences of up to Cap positions.
type KVCache struct {
	Slots, Cap int
	layers     []backend.KV
}

// NewKVCache allocates a cache for slots sequences of up to capacity tokens each.
func (m *Model) NewKVCache(slots, capacity int) (*KVCache, error) {
	if slots <= 0 || capacity <= 0 {
		return nil, fmt.Errorf("gpt2: KV cache needs positive slots and capacity, got %d, %d", slots, capacity)
	}
	if capacity > m.Config.MaxSeqLen {
		return nil, fmt.Errorf("gpt2: KV cache capacity %d exceeds the model's context of %d", capacity, m.Config.MaxSeqLen)
	}
	kv := &KVCache{Slots: slots, Cap: capacity}
	size := slots * capacity * m.Config.Channels
	for range m.Config.NumLayers {
		kv.layers = append(kv.layers, backend.KV{K: m.B.Alloc(size), V: m.B.Alloc(size), Cap: capacity})
	}
	return kv, nil
}

// CopySlot copies positions [0, n) of slot src into slot dst in every layer, so a group of
// completions can share one prefill of their common prompt.
func (m *Model) CopySlot(kv *KVCache, dst, src, n int) {
	c := m.Config.Channels
	for _, l := range kv.layers {
		m.B.Copy(l.K.Slice(dst*kv.Cap*c, n*c), l.K.Slice(src*kv.Cap*c, n*c))
		m.B.Copy(l.V.Slice(dst*kv.Cap*c, n*c), l.V.Slice(src*kv.Cap*c, n*c))
	}
}

// Prefill runs a packed batch of prompts, storing each token's keys and values in the cache
// (sequence i at slots[i], positions 0..len-1), and returns the raw logits of the last token
// of every sequence, (len(b.Lens), V) row-major. The returned slice is reused by the next
// Prefill or Decode. b.Rows and b.Targets are ignored.
func (m *Model) Prefill(kv *KVCache, b *Batch, slots []int32) ([]float32, error) {
	nb := Batch{Tokens: b.Tokens, Lens: b.Lens}
	if err := nb.Validate(m.Config); err != nil {
		return nil, err
	}
	if len(slots) != len(b.Lens) {
		return nil, fmt.Errorf("gpt2: Prefill got %d slots for %d sequences", len(slots), len(b.Lens))
	}
	n, r := len(b.Tokens), len(b.Lens)
	a := m.ensureActs(n, r)
	a.hostSlot = a.hostSlot[:0]
	rows := make([]int32, 0, r) // last token of each sequence
	var start int32
	for i, l := range b.Lens {
		if s := slots[i]; s < 0 || int(s) >= kv.Slots {
			return nil, fmt.Errorf("gpt2: slot %d outside the cache's %d slots", s, kv.Slots)
		}
		if int(l) > kv.Cap {
			return nil, fmt.Errorf("gpt2: sequence %d has %d tokens, more than the cache capacity %d", i, l, kv.Cap)
		}
		for range l {
			a.hostSlot = append(a.hostSlot, slots[i])
		}
		start += l
		rows = append(rows, start-1)
	}
	nb.Rows, nb.Targets = rows, make([]int32, r) // targets are unused; token 0 is valid
	m.upload(a, &nb)
	m.B.UploadI32(a.slot.Slice(0, n), a.hostSlot)
	m.last.valid = false
	m.trunk(a, n, kv, false)
	m.B.GatherRows(a.headIn, a.lnf, a.rows.Slice(0, r), m.Config.Channels)
	m.B.MatMul(a.logits, a.headIn, m.p.wte, backend.Buf{}, r, m.Config.Channels, m.Config.VocabSize)
	return m.hostLogits(a, r), nil
}

// Decode feeds one token per row: tokens[i] at position pos[i] of cache slot slots[i], whose
// positions 0..pos[i]-1 must already be in the cache. It returns the raw logits of every
// row, (len(tokens), V) row-major, valid until the next Prefill or Decode.
func (m *Model) Decode(kv *KVCache, tokens, slots, pos []int32) ([]float32, error) {
	n := len(tokens)
	if len(slots) != n || len(pos) != n {
		return nil, fmt.Errorf("gpt2: Decode got %d tokens, %d slots, %d positions", n, len(slots), len(pos))
	}
	if n == 0 {
		return nil, nil
	}
	for i := range n {
		if t := tokens[i]; t < 0 || int(t) >= m.Config.VocabSize {
			return nil, fmt.Errorf("gpt2: token %d outside the vocabulary of %d", t, m.Config.VocabSize)
		}
		if s := slots[i]; s < 0 || int(s) >= kv.Slots {
			return nil, fmt.Errorf("gpt2: slot %d outside the cache's %d slots", s, kv.Slots)
		}
		if p := pos[i]; p < 0 || int(p) >= kv.Cap {
			return nil, fmt.Errorf("gpt2: position %d outside the cache capacity %d", p, kv.Cap)
		}
	}
	a := m.ensureActs(n, n)
	m.B.UploadI32(a.tok.Slice(0, n), tokens)
	m.B.UploadI32(a.pos.Slice(0, n), pos)
	m.B.UploadI32(a.slot.Slice(0, n), slots)
	m.last.valid = false
	m.trunk(a, n, kv, true)
	m.B.MatMul(a.logits, a.lnf, m.p.wte, backend.Buf{}, n, m.Config.Channels, m.Config.VocabSize)
	return m.hostLogits(a, n), nil
}

// hostLogits exposes the first r rows of logits on the host: the buffer itself on a host
// backend, a reused download otherwise.
func (m *Model) hostLogits(a *activations, r int) []float32 {
	size := r * m.Config.VocabSize
	if mem := a.logits.M; mem.Host != nil {
		return a.logits.F32()[:size]
	}
	if cap(a.hostLogits) < size {
		a.hostLogits = make([]float32, size)
	}
	a.hostLogits = a.hostLogits[:size]
	m.B.Download(a.hostLogits, a.logits.Slice(0, size))
	return a.hostLogits
}
