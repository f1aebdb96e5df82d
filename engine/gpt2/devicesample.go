package gpt2

import (
	"fmt"
	"slices"

	"github.com/rookscript/rookscript/engine/backend"
)

// DeviceSampler is a backend that draws tokens where the distribution is (the CUDA backend's
// Sample, which draws as package rollout's sampler does on the host). A rollout on one moves
// each step's tokens and logprobs to the host, 8 bytes a draw, instead of every row's logits
// and probabilities (8 bytes a row and token of the vocabulary: 25.7 MB a step for 64 rows of
// GPT-2), and in its steady state nothing to the device: the step's inputs are the last
// step's, on the device already (AddI32 advances the positions).
type DeviceSampler interface {
	Sample(tokens backend.I32, logp, probs, logits, lse backend.Buf, distRows, streams, positions backend.I32,
		draws, rows, v int, seed uint64, greedy bool, invTemp float32)
	DownloadI32(dst []int32, src backend.I32)
	AddI32(x backend.I32, v int32)
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
	_, err := m.deviceSampler()
	return err == nil
}

func (m *Model) deviceSampler() (DeviceSampler, error) {
	if ds, ok := m.B.(DeviceSampler); ok {
		return ds, nil
	}
	return nil, fmt.Errorf("gpt2: the %s backend does not sample on the device", m.B.Name())
}

// PrefillSample is Prefill followed by d's draws from its distribution, made on the device:
// each draw's token and logprob (as Dist.LogProb computes it) are all that reach the host.
// The slices belong to the model until its next call.
func (m *Model) PrefillSample(kv *KVCache, b *Batch, slots []int32, temperature float32, d Draws) ([]int32, []float32, error) {
	ds, err := m.deviceSampler()
	if err != nil {
		return nil, nil, err
	}
	s, err := m.prefill(kv, b, slots, temperature)
	if err != nil {
		return nil, nil, err
	}
	return m.sampleOnDevice(ds, s, len(b.Lens), temperature, d)
}

// DecodeSample is Decode followed by d's draws, made on the device as PrefillSample's. The
// step's tokens, positions and slots, and the draws' rows, streams and positions, are taken
// from the device where it holds them already: the last draws' tokens, the last positions
// plus one, the last slots, rows and streams. In a rollout's steady state (no completion
// left the batch) nothing is copied to the device.
func (m *Model) DecodeSample(kv *KVCache, tokens, slots, pos []int32, temperature float32, d Draws) ([]int32, []float32, error) {
	if !(temperature > 0) {
		return nil, nil, fmt.Errorf("gpt2: temperature must be positive, got %g", temperature)
	}
	if err := m.checkDecode(kv, tokens, slots, pos); err != nil || len(tokens) == 0 {
		return nil, nil, err
	}
	ds, err := m.deviceSampler()
	if err != nil {
		return nil, nil, err
	}
	if g, ok := m.B.(stepGrapher); ok {
		g.BeginStep()
		defer g.EndStep()
	}
	n := len(tokens)
	a, w := m.ensureActs(n, 0, false), m.drawing(max(n, len(d.Rows)))
	// The step reads its inputs from the drawing's buffers, the activations' own put back after.
	own := [3]backend.I32{a.tok, a.pos, a.slot}
	defer func() { a.tok, a.pos, a.slot = own[0], own[1], own[2] }()
	if slices.Equal(tokens, w.drawn.host) {
		a.tok = w.drawn.dev.Slice(0, n)
	} else {
		m.B.UploadI32(a.tok.Slice(0, n), tokens)
	}
	a.pos, a.slot = w.pos.sync(m.B, ds, pos), w.slot.sync(m.B, ds, slots)
	return m.sampleOnDevice(ds, m.decodeFed(a, kv, n), n, temperature, d)
}

// stepGrapher is a backend that runs a decode step's launches as one graph where they repeat
// the last step's (launch.Backend, on a GPU and under its emulator).
type stepGrapher interface {
	BeginStep()
	EndStep()
	StepsAsGraphs() bool
}

// StepsAsGraphs reports whether the backend runs a DecodeSample step that repeats the last one
// as a graph: a decode batch that keeps its rows then runs faster than one that sheds them.
func (m *Model) StepsAsGraphs() bool {
	g, ok := m.B.(stepGrapher)
	return ok && g.StepsAsGraphs()
}

// resident is device integers and the host's copy of what they hold, so that a step can
// tell what the device has already.
type resident struct {
	dev  backend.I32
	host []int32
}

// sync makes the first len(want) elements of r.dev hold want and returns them: nothing moves
// when they do already, one launch adds 1 when want is r's values plus one, else an upload.
func (r *resident) sync(b backend.Backend, ds DeviceSampler, want []int32) backend.I32 {
	n := len(want)
	x := r.dev.Slice(0, n)
	switch {
	case slices.Equal(want, r.host):
	case len(want) == len(r.host) && plusOne(r.host, want):
		ds.AddI32(x, 1)
		copy(r.host, want)
	default:
		b.UploadI32(x, want)
		r.host = append(r.host[:0], want...)
	}
	return x
}

// plusOne reports whether b[i] = a[i] + 1 for every i.
func plusOne(a, b []int32) bool {
	for i := range a {
		if b[i] != a[i]+1 {
			return false
		}
	}
	return true
}

// drawings is the device's side of a model's draws: the draws' rows, streams (two words each,
// low first) and positions going in, their tokens and logprobs coming out; and a decode
// step's positions and slots.
type drawings struct {
	n                               int
	rows, streams, positions, drawn resident
	pos, slot                       resident
	logp                            backend.Buf
	words                           []int32
	hostLogp                        []float32
}

// drawing returns the model's draw buffers, for n draws or rows at least.
func (m *Model) drawing(n int) *drawings {
	if w := m.draw; w != nil && w.n >= n {
		return w
	}
	b := m.B
	r := func(k int) resident { return resident{dev: b.AllocI32(k)} }
	w := &drawings{n: n, rows: r(n), streams: r(2 * n), positions: r(n), drawn: r(n), pos: r(n), slot: r(n), logp: b.Alloc(n)}
	m.draw = w
	return w
}

// sampleOnDevice makes d's draws from the first rows rows of s's logits, on the device.
func (m *Model) sampleOnDevice(ds DeviceSampler, s *sampling, rows int, temperature float32, d Draws) ([]int32, []float32, error) {
	n := len(d.Rows)
	switch {
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
	w := m.drawing(n)
	w.words = resize(w.words, 2*n)
	for i, st := range d.Streams {
		w.words[2*i], w.words[2*i+1] = int32(uint32(st)), int32(uint32(st>>32))
	}
	distRows, streams, positions := w.rows.sync(m.B, ds, d.Rows), w.streams.sync(m.B, ds, w.words), w.positions.sync(m.B, ds, d.Positions)
	v := m.Config.VocabSize
	m.B.Softmax(s.probs, s.lse, s.logits, rows, v, 1/temperature)
	tokens := w.drawn.dev.Slice(0, n)
	ds.Sample(tokens, w.logp.Slice(0, n), s.probs, s.logits, s.lse, distRows, streams, positions, n, rows, v, d.Seed, d.Greedy,
		1/temperature)
	w.drawn.host, w.hostLogp = resize(w.drawn.host, n), resize(w.hostLogp, n)
	ds.DownloadI32(w.drawn.host, tokens)
	m.B.Download(w.hostLogp, w.logp.Slice(0, n))
	return w.drawn.host, w.hostLogp, nil
}
