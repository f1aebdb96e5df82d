package gpt2

import "testing"

// TestFootprintParts: hand-computed sizes of GPT-2 124M's parts (weights, gradients, moments,
// KV cache) and the rule that a training model holds every layer and a scoring one one layer.
func TestFootprintParts(t *testing.T) {
	c := RookWorld124M
	const params = 124439808 // GPT-2 124M with the unpadded vocabulary of 50257
	f := c.Footprint(Use{Train: true, Rows: 2304, Scored: 1024, KVSlots: 64, KVCap: 144, SampleRows: 64})
	if f.Weights != 4*params || f.Grads != 4*params || f.Moments != 8*params {
		t.Errorf("weights %d, grads %d, moments %d; want %d, %d, %d", f.Weights, f.Grads, f.Moments, 4*params, 4*params, 8*params)
	}
	if want := int64(4*2*12*64*144*768 + 8*64); f.KVCache != want {
		t.Errorf("KV cache %d, want %d", f.KVCache, want)
	}
	if want := int64(4 * 64 * (2*50257 + 768 + 1)); f.Sampling != want {
		t.Errorf("sampling %d, want %d", f.Sampling, want)
	}
	perRow := int64(4 * (12*(16*768+4+12) + 2*768 + 5))
	if f.Activations != 2304*perRow {
		t.Errorf("training activations %d, want %d", f.Activations, 2304*perRow)
	}
	s := c.Footprint(Use{Rows: 2304, Scored: 1024})
	if want := int64(2304 * 4 * ((16*768 + 4 + 12) + 2*768 + 5)); s.Activations != want || s.Grads != 0 || s.Backward != 0 {
		t.Errorf("scoring: activations %d (want %d), grads %d, backward %d", s.Activations, want, s.Grads, s.Backward)
	}
	if want := int64(4 * (1024*(768+7) + 320*50257)); s.Head != want {
		t.Errorf("scoring head %d, want %d: one chunk of 320 rows", s.Head, want)
	}
}
