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

// Dist is the next-token distribution of a set of rows, on the host. Its slices belong to
// the model and are overwritten by the next Prefill or Decode.
type Dist struct {
	Rows   int
	Logits []float32 // (Rows, V) raw logits
	Probs  []float32 // (Rows, V) softmax(logits / temperature)
	LSE    []float32 // (Rows) log Σ exp(logits / temperature)
}

// LogProb is log softmax(logits/temperature)[tok] of row r, computed from the logits (not
// from the rounded probability) so that it matches the training forward.
func (d Dist) LogProb(r int, tok int32, temperature float32) float32 {
	v := len(d.Logits) / d.Rows
	return d.Logits[r*v+int(tok)]*(1/temperature) - d.LSE[r]
}

// Prefill runs a packed batch of prompts, storing each token's keys and values in the cache
// (sequence i at slots[i], positions 0..len-1), and returns the next-token distribution after
// the last token of every sequence at the given temperature. b.Rows and b.Targets are ignored.
func (m *Model) Prefill(kv *KVCache, b *Batch, slots []int32, temperature float32) (Dist, error) {
	if !(temperature > 0) {
		return Dist{}, fmt.Errorf("gpt2: temperature must be positive, got %g", temperature)
	}
	nb := Batch{Tokens: b.Tokens, Lens: b.Lens}
	if err := nb.Validate(m.Config); err != nil {
		return Dist{}, err
	}
	if len(slots) != len(b.Lens) {
		return Dist{}, fmt.Errorf("gpt2: Prefill got %d slots for %d sequences", len(slots), len(b.Lens))
	}
	n, r := len(b.Tokens), len(b.Lens)
	a := m.ensureActs(n, r)
	a.hostSlot = a.hostSlot[:0]
	rows := make([]int32, 0, r) // last token of each sequence
	var start int32
	for i, l := range b.Lens {
		if s := slots[i]; s < 0 || int(s) >= kv.Slots {
			return Dist{}, fmt.Errorf("gpt2: slot %d outside the cache's %d slots", s, kv.Slots)
		}
		if int(l) > kv.Cap {
			return Dist{}, fmt.Errorf("gpt2: sequence %d has %d tokens, more than the cache capacity %d", i, l, kv.Cap)
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
	return m.dist(a, r, temperature), nil
}

// Decode feeds one token per row: tokens[i] at position pos[i] of cache slot slots[i], whose
// positions 0..pos[i]-1 must already be in the cache. It returns every row's next-token
// distribution at the given temperature.
func (m *Model) Decode(kv *KVCache, tokens, slots, pos []int32, temperature float32) (Dist, error) {
	n := len(tokens)
	if len(slots) != n || len(pos) != n {
		return Dist{}, fmt.Errorf("gpt2: Decode got %d tokens, %d slots, %d positions", n, len(slots), len(pos))
	}
	if !(temperature > 0) {
		return Dist{}, fmt.Errorf("gpt2: temperature must be positive, got %g", temperature)
	}
	if n == 0 {
		return Dist{}, nil
	}
	for i := range n {
		if t := tokens[i]; t < 0 || int(t) >= m.Config.VocabSize {
			return Dist{}, fmt.Errorf("gpt2: token %d outside the vocabulary of %d", t, m.Config.VocabSize)
		}
		if s := slots[i]; s < 0 || int(s) >= kv.Slots {
			return Dist{}, fmt.Errorf("gpt2: slot %d outside the cache's %d slots", s, kv.Slots)
		}
		if p := pos[i]; p < 0 || int(p) >= kv.Cap {
			return Dist{}, fmt.Errorf("gpt2: position %d outside the cache capacity %d", p, kv.Cap)
		}
	}
	a := m.ensureActs(n, n)
	m.B.UploadI32(a.tok.Slice(0, n), tokens)
	m.B.UploadI32(a.pos.Slice(0, n), pos)
	m.B.UploadI32(a.slot.Slice(0, n), slots)
	m.last.valid = false
	m.trunk(a, n, kv, true)
	m.B.MatMul(a.logits, a.lnf, m.p.wte, backend.Buf{}, n, m.Config.Channels, m.Config.VocabSize)
	return m.dist(a, n, temperature), nil
}

// dist computes the softmax of the first r rows of logits and exposes logits, probabilities
// and log-sum-exps on the host: the buffers themselves on a host backend, reused downloads
// otherwise.
func (m *Model) dist(a *activations, r int, temperature float32) Dist {
	v := m.Config.VocabSize
	if a.probs.N < a.logits.N {
		a.probs = m.B.Alloc(a.logits.N)
	}
	m.B.Softmax(a.probs, a.lse, a.logits, r, v, 1/temperature)
	return Dist{
		Rows:   r,
		Logits: m.host(&a.hostLogits, a.logits, r*v),
		Probs:  m.host(&a.hostProbs, a.probs, r*v),
		LSE:    m.host(&a.hostLSE, a.lse, r),
	}
}

// host returns the first n elements of b on the host.
func (m *Model) host(stage *[]float32, b backend.Buf, n int) []float32 {
	if b.M.Host != nil {
		return b.F32()[:n]
	}
	*stage = resize(*stage, n)
	m.B.Download(*stage, b.Slice(0, n))
	return *stage
}
