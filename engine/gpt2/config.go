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

// Upper bounds on a configuration's sizes. Each is far above GPT-2's (and above every
// released dense transformer's), and together they keep the parameter count below 2^46, so
// that sizing a buffer from a config never overflows. They are no memory limit: a config
// within them still describes terabytes, and the loaders refuse it unless the file's tensors
// have exactly its shapes, which they check before allocating.
const (
	MaxVocabSize = 1 << 22 // vocab_size: GPT-2 has 50257, the largest released tokenizers about 256k
	MaxPositions = 1 << 20 // n_positions: GPT-2 has 1024; wpe is a learned row per position
	MaxLayers    = 1024    // n_layer: GPT-2 XL has 48, GPT-3 96
	MaxChannels  = 1 << 16 // n_embd: GPT-2 XL has 1600, GPT-3 12288; n_head ≤ n_embd as it divides it
)

// Validate reports a configuration the engine cannot run or that no real model has: a
// *ConfigError for each setting at fault, joined.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct {
		name   string
		v, max int
	}{{"vocab_size", c.VocabSize, MaxVocabSize}, {"n_positions", c.MaxSeqLen, MaxPositions},
		{"n_layer", c.NumLayers, MaxLayers}, {"n_head", c.NumHeads, MaxChannels}, {"n_embd", c.Channels, MaxChannels}} {
		switch {
		case f.v <= 0:
			errs = append(errs, &ConfigError{Key: f.name, Value: f.v, Reason: "positive"})
		case f.v > f.max:
			errs = append(errs, &ConfigError{Key: f.name, Value: f.v, Reason: fmt.Sprintf("at most %d", f.max)})
		}
	}
	if c.NumHeads > 0 && c.Channels%c.NumHeads != 0 {
		errs = append(errs, &ConfigError{Key: "n_embd", Value: c.Channels, Reason: fmt.Sprintf("a multiple of n_head (%d)", c.NumHeads)})
	}
	if !(c.LayerNormE > 0) {
		errs = append(errs, &ConfigError{Key: "layer_norm_epsilon", Value: c.LayerNormE, Reason: "positive"})
	}
	return errors.Join(errs...)
}

// HeadSize is C/NH.
func (c Config) HeadSize() int { return c.Channels / c.NumHeads }
