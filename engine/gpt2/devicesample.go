package gpt2

import (
	"fmt"

	"github.com/rookscript/rookscript/engine/backend"
)

// DeviceSampler is a backend that draws tokens where the distribution is (the CUDA backend's
// Sample, which draws as package rollout's sampler does on the host). A rollout on one moves
// each step's tokens and logprobs to the host, 8 bytes a draw, instead of every row's logits
// and probabilities (8 bytes a row and token of the vocabulary: 25.7 MB a step for 64 rows of
// GPT-2).
type DeviceSampler interface {
	Sample(tokens backend.I32, logp, probs, logits, lse backend.Buf, distRows, streams, positions backend.I32,
		draws, rows, v int, seed uint64, greedy bool, invTemp float32)
	DownloadI32(dst []int32, src backend.I32)
}

// Draws are tokens to draw on the device: draw i from row Rows[i] of the distribution with
// the uniform of Seed, Streams[i] and Positions[i] (package philox), or its most probable
// token with Greedy.
type Draws struct {
	Seed      uint64
	Greedy    bool
	Rows      []int32
	Streams   []uint64
	Positions []int32
}

// SamplesOnDevice reports whether the model's backend draws tokens itself (PrefillSample,
// DecodeSample).
func (m *Model) SamplesOnDevice() bool {
	_, ok := m.B.(DeviceSampler)
	return ok
}

// PrefillSample is Prefill followed by d's draws from its distribution, made on the device:
// each draw's token and logprob (as Dist.LogProb computes it) are all that reach the host.
// The slices belong to the model until its next call.
func (m *Model) PrefillSample(kv *KVCache, b *Batch, slots []int32, temperature float32, d Draws) ([]int32, []float32, error) {
	s, err := m.prefill(kv, b, slots, temperature)
	if err != nil {
		return nil, nil, err
	}
	return m.sampleOnDevice(s, len(b.Lens), temperature, d)
}

// DecodeSample is Decode followed by d's draws, made on the device as PrefillSample's.
func (m *Model) DecodeSample(kv *KVCache, tokens, slots, pos []int32, temperature float32, d Draws) ([]int32, []float32, error) {
	if !(temperature > 0) {
		return nil, nil, fmt.Errorf("gpt2: temperature must be positive, got %g", temperature)
	}
	s, err := m.decode(kv, tokens, slots, pos)
	if s == nil {
		return nil, nil, err
	}
	return m.sampleOnDevice(s, len(tokens), temperature, d)
}

// drawing is the device's side of a model's draws: their rows, streams (two words each, low
// first) and positions going in, their tokens and logprobs coming out.
type drawing struct {
	n                                int
	rows, streams, positions, tokens backend.I32
	logp                             backend.Buf
	hostWords, hostTokens            []int32
	hostLogp                         []float32
}

func (m *Model) sampleOnDevice(s *sampling, rows int, temperature float32, d Draws) ([]int32, []float32, error) {
	ds, ok := m.B.(DeviceSampler)
	n := len(d.Rows)
	switch {
	case !ok:
		return nil, nil, fmt.Errorf("gpt2: the %s backend does not sample on the device", m.B.Name())
	case len(d.Streams) != n || len(d.Positions) != n:
		return nil, nil, fmt.Errorf("gpt2: %d draws with %d streams and %d positions", n, len(d.Streams), len(d.Positions))
	case n == 0:
		return nil, nil, nil
	}
	for _, r := range d.Rows {
		if r < 0 || int(r) >= rows {
			return nil, nil, fmt.Errorf("gpt2: a draw from row %d of a distribution of %d rows", r, rows)
		}
	}
	w := m.draw
	if w == nil || w.n < n {
		b := m.B
		w = &drawing{n: n, rows: b.AllocI32(n), streams: b.AllocI32(2 * n), positions: b.AllocI32(n), tokens: b.AllocI32(n),
			logp: b.Alloc(n)}
		m.draw = w
	}
	w.hostWords = resize(w.hostWords, 2*n)
	for i, st := range d.Streams {
		w.hostWords[2*i], w.hostWords[2*i+1] = int32(uint32(st)), int32(uint32(st>>32))
	}
	m.B.UploadI32(w.rows.Slice(0, n), d.Rows)
	m.B.UploadI32(w.streams.Slice(0, 2*n), w.hostWords)
	m.B.UploadI32(w.positions.Slice(0, n), d.Positions)
	v := m.Config.VocabSize
	m.B.Softmax(s.probs, s.lse, s.logits, rows, v, 1/temperature)
	ds.Sample(w.tokens.Slice(0, n), w.logp.Slice(0, n), s.probs, s.logits, s.lse, w.rows.Slice(0, n), w.streams.Slice(0, 2*n),
		w.positions.Slice(0, n), n, rows, v, d.Seed, d.Greedy, 1/temperature)
	w.hostTokens, w.hostLogp = resize(w.hostTokens, n), resize(w.hostLogp, n)
	ds.DownloadI32(w.hostTokens, w.tokens.Slice(0, n))
	m.B.Download(w.hostLogp, w.logp.Slice(0, n))
	return w.hostTokens, w.hostLogp, nil
}
