package gpt2

import (
	"errors"
	"fmt"
	"math"
	"testing"
)

// configErrorFor returns the *ConfigError for key among those err holds (Config.Validate joins
// one per setting at fault), or nil.
func configErrorFor(err error, key string) *ConfigError {
	var ce *ConfigError
	if errors.As(err, &ce) && ce.Key == key {
		return ce
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if ce := configErrorFor(e, key); ce != nil {
				return ce
			}
		}
	case interface{ Unwrap() error }:
		return configErrorFor(u.Unwrap(), key)
	}
	return nil
}

// wantLoadError checks that err is a *LoadError of kind in file (tensor too, when given) and
// returns it.
func wantLoadError(t *testing.T, err error, kind LoadKind, file string) *LoadError {
	t.Helper()
	var le *LoadError
	if !errors.As(err, &le) || le.Kind != kind || le.File != file {
		t.Fatalf("error %v (%+v), want a *LoadError of kind %d in %s", err, le, kind, file)
	}
	return le
}

// wantConfigError checks that err holds a *ConfigError for key with value (any value when
// value is anyValue).
func wantConfigError(t *testing.T, err error, key string, value any) {
	t.Helper()
	ce := configErrorFor(err, key)
	if ce == nil || (value != anyValue && ce.Value != value) {
		t.Fatalf("error %v, want a *ConfigError for %s = %v (%T)", err, key, value, value)
	}
}

var anyValue = new(int)

// The messages people read quote the file, the key and the value as they wrote them; docs
// (RELIABILITY.md, lua-api.md) and the Lua binding quote these.
func TestErrorMessages(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&LoadError{Kind: BadConfig, File: "m/config.json", Err: &ConfigError{Key: "n_positions", Value: 1_000_000_000_000, Reason: fmt.Sprintf("at most %d", MaxPositions)}},
			"m/config.json: n_positions must be at most 1048576, got 1000000000000"},
		{&LoadError{Kind: BadConfig, File: "m/config.json", Err: &ConfigError{Key: "n_positions", Value: jsonValue("number 1e12"), Reason: "an integer"}},
			"m/config.json: n_positions must be an integer, got number 1e12"},
		{&ConfigError{Key: "model_type", Value: "llama", Reason: "gpt2"}, `model_type must be gpt2, got "llama"`},
		{&ConfigError{Key: "n_embd"}, "missing n_embd"},
		{&LoadError{Kind: NotFound, File: "checkpoints/missing"}, "model not found: checkpoints/missing"},
		{&LoadError{Kind: NotFound, Reason: "empty model path"}, "model not found: empty model path"},
		{&LoadError{Kind: NotFound, File: "d", Reason: "is a directory without config.json"}, "model not found: d is a directory without config.json"},
		{&LoadError{Kind: BadSpec, File: "random:nope", Reason: `unknown random model "nope"; known: 124m, small, tiny`},
			`random:nope: unknown random model "nope"; known: 124m, small, tiny`},
		{&LoadError{Kind: NonFinite, File: "m.bin", Format: "llm.c checkpoint", Tensor: "wte.weight", Err: &NonFiniteError{Tensor: "wte.weight", Element: 3, Value: float32(math.NaN())}},
			`llm.c checkpoint m.bin: tensor "wte.weight" holds NaN at element 3: non-finite weights are refused`},
		{&SaveError{File: "m", Err: &NonFiniteError{Tensor: "wte.weight", Element: 3, Value: float32(math.NaN())}},
			`saving m: tensor "wte.weight" holds NaN at element 3: non-finite weights are refused`},
		{&SaveError{File: "run", Holds: []string{"config.json", "recipe.lua"}},
			"saving run: the folder holds config.json, recipe.lua and no model.safetensors: it is not a model's folder, and saving would overwrite its config.json; save into a new folder or a model's"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("message\n%s\nwant\n%s", got, c.want)
		}
	}
}
