// Package invariance holds the tests of DESIGN §6.1 on the CUDA backend, run by the emulator's
// tests (engine/backend/cuda/emu) and by the GPU's (engine/backend/cuda, -tags cuda): the
// forward is batch-invariant, so the sampler's logprobs are the training forward's bit for bit.
package invariance

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/gpt2/gpt2test"
	"github.com/rookscript/rookscript/engine/rollout"
)

// Run runs every check on b.
func Run(t *testing.T, b backend.Backend) {
	t.Run("MatMulRowInvariance", func(t *testing.T) { matMulRowInvariance(t, b) })
	t.Run("RecordedLogProbsMatchForward", func(t *testing.T) { recordedLogProbsMatchForward(t, b) })
}

// matMulRowInvariance: the CUDA backend's forward product gives a row the same bits alone,
// among 7, 65 or 200 rows (within one tile and across several; at 200 rows the product takes
// the wide tiles, alone the narrow ones), with a bias and a residual or without. c spans
// several of either tile's k steps (16 and 64) and ends in a partial one.
func matMulRowInvariance(t *testing.T, b backend.Backend) {
	r := rand.New(rand.NewPCG(3, 4))
	const rows, c, oc = 200, 141, 64 * 35 // 35 tiles of 64 columns
	host := func(n int) backend.Buf { return RandBuf(b, r, n) }
	inp, w, bias, res := host(rows*c), host(oc*c), host(oc), host(rows*oc)
	get := func(x backend.Buf, lo, n int) []float32 {
		v := make([]float32, n)
		b.Download(v, x.Slice(lo, n))
		return v
	}
	for _, withRes := range []bool{false, true} {
		one := b.Alloc(oc)
		if withRes {
			b.MatMulAdd(one, res.Slice(5*oc, oc), inp.Slice(5*c, c), w, bias, 1, c, oc)
		} else {
			b.MatMul(one, inp.Slice(5*c, c), w, bias, 1, c, oc)
		}
		want := get(one, 0, oc)
		for _, n := range []int{7, 65, rows} {
			out := b.Alloc(n * oc)
			if withRes {
				b.MatMulAdd(out, res, inp, w, bias, n, c, oc)
			} else {
				b.MatMul(out, inp, w, bias, n, c, oc)
			}
			if i := gpt2test.FirstBitDiff(get(out, 5*oc, oc), want); i >= 0 {
				t.Fatalf("residual %v: row 5 of %d rows differs at column %d from the row alone", withRes, n, i)
			}
		}
	}
}

// recordedLogProbsMatchForward is DESIGN §6.1 on the CUDA backend (on a GPU, or its kernels
// under the emulator): the logprobs the sampler records (prefill, decode steps over a shared prompt) are
// the training forward's bit for bit, each completion alone and all of them packed (more rows
// than a tile of the product kernel), the prompts written out or shared as GRPO packs them,
// the LM head in one chunk or in chunks of 5 rows.
func recordedLogProbsMatchForward(t *testing.T, bk backend.Backend) {
	cfg := gpt2test.Tiny()
	cfg.MaxSeqLen = 40
	m := gpt2test.Random(t, bk, cfg, 5, 10)
	if !m.BatchInvariant() {
		t.Fatal("the CUDA backend does not say it is batch-invariant")
	}
	r := rand.New(rand.NewPCG(3, 3))
	var ps [][]int32
	for _, n := range []int{6, 2, 11} {
		p := make([]int32, n)
		for i := range p {
			p[i] = int32(r.IntN(gpt2test.Stop))
		}
		ps = append(ps, p)
	}
	rc := rollout.Config{Group: 3, MaxNewTokens: 14, Temperature: 0.7, Seed: 7, StopToken: gpt2test.Stop}
	b, err := rollout.NewSampler(m).Generate(context.Background(), ps, rc)
	if err != nil {
		t.Fatal(err)
	}
	if m.StepsAsGraphs() {
		// Again with the token drawn most often after the first as the stop token, so that some
		// completions finish early and ride along in the decode batch (the draws before a stop
		// are the same).
		count := map[int32]int{}
		for _, c := range b.Completions {
			for _, tok := range c.Tokens[1:] {
				count[tok]++
			}
		}
		for tok, n := range count {
			if n > count[rc.StopToken] || n == count[rc.StopToken] && tok < rc.StopToken {
				rc.StopToken = tok
			}
		}
		if b, err = rollout.NewSampler(m).Generate(context.Background(), ps, rc); err != nil {
			t.Fatal(err)
		}
		if b.Stats.RiderTokens == 0 {
			t.Fatal("no finished completion rode along in the decode batch: the check would not see riders")
		}
	}
	var packed, shared gpt2.Batch
	var want []float32
	for k, c := range b.Completions {
		p := ps[c.Prompt]
		seq := append(slices.Clone(p), c.Tokens...)
		var alone gpt2.Batch
		alone.Add(seq, len(p)-1)
		var out gpt2.Output
		if err := m.Forward(&alone, b.Temperature, false, &out); err != nil {
			t.Fatal(err)
		}
		if i := gpt2test.FirstBitDiff(out.LogP, c.LogProbs); i >= 0 {
			t.Fatalf("completion %d alone: token %d logprob %g at sampling, %g in the forward", k, i, c.LogProbs[i], out.LogP[i])
		}
		packed.Add(seq, len(p)-1)
		if k%3 == 0 {
			shared.Add(p[:len(p)-1], len(p))
		}
		shared.AddContinuation(append([]int32{p[len(p)-1]}, c.Tokens...), 0)
		want = append(want, c.LogProbs...)
	}
	if len(packed.Tokens) <= 64 {
		t.Fatalf("the packed batch has %d rows: want more than one tile's 64", len(packed.Tokens))
	}
	for _, headRows := range []int{0, 5} {
		m.HeadRows = headRows
		for name, batch := range map[string]*gpt2.Batch{"packed": &packed, "prompts shared": &shared} {
			var out gpt2.Output
			if err := m.Forward(batch, b.Temperature, false, &out); err != nil {
				t.Fatal(err)
			}
			if i := gpt2test.FirstBitDiff(out.LogP, want); i >= 0 {
				t.Fatalf("%s, head chunks of %d: scored row %d logprob %g at sampling, %g in the forward", name, headRows, i, want[i], out.LogP[i])
			}
		}
	}
}

// RandBuf is n standard normal values from r, uploaded to a new buffer of b.
func RandBuf(b backend.Backend, r *rand.Rand, n int) backend.Buf {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	x := b.Alloc(n)
	b.Upload(x, v)
	return x
}
