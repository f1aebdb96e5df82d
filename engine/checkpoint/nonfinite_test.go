package checkpoint

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rookscript/rookscript/engine/safetensors"
)

// A checkpoint whose model or reference directory holds NaN or ±Inf (sealed: the manifest
// matches the damaged file) is refused at load, naming the file and the tensor.
func TestCheckpointRefusesNonFiniteWeights(t *testing.T) {
	refDir := writeModel(t, tinyConfig, 5)
	good := filepath.Join(t.TempDir(), "good")
	run, err := Create(good, Options{KeepLast: DefaultKeepLast})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, refDir, 0) // synced at step 0, so reference/ is in the checkpoint
	h.trainStep()
	name := mustSave(t, run, h.state())

	for _, c := range []struct {
		dir, tensor string
		value       float32
		want        string
	}{
		{"model", "transformer.h.0.mlp.c_fc.bias", float32(math.NaN()), `"transformer.h.0.mlp.c_fc.bias" holds NaN at element 1`},
		{"reference", "transformer.wpe.weight", float32(math.Inf(1)), `"transformer.wpe.weight" holds +Inf at element 1`},
	} {
		t.Run(c.dir, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			copyDir(t, good, dir)
			r, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			ck := filepath.Join(dir, "checkpoints", name)
			rewriteSafetensors(t, filepath.Join(ck, c.dir, "model.safetensors"), c.tensor, func(x safetensors.Tensor) safetensors.Tensor {
				x.Data = slices.Clone(x.Data)
				binary.LittleEndian.PutUint32(x.Data[4:], math.Float32bits(c.value))
				return x
			})
			rewriteState(t, ck, nil)
			_, err = r.Latest()
			wantErr(t, err, c.dir+"/model.safetensors", c.want, "non-finite weights are refused")
		})
	}
}
