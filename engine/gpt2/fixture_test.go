package gpt2

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/rookscript/rookscript/engine/safetensors"
)

// The PyTorch golden fixture in testdata/tiny, written by testdata/gen_fixtures.py: a tiny
// GPT-2 (V=67, T=24, L=2, NH=3, C=24) and one packed batch of 3 sequences (lengths 5, 11, 8).
const fixtureDir = "testdata/tiny"

// fixture holds testdata/tiny. References were computed in float64 from exactly the float32
// weights and inputs stored here, then rounded to float32.
type fixture struct {
	Config Config
	Params []float32 // model.safetensors, in Layout order and orientation

	// The packed batch. Each sequence is run on its own (positions restart at 0); the rows are
	// every position with a next token in its own sequence, scored against that token.
	Tokens     []int32   // [N]
	Lens       []int32   // [sequences]
	Rows       []int32   // [R] indices into Tokens
	Targets    []int32   // [R]
	Weights    []float32 // [R] w_r, mixed sign like advantages
	EntWeights []float32 // [R] e_r
	Tau        float32   // sampling temperature of logp and entropy

	Logits  []float32 // [N, V] raw logits (temperature 1) at every position
	Logp    []float32 // [R] log softmax(logits_r / tau)[target_r]
	Entropy []float32 // [R] entropy of softmax(logits_r / tau)
	Loss    float32   // -Σ w_r logp_r + Σ e_r H_r
	Grads   map[string][]float32

	// Three torch.optim.AdamW steps on the same batch, decay on matrices only.
	AdamW       fixtureAdamW
	AdamWLoss   []float32 // the loss before each step
	AdamWParams map[string][]float32
}

// fixtureAdamW is torch.optim.AdamW's configuration in the fixture.
type fixtureAdamW struct {
	LR, Beta1, Beta2, Eps, WeightDecay float64
	Steps                              int
}

func loadFixture(t testing.TB) *fixture {
	t.Helper()
	cfg, params, err := LoadHF(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := safetensors.Read(filepath.Join(fixtureDir, "fixture.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	floats := func(name string) []float32 {
		ts, ok := st.Tensors[name]
		if !ok {
			t.Fatalf("fixture has no %q", name)
		}
		v, err := ts.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	ints := func(name string) []int32 {
		ts, ok := st.Tensors[name]
		if !ok {
			t.Fatalf("fixture has no %q", name)
		}
		v, err := ts.Ints()
		if err != nil {
			t.Fatal(err)
		}
		out := make([]int32, len(v))
		for i, x := range v {
			out[i] = int32(x)
		}
		return out
	}
	meta := func(key string) float64 {
		v, err := strconv.ParseFloat(st.Metadata[key], 64)
		if err != nil {
			t.Fatalf("fixture metadata %s: %v", key, err)
		}
		return v
	}
	f := &fixture{
		Config: cfg, Params: params,
		Tokens: ints("tokens"), Lens: ints("lens"), Rows: ints("rows"), Targets: ints("targets"),
		Weights: floats("weights"), EntWeights: floats("ent_weights"), Tau: floats("tau")[0],
		Logits: floats("logits"), Logp: floats("logp"), Entropy: floats("entropy"), Loss: floats("loss")[0],
		Grads: map[string][]float32{}, AdamWLoss: floats("adamw.loss"), AdamWParams: map[string][]float32{},
		AdamW: fixtureAdamW{LR: meta("adamw_lr"), Beta1: meta("adamw_beta1"), Beta2: meta("adamw_beta2"),
			Eps: meta("adamw_eps"), WeightDecay: meta("adamw_weight_decay"), Steps: int(meta("adamw_steps"))},
	}
	for _, ten := range NewLayout(cfg).Tensors {
		f.Grads[ten.Name] = floats("grad." + ten.Name)
		f.AdamWParams[ten.Name] = floats("adamw." + ten.Name)
		if len(f.Grads[ten.Name]) != ten.Size || !slices.Equal(st.Tensors["grad."+ten.Name].Shape, ten.Shape) ||
			!slices.Equal(st.Tensors["adamw."+ten.Name].Shape, ten.Shape) {
			t.Fatalf("fixture tensor %s is not shaped %v", ten.Name, ten.Shape)
		}
	}
	if n := 2*len(f.Grads) + 12; len(st.Tensors) != n {
		t.Fatalf("fixture has %d tensors, want %d", len(st.Tensors), n)
	}
	return f
}

// TestFixtureConsistency checks the fixture against itself and the loaders: both checkpoint
// formats hold the same weights, our savers reproduce the generator's files byte for byte (the
// safetensors once its content hash is taken out), and
// the stored logprobs, entropies and loss follow from the stored logits.
func TestFixtureConsistency(t *testing.T) {
	f := loadFixture(t)
	want := Config{VocabSize: 67, MaxSeqLen: 24, NumLayers: 2, NumHeads: 3, Channels: 24, LayerNormE: 1e-5}
	if f.Config != want {
		t.Fatalf("config %+v, want %+v", f.Config, want)
	}
	bcfg, bparams, err := LoadLLMC(filepath.Join(fixtureDir, "model.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if bcfg != f.Config || !bitsEqual(bparams, f.Params) {
		t.Error("model.bin and model.safetensors hold different models")
	}

	tmp := t.TempDir()
	if err := SaveHF(filepath.Join(tmp, "hf"), f.Config, f.Params); err != nil {
		t.Fatal(err)
	}
	if err := SaveLLMC(filepath.Join(tmp, "model.bin"), f.Config, f.Params); err != nil {
		t.Fatal(err)
	}
	// Ours differs from the generator's only by the content hash in its metadata: without it,
	// it must be the same file.
	ours, err := safetensors.Read(filepath.Join(tmp, "hf", "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ours.Metadata[HFHashKey], ParamsHash(f.Config, f.Params); got != want {
		t.Errorf("model.safetensors records the hash %q, want %q", got, want)
	}
	delete(ours.Metadata, HFHashKey)
	var ts []safetensors.Tensor
	for _, n := range ours.Names() {
		ts = append(ts, ours.Tensors[n])
	}
	if err := safetensors.Write(filepath.Join(tmp, "unhashed.safetensors"), ts, ours.Metadata); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]string{
		{"config.json", "hf/config.json"}, {"model.safetensors", "unhashed.safetensors"}, {"model.bin", "model.bin"},
	} {
		a, err1 := os.ReadFile(filepath.Join(fixtureDir, c[0]))
		b, err2 := os.ReadFile(filepath.Join(tmp, c[1]))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("our writer does not reproduce %s byte for byte (%v, %v)", c[0], err1, err2)
		}
	}

	// The packed batch.
	n, v := len(f.Tokens), f.Config.VocabSize
	var rows, targets []int32
	start := 0
	for _, l := range f.Lens {
		for j := 0; j+1 < int(l); j++ {
			rows = append(rows, int32(start+j))
			targets = append(targets, f.Tokens[start+j+1])
		}
		start += int(l)
	}
	if start != n || !slices.Equal(rows, f.Rows) || !slices.Equal(targets, f.Targets) {
		t.Fatalf("rows %v / targets %v do not follow from tokens and lens %v", f.Rows, f.Targets, f.Lens)
	}
	r := len(f.Rows)
	if len(f.Logits) != n*v || len(f.Weights) != r || len(f.EntWeights) != r || len(f.Logp) != r || len(f.Entropy) != r {
		t.Fatal("fixture array lengths disagree")
	}
	if f.Tau != 0.8 || f.AdamW != (fixtureAdamW{LR: 0.01, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Steps: 3}) ||
		len(f.AdamWLoss) != f.AdamW.Steps || f.AdamWLoss[0] != f.Loss {
		t.Errorf("tau %g, AdamW %+v, losses %v", f.Tau, f.AdamW, f.AdamWLoss)
	}

	// logp, entropy and loss from the stored logits, in float64: agreement to float32 rounding
	// of the logits (|logit| < 1 here, so about 1e-7 absolute).
	var loss float64
	for i, row := range f.Rows {
		z := f.Logits[int(row)*v : int(row+1)*v]
		m := math.Inf(-1)
		for _, x := range z {
			m = math.Max(m, float64(x)/float64(f.Tau))
		}
		var sum float64
		for _, x := range z {
			sum += math.Exp(float64(x)/float64(f.Tau) - m)
		}
		lse := m + math.Log(sum)
		logp := float64(z[f.Targets[i]])/float64(f.Tau) - lse
		var ent float64
		for _, x := range z {
			lq := float64(x)/float64(f.Tau) - lse
			ent -= math.Exp(lq) * lq
		}
		if math.Abs(logp-float64(f.Logp[i])) > 1e-6 || math.Abs(ent-float64(f.Entropy[i])) > 1e-6 {
			t.Errorf("row %d: logp %g entropy %g from logits, fixture %g %g", i, logp, ent, f.Logp[i], f.Entropy[i])
		}
		loss += -float64(f.Weights[i])*logp + float64(f.EntWeights[i])*ent
	}
	if math.Abs(loss-float64(f.Loss)) > 1e-5 {
		t.Errorf("loss %g from logits, fixture %g", loss, f.Loss)
	}

	// Every gradient is finite and every tensor that can influence a scored row moves.
	for name, g := range f.Grads {
		nonzero := false
		for _, x := range g {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("grad %s is not finite", name)
			}
			nonzero = nonzero || x != 0
		}
		if !nonzero {
			t.Errorf("grad %s is all zero", name)
		}
	}
}
