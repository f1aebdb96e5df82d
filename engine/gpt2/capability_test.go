package gpt2_test

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/gpt2/gpt2test"
)

// capabilityBits runs a model with GPT-2's head size (64 channels) and a k-blocked MLP
// projection through a packed forward (sequences of their own, and completions continuing a
// prompt), a backward, and a prefill and decode steps over a shared prompt, and returns a
// digest of each part's bits.
func capabilityBits(t *testing.T) (forward, grads, decode string) {
	cfg := gpt2.Config{VocabSize: 301, MaxSeqLen: 64, NumLayers: 2, NumHeads: 6, Channels: 384, LayerNormE: 1e-5}
	m := gpt2test.Random(t, cpu.New(2), cfg, 7, 3)
	r := rand.New(rand.NewPCG(8, 9))
	seq := func(n int) []int32 {
		s := make([]int32, n)
		for i := range s {
			s[i] = int32(r.IntN(cfg.VocabSize))
		}
		return s
	}
	var b gpt2.Batch
	for _, l := range []int{40, 17, 33} {
		b.Add(seq(l + 1)[:l], 1)
	}
	b.Add(seq(20), 20) // a prompt and completions continuing it, as a GRPO update packs them
	for _, l := range []int{9, 30, 1} {
		b.AddContinuation(seq(l), 0)
	}
	var out gpt2.Output
	if err := m.Forward(&b, 0.8, true, &out); err != nil {
		t.Fatal(err)
	}
	forward = digest(out.LogP, out.Entropy)
	dlogp := make([]float32, len(out.LogP))
	for i := range dlogp {
		dlogp[i] = float32(r.NormFloat64())
	}
	m.ZeroGrads()
	if err := m.Backward(dlogp, nil); err != nil {
		t.Fatal(err)
	}
	grads = digest(m.GradsHost())

	kv, err := m.NewKVCache(4, 48)
	if err != nil {
		t.Fatal(err)
	}
	var p gpt2.Batch
	p.Add(seq(21), 21)
	d, err := m.Prefill(kv, &p, []int32{0}, 1)
	if err != nil {
		t.Fatal(err)
	}
	parts := [][]float32{append([]float32(nil), d.Logits...)}
	for s := 1; s < 4; s++ {
		if err := m.ShareSlot(kv, s, 0, 21); err != nil {
			t.Fatal(err)
		}
	}
	slots, pos := []int32{0, 1, 2, 3}, make([]int32, 4)
	for step := range 5 {
		for i := range pos {
			pos[i] = int32(21 + step)
		}
		d, err := m.Decode(kv, seq(4), slots, pos, 1)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, append([]float32(nil), d.Logits...), append([]float32(nil), d.LSE...))
	}
	return forward, grads, digest(parts...)
}

func digest(parts ...[]float32) string {
	h := sha256.New()
	for _, p := range parts {
		for _, v := range p {
			binary.Write(h, binary.LittleEndian, math.Float32bits(v))
		}
	}
	return fmt.Sprintf("%x", h.Sum(nil)[:8])
}

// TestCapabilitySameBits: a process capped at AVX2 (ROOKSCRIPT_CPU_CAPABILITY=avx2, as a
// processor without AVX-512 runs) computes the forward's logprobs and entropies and the
// sampler's logits and log-sum-exps bit for bit as the AVX-512 path does: products, attention,
// LayerNorm and the softmax run the same sums on either. The backward's GEMMs are OpenBLAS's,
// whose kernels for each processor family sum in their own order: with OpenBLAS held to the
// uncapped process's kernels, the gradients are the same bits too, so OpenBLAS's family is the
// only thing that separates the paths.
func TestCapabilitySameBits(t *testing.T) {
	if os.Getenv("ROOKSCRIPT_SAME_BITS_CHILD") == "1" {
		f, g, d := capabilityBits(t)
		fmt.Printf("bits forward=%s grads=%s decode=%s\n", f, g, d)
		return
	}
	if cpu.Capability() != "AVX-512" {
		t.Skipf("kernels run %s here, not AVX-512: there is no wider path to hold the AVX2 one to", cpu.Capability())
	}
	f, g, d := capabilityBits(t)
	child := func(extra ...string) (forward, grads, decode string) {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestCapabilitySameBits$", "-test.count=1", "-test.v")
		env := append([]string{"ROOKSCRIPT_SAME_BITS_CHILD=1", cpu.CapabilityEnv + "=avx2"}, extra...)
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, cpu.CapabilityEnv+"=") && !strings.HasPrefix(kv, "OPENBLAS_CORETYPE=") {
				env = append(env, kv)
			}
		}
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "bits ") {
				fmt.Sscanf(line, "bits forward=%s grads=%s decode=%s", &forward, &grads, &decode)
			}
		}
		if err != nil || forward == "" {
			t.Fatalf("child capped at avx2 %v: %v\n%s", extra, err, out)
		}
		return forward, grads, decode
	}
	cf, cg, cd := child()
	if cf != f {
		t.Errorf("forward logprobs and entropies: %s capped at AVX2, %s on AVX-512", cf, f)
	}
	if cd != d {
		t.Errorf("prefill and decode logits: %s capped at AVX2, %s on AVX-512", cd, d)
	}
	t.Logf("gradients: %s capped at AVX2 (OpenBLAS's own choice under the cap), %s on AVX-512 (OpenBLAS %s)", cg, g, cpu.BLASCoreName())
	core := cpu.BLASCoreName()
	if of, og, od := child("OPENBLAS_CORETYPE=" + core); of != f || og != g || od != d {
		t.Errorf("capped at AVX2 with OpenBLAS's %s kernels: forward %s, gradients %s, decode %s; on AVX-512 %s, %s, %s", core, of, og, od, f, g, d)
	}
}
