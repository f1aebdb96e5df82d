package paritytest

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/philox"
	"github.com/rookscript/rookscript/engine/rollout"
)

// Sample: the device's draws from the rows the CPU sampler is given are rollout.Draw's with
// philox's uniforms, and their logprobs gpt2.Dist.LogProb's, bit for bit: rows of GPT-2's
// vocabulary and of a small one whose chunks hold no mass, greedy rows with ties, groups of
// draws sharing a row (a prompt's prefill).
func (s Suite) Sample(t *testing.T) {
	ds, ok := s.Dev.(gpt2.DeviceSampler)
	if !ok {
		t.Fatalf("the %s backend does not sample on the device", s.Dev.Name())
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		name       string
		rows, v    int
		greedy     bool
		sparse     bool // chunks without mass, the last ones among them
		temp       float32
		group      int // draws per row, through their rows (0: one each, in order)
		wantTokens int // distinct tokens at least, so that the draws are not all alike
	}{
		{"gpt-2 vocabulary", 12, 50257, false, false, 0.7, 0, 6},
		{"chunks without mass", 40, 3*rollout.DrawChunk + 5, false, true, 1, 0, 10},
		{"greedy with ties", 9, 50257, true, false, 1, 0, 3},
		{"groups sharing a row", 3, 2000, false, false, 1.3, 8, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			probs, logits := make([]float32, c.rows*c.v), make([]float32, c.rows*c.v)
			draws := c.rows * max(1, c.group)
			lse, streams, positions, rowOf := make([]float32, c.rows), make([]int32, 2*draws), make([]int32, draws), make([]int32, draws)
			for d := range draws {
				rowOf[d] = int32(d / max(1, c.group))
				stream := r.Uint64()
				streams[2*d], streams[2*d+1], positions[d] = int32(uint32(stream)), int32(stream>>32), int32(r.IntN(100))
			}
			for row := range c.rows {
				p := probs[row*c.v : (row+1)*c.v]
				for k := range p {
					switch {
					case c.sparse && (k/rollout.DrawChunk)%2 == 1:
					case c.greedy:
						p[k] = float32(r.IntN(50)) / 64 // many ties for the largest
					default:
						p[k] = float32(math.Exp(3 * r.NormFloat64()))
					}
					logits[row*c.v+k] = float32(r.NormFloat64() * 4)
				}
				lse[row] = float32(r.NormFloat64())
			}
			seed := r.Uint64()
			rowsD := backend.I32{}
			if c.group > 0 {
				rowsD = putI(s.Dev, rowOf)
			}
			tokD, logpD := s.Dev.AllocI32(draws), s.Dev.Alloc(draws)
			ds.Sample(tokD, logpD, put(s.Dev, probs), put(s.Dev, logits), put(s.Dev, lse), rowsD, putI(s.Dev, streams),
				putI(s.Dev, positions), draws, c.rows, c.v, seed, c.greedy, 1/c.temp)
			toks := make([]int32, draws)
			ds.DownloadI32(toks, tokD)
			logp := get(s.Dev, logpD)
			distinct := map[int32]bool{}
			for d := range draws {
				row := int(rowOf[d])
				stream := uint64(uint32(streams[2*d])) | uint64(uint32(streams[2*d+1]))<<32
				u := philox.Uniform(seed, stream, uint32(positions[d]))
				want := rollout.Draw(probs[row*c.v:(row+1)*c.v], u, rollout.Shaping{Greedy: c.greedy})
				wantLogp := float32(logits[row*c.v+int(want)]*(1/c.temp)) - lse[row]
				if toks[d] != want || math.Float32bits(logp[d]) != math.Float32bits(wantLogp) {
					t.Fatalf("draw %d (row %d): device token %d logprob %v, CPU %d %v", d, row, toks[d], logp[d], want, wantLogp)
				}
				distinct[want] = true
			}
			if len(distinct) < c.wantTokens {
				t.Errorf("%d distinct tokens in %d draws: the draws do not vary", len(distinct), draws)
			}
		})
	}
}
