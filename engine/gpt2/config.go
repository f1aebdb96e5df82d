package gpt2

import (
	"errors"
	"fmt"
)

// Config is the architecture of a GPT-2 model. Field names follow Hugging Face's config.json.
type Config struct {
	VocabSize  int     // V: 50257 for the GPT-2 tokenizer
	MaxSeqLen  int     // n_positions: rows of the position embedding
	NumLayers  int     // L
	NumHeads   int     // NH
	Channels   int     // C = n_embd; the head size is C/NH
	LayerNormE float32 // layer_norm_epsilon, 1e-5 for GPT-2
}

// RookWorld124M is the RookWorld-LM / GPT-2 small architecture.
var RookWorld124M = Config{VocabSize: 50257, MaxSeqLen: 1024, NumLayers: 12, NumHeads: 12, Channels: 768, LayerNormE: 1e-5}

// Validate reports a configuration the engine cannot run.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int
	}{{"vocab_size", c.VocabSize}, {"n_positions", c.MaxSeqLen}, {"n_layer", c.NumLayers}, {"n_head", c.NumHeads}, {"n_embd", c.Channels}} {
		if f.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %d", f.name, f.v))
		}
	}
	if c.NumHeads > 0 && c.Channels%c.NumHeads != 0 {
		errs = append(errs, fmt.Errorf("n_embd %d is not divisible by n_head %d", c.Channels, c.NumHeads))
	}
	if !(c.LayerNormE > 0) {
		errs = append(errs, fmt.Errorf("layer_norm_epsilon must be positive, got %g", c.LayerNormE))
	}
	return errors.Join(errs...)
}

// HeadSize is C/NH.
func (c Config) HeadSize() int { return c.Channels / c.NumHeads }
