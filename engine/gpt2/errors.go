package gpt2

import (
	"fmt"
	"strings"
)

// ConfigError is an architecture setting the engine cannot run: in a Config, a config.json or
// an llm.c header. Key is config.json's name for it.
type ConfigError struct {
	Key    string // "vocab_size", "n_positions", "n_embd", "activation_function", ...
	Value  any    // the value given; nil when the key is missing
	Reason string // what the value must be ("positive", "at most 1024", "an integer")
}

func (e *ConfigError) Error() string {
	if e.Value == nil {
		return "missing " + e.Key
	}
	v := fmt.Sprint(e.Value)
	if s, ok := e.Value.(string); ok {
		v = fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%s must be %s, got %s", e.Key, e.Reason, v)
}

// jsonValue is what config.json holds where a key's value has the wrong type, as
// encoding/json describes it ("number 1e12", "string"); it prints unquoted.
type jsonValue string

// NonFiniteError is a weight that is NaN or ±Inf: the tensor (as the file names it) and its
// first such element in the file's order.
type NonFiniteError struct {
	Tensor  string
	Element int
	Value   float32
}

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("tensor %q holds %v at element %d: non-finite weights are refused", e.Tensor, e.Value, e.Element)
}

// LoadKind says why a model does not load.
type LoadKind int

const (
	// NotFound: no file or folder at the path, or a folder without config.json.
	NotFound LoadKind = iota + 1
	// NotAModel: a file or folder this package does not read (a pickle checkpoint, sharded
	// weights, a folder without model.safetensors, bytes of no known format).
	NotAModel
	// BadSpec: a random:<name>[@seed=<n>] source with an unknown name or a bad seed.
	BadSpec
	// BadHeader: an llm.c file shorter than its header, with a bad magic or an unsupported
	// version.
	BadHeader
	// BadSize: an llm.c file whose size is not what its header implies, or that ends early.
	BadSize
	// BadConfig: config.json or the llm.c header describes no model the engine runs; Err is
	// a *ConfigError (several, joined, from Config.Validate) or config.json's syntax error.
	BadConfig
	// BadTensor: a tensor that is unknown, given twice, missing, of the wrong shape, or an LM
	// head not tied to wte.
	BadTensor
	// NonFinite: a weight is NaN or ±Inf; Err is a *NonFiniteError.
	NonFinite
	// BadHash: weights and config.json whose content hash is not the one saved with them.
	BadHash
)

// LoadError is a model source that does not load: what is wrong, the file (or folder, or
// random: source) and the tensor concerned.
type LoadError struct {
	Kind   LoadKind
	File   string // the path or source as given, or the file within the folder at fault
	Format string // "llm.c checkpoint" for an llm.c file; "" otherwise
	Tensor string // the tensor at fault, as the file names it; "" when none is
	Reason string // what is wrong, for people
	Err    error  // the cause, if any: *ConfigError, *NonFiniteError, ...
}

func (e *LoadError) Error() string {
	var b strings.Builder
	if e.Kind == NotFound {
		b.WriteString("model not found: " + e.File)
		if e.File != "" && e.Reason != "" {
			b.WriteByte(' ')
		}
		b.WriteString(e.Reason)
		return b.String()
	}
	if e.Format != "" {
		b.WriteString(e.Format + " ")
	}
	b.WriteString(e.File + ": " + e.Reason)
	if e.Err != nil {
		if e.Reason != "" {
			b.WriteString(": ")
		}
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *LoadError) Unwrap() error { return e.Err }

// SaveError is a model a saver refuses to write, or could not: the file or folder and why.
type SaveError struct {
	File string
	// Holds names the entries of an existing folder that is not a model's (up to five, then
	// how many more), which saving into would overwrite; nil otherwise.
	Holds  []string
	Reason string // what is wrong, for people
	Err    error  // the cause, if any: *ConfigError, *NonFiniteError, ...
}

func (e *SaveError) Error() string {
	s := "saving " + e.File + ": "
	switch {
	case e.Holds != nil:
		return s + "the folder holds " + strings.Join(e.Holds, ", ") +
			" and no model.safetensors: it is not a model's folder, and saving would overwrite its config.json; save into a new folder or a model's"
	case e.Err != nil && e.Reason != "":
		return s + e.Reason + ": " + e.Err.Error()
	case e.Err != nil:
		return s + e.Err.Error()
	}
	return s + e.Reason
}

func (e *SaveError) Unwrap() error { return e.Err }
