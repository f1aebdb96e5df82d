// Package gpt2test builds the tiny random GPT-2 models that the engine's tests sample from,
// train and checkpoint, as net/http/httptest builds servers for HTTP tests: one architecture
// and one constructor instead of a copy in every package.
//
//	m := gpt2test.Random(t, cpu.New(2), gpt2test.Tiny(), 5, 10)
//
// A test that needs another shape changes a field of Tiny() (a shorter context, a wider
// model); every model is GPT-2's seeded initialisation (gpt2.RandomParams), so a test's
// numbers depend only on its config, seed and scale.
package gpt2test

import (
	"math"
	"testing"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/gpt2"
)

// Stop is the tiny vocabulary's last token, which the tests use as the stop token.
const Stop = 28

// Tiny returns the architecture the engine's tests share: a vocabulary of 29 tokens (the
// last, Stop, ends completions), 2 layers of 2 heads, 16 channels and a context of 48.
func Tiny() gpt2.Config {
	return gpt2.Config{VocabSize: Stop + 1, MaxSeqLen: 48, NumLayers: 2, NumHeads: 2, Channels: 16, LayerNormE: 1e-5}
}

// Params returns GPT-2's initialisation of cfg from seed with every parameter multiplied by
// scale: 1 gives near-uniform next-token distributions, 10 peaked, position-dependent ones.
func Params(cfg gpt2.Config, seed uint64, scale float32) []float32 {
	p := gpt2.RandomParams(cfg, seed)
	if scale != 1 {
		for i := range p {
			p[i] *= scale
		}
	}
	return p
}

// New builds a model of cfg holding params on b; an error fails the test.
func New(t testing.TB, b backend.Backend, cfg gpt2.Config, params []float32) *gpt2.Model {
	t.Helper()
	m, err := gpt2.New(b, cfg, params)
	if err != nil {
		t.Fatalf("gpt2test: %v", err)
	}
	return m
}

// Random builds a model of cfg on b with Params(cfg, seed, scale).
func Random(t testing.TB, b backend.Backend, cfg gpt2.Config, seed uint64, scale float32) *gpt2.Model {
	t.Helper()
	return New(t, b, cfg, Params(cfg, seed, scale))
}

// FirstBitDiff is the first index at which a and b differ in their bits, -1 if none (or the
// length of the shorter when only their lengths differ): the check of a result that must be
// the same bits, not merely close (DESIGN §6.1).
func FirstBitDiff(a, b []float32) int {
	for i := range min(len(a), len(b)) {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}
