package grpo

import (
	"context"
	"errors"
	"testing"

	"github.com/rookscript/rookscript/engine/gpt2"
)

// TestStepRefusesAnotherReference is DESIGN §6.6 in the engine: a trainer that holds the
// recorded reference's hash refuses a reference whose weights are not it. The weights are
// hashed again only when the model's ParamGeneration changes — not at every step.
func TestStepRefusesAnotherReference(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Beta = 0.1
	tr, b := setup(t, 1)
	start := tr.Ref.ParamsHost()
	other := tinyModel(t, 2, 3).ParamsHost()
	recorded, otherHash := gpt2.ParamsHash(tinyConfig, start), gpt2.ParamsHash(tinyConfig, other)
	tr.RefHash = recorded
	refused := func(what string, want bool) {
		t.Helper()
		_, err := tr.Step(context.Background(), b, cfg)
		var re *ReferenceError
		switch {
		case want && (!errors.As(err, &re) || *re != (ReferenceError{Hash: otherHash, Recorded: recorded})):
			t.Fatalf("%s: %v, want the refusal naming both hashes", what, err)
		case !want && err != nil:
			t.Fatalf("%s: %v", what, err)
		}
	}
	refused("the recorded reference", false)

	tr.Ref.B.Upload(tr.Ref.Params, other) // behind the generation's back
	refused("a write its generation does not count (the weights are not hashed every step)", false)
	tr.Ref.ParamsWritten()
	refused("after the write is counted", true)
	cfg.Beta = 0
	refused("beta = 0 never runs the reference", false)
	cfg.Beta = 0.1

	if err := tr.Ref.SetParams(start); err != nil {
		t.Fatal(err)
	}
	refused("SetParams counts its write: back to the recorded weights", false)
	if err := tr.Ref.SetParams(other); err != nil {
		t.Fatal(err)
	}
	refused("SetParams, another reference's weights", true)

	tr.Ref = tinyModel(t, 1, 3) // the same generation, another model
	refused("another model holding the recorded weights", false)
	tr.Ref = tinyModel(t, 2, 3)
	refused("another model holding other weights", true)
}
