package paritytest

import (
	"slices"
	"testing"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/gpt2/gpt2test"
)

// Counts is what a driver did in a decode step: its launches one by one, its launches of graphs
// (launch.Graphs) and the bytes it copied each way.
type Counts struct{ Launches, Graphs, ToHost, ToDevice int }

// DecodeSteps runs steps decode steps of a GPT-2 of cfg on b, drawing on the device, after a
// prefill of prompts prompts shared by group rows each; every step's inputs are the last step's
// own (its tokens the last draws, its positions one further). count returns what the driver
// under b did since the last call. The result is each step's counts, then those of one more
// step with the first row gone (a completion that left the batch).
func DecodeSteps(t *testing.T, b backend.Backend, cfg gpt2.Config, prompts, group, steps int, count func() Counts) []Counts {
	t.Helper()
	m := gpt2test.New(t, b, cfg, gpt2test.Params(cfg, 12, 1))
	const promptLen = 4
	n := prompts * group
	kv, err := m.NewKVCache(n, promptLen+steps+2)
	if err != nil {
		t.Fatal(err)
	}
	var batch gpt2.Batch
	firsts := make([]int32, prompts)
	for p := range prompts {
		batch.Add([]int32{int32(1 + p), 2, 3, 4}, promptLen)
		firsts[p] = int32(p * group)
	}
	draws := gpt2.Draws{Seed: 9, Rows: make([]int32, n), Streams: make([]uint64, n), Positions: make([]int32, n)}
	slots, pos := make([]int32, n), make([]int32, n)
	for k := range n {
		draws.Rows[k], draws.Streams[k], slots[k], pos[k] = int32(k/group), uint64(1000+k), int32(k), promptLen
	}
	tokens, _, err := m.PrefillSample(kv, &batch, firsts, 1, draws)
	if err != nil {
		t.Fatal(err)
	}
	for k := range n {
		if k%group != 0 {
			if err := m.ShareSlot(kv, k, k/group*group, promptLen); err != nil {
				t.Fatal(err)
			}
		}
		draws.Rows[k] = int32(k)
	}
	var out []Counts
	for range steps {
		for k := range n {
			draws.Positions[k]++
		}
		count()
		next, _, err := m.DecodeSample(kv, slices.Clone(tokens), slots, pos, 1, draws)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, count())
		tokens = next
		for k := range pos {
			pos[k]++
		}
	}
	count()
	if _, _, err := m.DecodeSample(kv, tokens[1:], slots[1:], pos[1:], 1, gpt2.Draws{Seed: 9, Rows: draws.Rows[:n-1],
		Streams: draws.Streams[1:], Positions: draws.Positions[1:]}); err != nil {
		t.Fatal(err)
	}
	return append(out, count())
}

// DecodeStepLaunches is the kernels of a decode step of a model of layers layers: the
// embeddings; each layer's LayerNorm, QKV, KV write with attention, projection + residual,
// LayerNorm, MLP + GELU, projection + residual; the final LayerNorm, the LM head, the softmax,
// the draw and the draws' positions advanced; and the rows' positions advanced where they are
// (not in the first step, whose positions come from the host). A steady step makes them as one
// graph where the driver has graphs: from the third step on, the second's launches repeated.
func DecodeStepLaunches(layers int, first bool) int {
	if first {
		return 7*layers + 6
	}
	return 7*layers + 7
}
