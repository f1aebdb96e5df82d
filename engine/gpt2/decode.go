package gpt2

import (
	"fmt"

	"github.com/rookscript/rookscript/engine/backend"
)

// KVCache holds every layer's keys and values for Slots sequences of up to Cap positions. A
// slot may share its first positions with another slot (ShareSlot): the samples of one prompt
// then read the prompt's keys and values from one place.
type KVCache struct {
	Slots, Cap int
	layers     []backend.KV
	shared     backend.I32 // (2·Slots) on the device: source slot and length of each slot's shared prefix
	hostShared []int32
}

// NewKVCache allocates a cache for slots sequences of up to capacity tokens each.
func (m *Model) NewKVCache(slots, capacity int) (*KVCache, error) {
	if slots <= 0 || capacity <= 0 {
		return nil, fmt.Errorf("gpt2: KV cache needs positive slots and capacity, got %d, %d", slots, capacity)
	}
	if capacity > m.Config.MaxSeqLen {
		return nil, fmt.Errorf("gpt2: KV cache capacity %d exceeds the model's context of %d", capacity, m.Config.MaxSeqLen)
	}
	kv := &KVCache{Slots: slots, Cap: capacity, shared: m.B.AllocI32(2 * slots), hostShared: make([]int32, 2*slots)}
	size := slots * capacity * m.Config.Channels
	for range m.Config.NumLayers {
		kv.layers = append(kv.layers, backend.KV{K: m.B.Alloc(size), V: m.B.Alloc(size), Cap: capacity, Shared: kv.shared})
	}
	return kv, nil
}

// ShareSlot makes slot dst read positions [0, n) from slot src instead of holding a copy:
// the samples of one prompt share its prefill, and each decode step reads the prompt's keys
// and values once for all of them rather than once per sample. dst's own positions start at
// n. It lasts until dst is prefilled or shared again; src's positions [0, n) must not be
// rewritten meanwhile (a sample continuing in src writes from n on).
func (m *Model) ShareSlot(kv *KVCache, dst, src, n int) error {
	switch {
	case dst < 0 || dst >= kv.Slots || src < 0 || src >= kv.Slots:
		return fmt.Errorf("gpt2: ShareSlot of slot %d from slot %d: the cache has %d slots", dst, src, kv.Slots)
	case n < 0 || n > kv.Cap:
		return fmt.Errorf("gpt2: ShareSlot of %d positions: the cache holds %d", n, kv.Cap)
	case dst != src && kv.hostShared[2*src+1] > 0:
		return fmt.Errorf("gpt2: slot %d shares its prefix with slot %d: share from that slot", src, kv.hostShared[2*src])
	}
	if dst == src {
		n = 0
	}
	kv.hostShared[2*dst], kv.hostShared[2*dst+1] = int32(src), int32(n)
	m.B.UploadI32(kv.shared, kv.hostShared)
	return nil
}

// unshare makes slots hold all their positions themselves again (before a Prefill writes them).
func (m *Model) unshare(kv *KVCache, slots []int32) {
	changed := false
	for _, s := range slots {
		if kv.hostShared[2*s+1] != 0 {
			kv.hostShared[2*s+1], changed = 0, true
		}
	}
	if changed {
		m.B.UploadI32(kv.shared, kv.hostShared)
	}
}

// CopySlot copies positions [0, n) of slot src into slot dst in every layer (ShareSlot
// shares them instead, without the copy); dst then holds all its positions itself.
func (m *Model) CopySlot(kv *KVCache, dst, src, n int) {
	c := m.Config.Channels
	m.unshare(kv, []int32{int32(dst)})
	// Positions src itself reads from another slot come from there.
	from, shared := int(kv.hostShared[2*src]), min(n, int(kv.hostShared[2*src+1]))
	for _, l := range kv.layers {
		for _, part := range [][3]int{{from, 0, shared}, {src, shared, n}} {
			s, lo, hi := part[0], part[1], part[2]
			if hi > lo {
				m.B.Copy(l.K.Slice((dst*kv.Cap+lo)*c, (hi-lo)*c), l.K.Slice((s*kv.Cap+lo)*c, (hi-lo)*c))
				m.B.Copy(l.V.Slice((dst*kv.Cap+lo)*c, (hi-lo)*c), l.V.Slice((s*kv.Cap+lo)*c, (hi-lo)*c))
			}
		}
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
// from the rounded probability) as the training forward's LogProbs computes it: logit·(1/T),
// rounded, minus the row's log-sum-exp, so that on a batch-invariant backend the two are the
// same bits (DESIGN §6.1).
func (d Dist) LogProb(r int, tok int32, temperature float32) float32 {
	v := len(d.Logits) / d.Rows
	return float32(d.Logits[r*v+int(tok)]*(1/temperature)) - d.LSE[r]
}

// PrefillRows is the most tokens one trunk pass of Prefill runs (or the rows the model's
// activations already hold, when more): a long list of prompts is run in parts of whole
// sequences, so sampling never needs activations for all of its prompts at once. Sequences
// are independent, so the parts change no number.
const PrefillRows = 1024

// Prefill runs a packed batch of prompts, storing each token's keys and values in the cache
// (sequence i at slots[i], positions 0..len-1), and returns the next-token distribution after
// the last token of every sequence at the given temperature. b.Rows and b.Targets are ignored.
func (m *Model) Prefill(kv *KVCache, b *Batch, slots []int32, temperature float32) (Dist, error) {
	s, err := m.prefill(kv, b, slots, temperature)
	if err != nil {
		return Dist{}, err
	}
	return m.dist(s, len(b.Lens), temperature), nil
}

// prefill runs Prefill up to the logits of the sequences' last tokens, which it leaves in the
// sampler's buffers.
func (m *Model) prefill(kv *KVCache, b *Batch, slots []int32, temperature float32) (*sampling, error) {
	if !(temperature > 0) {
		return nil, fmt.Errorf("gpt2: temperature must be positive, got %g", temperature)
	}
	nb := Batch{Tokens: b.Tokens, Lens: b.Lens}
	if err := nb.Validate(m.Config); err != nil {
		return nil, err
	}
	if len(slots) != len(b.Lens) {
		return nil, fmt.Errorf("gpt2: Prefill got %d slots for %d sequences", len(slots), len(b.Lens))
	}
	for i, l := range b.Lens {
		if s := slots[i]; s < 0 || int(s) >= kv.Slots {
			return nil, fmt.Errorf("gpt2: slot %d outside the cache's %d slots", s, kv.Slots)
		}
		if int(l) > kv.Cap {
			return nil, fmt.Errorf("gpt2: sequence %d has %d tokens, more than the cache capacity %d", i, l, kv.Cap)
		}
	}
	m.unshare(kv, slots)
	r, c := len(b.Lens), m.Config.Channels
	limit := PrefillRows
	if m.act != nil {
		limit = max(limit, m.act.n)
	}
	s := m.ensureSampling(r)
	m.last.valid = false
	var rows []int32 // last token of each sequence of a part
	for first, tok0 := 0, 0; first < r; {
		// The part: sequences first..end-1, tokens tok0..tok0+n-1.
		end, n := first, 0
		for end < r && (end == first || n+int(b.Lens[end]) <= limit) {
			n += int(b.Lens[end])
			end++
		}
		part := Batch{Tokens: b.Tokens[tok0 : tok0+n], Lens: b.Lens[first:end]}
		a := m.ensureActs(n, 0, false)
		a.hostSlot, rows = a.hostSlot[:0], rows[:0]
		var start int32
		for i, l := range part.Lens {
			for range l {
				a.hostSlot = append(a.hostSlot, slots[first+i])
			}
			start += l
			rows = append(rows, start-1)
		}
		m.upload(a, &part)
		m.B.UploadI32(a.slot.Slice(0, n), a.hostSlot)
		m.trunk(a, n, kv, false, false)
		// The token ids are spent once the trunk has run: their buffer carries the row indices.
		m.B.UploadI32(a.tok.Slice(0, len(rows)), rows)
		m.B.GatherRows(s.headIn.Slice(first*c, len(rows)*c), a.lnf, a.tok.Slice(0, len(rows)), c)
		first, tok0 = end, tok0+n
	}
	m.B.MatMul(s.logits, s.headIn, m.p.wte, backend.Buf{}, r, c, m.Config.VocabSize)
	return s, nil
}

// Decode feeds one token per row: tokens[i] at position pos[i] of cache slot slots[i], whose
// positions 0..pos[i]-1 must already be in the cache. It returns every row's next-token
// distribution at the given temperature.
func (m *Model) Decode(kv *KVCache, tokens, slots, pos []int32, temperature float32) (Dist, error) {
	if !(temperature > 0) {
		return Dist{}, fmt.Errorf("gpt2: temperature must be positive, got %g", temperature)
	}
	s, err := m.decode(kv, tokens, slots, pos)
	if s == nil {
		return Dist{}, err
	}
	return m.dist(s, len(tokens), temperature), nil
}

// DecodeLogits is Decode without the distribution: every row's logits (rows of the
// vocabulary), the same bits as Decode's Logits. Greedy decoding takes the largest logit and
// needs no softmax, whose pass over every row's vocabulary this skips.
func (m *Model) DecodeLogits(kv *KVCache, tokens, slots, pos []int32) ([]float32, error) {
	s, err := m.decode(kv, tokens, slots, pos)
	if s == nil {
		return nil, err
	}
	return m.host(&s.hostLogits, s.logits, len(tokens)*m.Config.VocabSize), nil
}

// decode runs a decode step through the LM head and returns the sampler's buffers, with the
// logits of the len(tokens) rows; nil, and an error if the input is bad, for none.
func (m *Model) decode(kv *KVCache, tokens, slots, pos []int32) (*sampling, error) {
	if err := m.checkDecode(kv, tokens, slots, pos); err != nil || len(tokens) == 0 {
		return nil, err
	}
	n := len(tokens)
	a := m.ensureActs(n, 0, false)
	m.B.UploadI32(a.tok.Slice(0, n), tokens)
	m.B.UploadI32(a.pos.Slice(0, n), pos)
	m.B.UploadI32(a.slot.Slice(0, n), slots)
	return m.decodeFed(a, kv, n), nil
}

// checkDecode refuses a decode step's input that the cache cannot take.
func (m *Model) checkDecode(kv *KVCache, tokens, slots, pos []int32) error {
	n := len(tokens)
	if len(slots) != n || len(pos) != n {
		return fmt.Errorf("gpt2: Decode got %d tokens, %d slots, %d positions", n, len(slots), len(pos))
	}
	for i := range n {
		if t := tokens[i]; t < 0 || int(t) >= m.Config.VocabSize {
			return fmt.Errorf("gpt2: token %d outside the vocabulary of %d", t, m.Config.VocabSize)
		}
		if s := slots[i]; s < 0 || int(s) >= kv.Slots {
			return fmt.Errorf("gpt2: slot %d outside the cache's %d slots", s, kv.Slots)
		}
		if p := pos[i]; p < 0 || int(p) >= kv.Cap {
			return fmt.Errorf("gpt2: position %d outside the cache capacity %d", p, kv.Cap)
		}
		if s := slots[i]; pos[i] < kv.hostShared[2*s+1] {
			return fmt.Errorf("gpt2: position %d of slot %d is in the %d positions it shares with slot %d", pos[i], s, kv.hostShared[2*s+1], kv.hostShared[2*s])
		}
	}
	return nil
}

// decodeFed runs a decode step of n rows whose tokens, positions and slots a.tok, a.pos and
// a.slot hold, through the LM head.
func (m *Model) decodeFed(a *activations, kv *KVCache, n int) *sampling {
	m.last.valid = false
	m.trunk(a, n, kv, true, false)
	s := m.ensureSampling(n)
	m.B.MatMul(s.logits, a.lnf, m.p.wte, backend.Buf{}, n, m.Config.Channels, m.Config.VocabSize)
	return s
}

// dist computes the softmax of the first r rows of the sampler's logits and exposes logits,
// probabilities and log-sum-exps on the host: the buffers themselves on a host backend,
// reused downloads otherwise.
func (m *Model) dist(s *sampling, r int, temperature float32) Dist {
	v := m.Config.VocabSize
	m.B.Softmax(s.probs, s.lse, s.logits, r, v, 1/temperature)
	return Dist{
		Rows:   r,
		Logits: m.host(&s.hostLogits, s.logits, r*v),
		Probs:  m.host(&s.hostProbs, s.probs, r*v),
		LSE:    m.host(&s.hostLSE, s.lse, r),
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
