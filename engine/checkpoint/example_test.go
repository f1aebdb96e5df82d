package checkpoint_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/checkpoint"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/optim"
)

// The life of a run: start from a model, save, and resume with the same reference.
func Example() {
	tmp, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(tmp)
	cfg := gpt2.Config{VocabSize: 29, MaxSeqLen: 16, NumLayers: 1, NumHeads: 2, Channels: 8, LayerNormE: 1e-5}
	start := filepath.Join(tmp, "start-model")
	if err := gpt2.SaveHF(start, cfg, gpt2.RandomParams(cfg, 1)); err != nil {
		panic(err)
	}

	// A new run: the reference identity is recorded from the model's source.
	run, err := checkpoint.Create(filepath.Join(tmp, "run"), checkpoint.Options{KeepLast: 3, BestMetric: "reward", BestMode: "max"})
	if err != nil {
		panic(err)
	}
	ref, refCfg, params, err := checkpoint.NewReference(start)
	if err != nil {
		panic(err)
	}
	policy, _ := gpt2.New(cpu.New(1), refCfg, params)
	opt, _ := optim.NewAdamW(policy, optim.DefaultAdamW())
	// ... training steps, run.AppendMetrics(step, metrics) ...
	st := checkpoint.NewState(50, policy, opt)
	st.Reference = ref
	st.Cursor = []byte(`{"index": 400}`)
	st.Metrics = map[string]float64{"reward": 0.5}
	if err := st.SetRNG("rollout", uint64(12345)); err != nil {
		panic(err)
	}
	name, err := run.Save(st)
	if err != nil {
		panic(err)
	}
	fmt.Println("saved", name)

	// Resume, in another process: everything comes from the checkpoint, the reference from
	// its recorded source with its hash checked. (Here the first process's run lets go of the
	// directory's lock first; a process that ends releases it anyway.)
	run.Close()
	run, err = checkpoint.Open(run.Dir)
	if err != nil {
		panic(err)
	}
	st, err = run.Latest()
	if err != nil {
		panic(err)
	}
	policy, _ = gpt2.New(cpu.New(1), st.Model, st.Params)
	opt, _ = optim.NewAdamW(policy, st.Optimizer.Config)
	if err := st.Apply(policy, opt); err != nil {
		panic(err)
	}
	refCfg, refParams, err := st.LoadReference()
	if err != nil {
		panic(err)
	}
	var seed uint64
	if err := st.GetRNG("rollout", &seed); err != nil {
		panic(err)
	}
	fmt.Println("resumed at step", st.Step, "seed", seed, "cursor", string(st.Cursor))
	fmt.Println("reference is the start model:", gpt2.ParamsHash(refCfg, refParams) == ref.Hash)
	// Output:
	// saved step-00000050
	// resumed at step 50 seed 12345 cursor {"index":400}
	// reference is the start model: true
}
