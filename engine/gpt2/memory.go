package gpt2

import (
	"fmt"
	"strings"

	"github.com/dustin/go-humanize"
)

// Use says what one model does; it fixes what the model holds on its device.
type Use struct {
	Train      bool // trained: gradients, AdamW moments, every layer's activations and the backward's scratch
	Rows       int  // the most tokens of one forward (a micro-batch, or a part of a Prefill)
	Scored     int  // the most scored rows of one forward
	KVSlots    int  // its sampler's KV cache: sequences ...
	KVCap      int  // ... of up to this many positions
	SampleRows int  // rows of its sampler's next-token distribution (prompts of a Prefill, rows of a Decode)
}

// Footprint is the analytic size in bytes of what models hold on their device, by kind: what
// `make bench` sets beside the measured peak memory, and what recipes size their
// micro-batches with. It counts the buffers Model, KVCache and AdamW allocate, exactly.
type Footprint struct {
	Weights     int64 // parameters
	Grads       int64 // gradients
	Moments     int64 // AdamW's first and second moments
	Activations int64 // a forward's saved activations (every layer when training, one layer otherwise)
	Backward    int64 // the backward's scratch
	Head        int64 // one chunk of LM-head logits and the scored rows' head inputs and per-row values
	KVCache     int64 // keys and values of every layer
	Sampling    int64 // the sampler's logits and probabilities
	Data        int64 // the step's batch as the recipe and the engine hold it on the host (an estimate; set by a plan, not by Footprint)
}

// Footprint is the analytic memory of a model of configuration c used as u.
func (c Config) Footprint(u Use) Footprint {
	const f32 = 4
	params := int64(NewLayout(c).Total)
	f := Footprint{Weights: f32 * params}
	if u.Train {
		f.Grads, f.Moments = f32*params, 2*f32*params
	}
	if u.Rows > 0 {
		n, r := int64(roundRows(u.Rows)), int64(max(u.Scored, 1))
		layers := int64(1)
		if u.Train {
			layers = int64(c.NumLayers)
			f.Backward = f32 * (n*int64(backwardFloats(c)) + int64(min(int(r), headRowsFor(c.VocabSize))*c.Channels))
		}
		f.Activations = f32 * n * (layers*int64(layerFloats(c)) + int64(trunkFloats(c)))
		f.Head = f32 * (r*int64(scoredFloats(c)) + int64(min(int(r), headRowsFor(c.VocabSize))*c.VocabSize))
	}
	if u.KVSlots > 0 {
		// Keys and values of every layer, and each slot's shared-prefix entry (two int32).
		f.KVCache = f32*2*int64(c.NumLayers)*int64(u.KVSlots)*int64(u.KVCap)*int64(c.Channels) + 4*2*int64(u.KVSlots)
	}
	if u.SampleRows > 0 {
		f.Sampling = f32 * int64(u.SampleRows) * int64(2*c.VocabSize+c.Channels+1)
	}
	return f
}

// Plus adds two footprints (a policy and its reference model, say).
func (f Footprint) Plus(g Footprint) Footprint {
	return Footprint{f.Weights + g.Weights, f.Grads + g.Grads, f.Moments + g.Moments, f.Activations + g.Activations,
		f.Backward + g.Backward, f.Head + g.Head, f.KVCache + g.KVCache, f.Sampling + g.Sampling, f.Data + g.Data}
}

// Total is the sum of every part.
func (f Footprint) Total() int64 {
	return f.Weights + f.Grads + f.Moments + f.Activations + f.Backward + f.Head + f.KVCache + f.Sampling + f.Data
}

// String lists the non-zero parts, e.g. "weights 29 MB, grads 29 MB, ...".
func (f Footprint) String() string {
	var parts []string
	for _, p := range []struct {
		name string
		v    int64
	}{{"weights", f.Weights}, {"grads", f.Grads}, {"Adam moments", f.Moments}, {"activations", f.Activations},
		{"backward scratch", f.Backward}, {"LM head chunk", f.Head}, {"KV cache", f.KVCache}, {"sampler", f.Sampling}, {"batch data", f.Data}} {
		if p.v > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", p.name, humanize.Bytes(uint64(p.v))))
		}
	}
	return strings.Join(parts, ", ")
}

// roundRows is the row count activations are allocated for: a multiple of 64, so that batches
// growing by a few tokens do not reallocate.
func roundRows(n int) int { return (n + 63) / 64 * 64 }

// MicroTokens is the size at which a micro-batch stops paying for its memory: the trunk's
// GEMMs have as many rows as the micro-batch has tokens, and at a few thousand rows they
// already run at the machine's rate, so a larger micro-batch only costs memory.
const MicroTokens = 4096

// FitMicroBatch is the most sequences, up to most, that one micro-batch of a training loop
// holds: rows(n) tokens within MicroTokens and size(n) bytes within budget. Sequences come in
// whole units (a GRPO group, packed with its prompt once) when one unit fits. At least one
// sequence, even over the budget: fits is false then, for the caller to report.
func FitMicroBatch(most, unit int, budget int64, rows func(int) int, size func(int) int64) (n int, fits bool) {
	ok := func(n int) bool { return n <= most && rows(n) <= MicroTokens && size(n) <= budget }
	step := 1
	if unit > 1 && most >= unit && ok(unit) {
		step = unit
	}
	n = step
	for ok(n + step) {
		n += step
	}
	return n, size(n) <= budget
}
