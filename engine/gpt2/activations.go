package gpt2

import (
	"runtime"

	"github.com/rookscript/rookscript/engine/backend"
)

// activations holds what a forward saves for the backward, the backward's scratch and the
// LM head's one chunk of logits, for up to n rows (tokens) and r scored rows. Buffers grow
// only when a larger batch comes.
//
// A training forward keeps every layer's activations (layers has NumLayers entries); a
// forward that will not be differentiated (Score, Prefill, Decode) runs every layer through
// layers[0], so a model that never trains holds one layer's worth.
type activations struct {
	n, r     int
	headRows int // rows of one LM-head chunk: logits holds (headRows, V)

	tok, pos, rows, targets backend.I32 // (n), (n), (r), (r)
	slot                    backend.I32 // (n) KV-cache slot of each row (prefill, decode)

	encoded backend.Buf // (n, C) embeddings: the residual stream entering block 0
	layers  []layerActs // NumLayers sets for training, one otherwise
	lnf     backend.Buf // (n, C)
	lnfMean backend.Buf // (n)
	lnfRstd backend.Buf // (n)

	headIn backend.Buf // (r, C) final LayerNorm output at the scored rows
	logits backend.Buf // (headRows, V) one chunk of the head; overwritten by its dlogits in the backward
	lse    backend.Buf // (r)
	logp   backend.Buf // (r)
	ent    backend.Buf // (r)
	dlogp  backend.Buf // (r)
	dent   backend.Buf // (r)

	// Backward scratch, shared by all layers; allocated by the first backward.
	dres    backend.Buf // (n, C) gradient of the residual stream
	dln     backend.Buf // (n, C)
	dattY   backend.Buf // (n, C)
	dqkv    backend.Buf // (n, 3C)
	dfch    backend.Buf // (n, 4C)
	dfchG   backend.Buf // (n, 4C)
	dheadIn backend.Buf // (headRows, C)

	// Host-side staging of the batch description.
	hostPos  []int32
	hostSlot []int32
	hostGrad []float32 // (4·headRows) a chunk's logp, entropy, dlogp and dent for ForwardBackward
	pack     backend.Pack
}

type layerActs struct {
	ln1, ln1Mean, ln1Rstd backend.Buf // (n, C), (n), (n)
	qkv                   backend.Buf // (n, 3C)
	attY                  backend.Buf // (n, C) attention output before the projection
	attLse                backend.Buf // (n, NH) log-sum-exp of each row's scores
	res2                  backend.Buf // (n, C) residual after attention
	ln2, ln2Mean, ln2Rstd backend.Buf // (n, C), (n), (n)
	fch                   backend.Buf // (n, 4C) MLP pre-activation
	fchG                  backend.Buf // (n, 4C) after GELU
	res3                  backend.Buf // (n, C) residual after the MLP: the block's output
}

// Sizes, in floats, of what activations hold; Footprint and the allocation below share them.

// layerFloats is one layer's saved activations per row.
func layerFloats(cfg Config) int { return 16*cfg.Channels + 4 + cfg.NumHeads }

// trunkFloats is what the trunk holds per row besides the layers: the embeddings and the final
// LayerNorm (output, mean, rstd); plus tok, pos, slot (int32).
func trunkFloats(cfg Config) int { return 2*cfg.Channels + 2 + 3 }

// scoredFloats is what the head holds per scored row: its input and five per-row values,
// plus the row index and target (int32).
func scoredFloats(cfg Config) int { return cfg.Channels + 5 + 2 }

// backwardFloats is the backward's scratch per row.
func backwardFloats(cfg Config) int { return 14 * cfg.Channels }

// HeadChunkBytes bounds one chunk of LM-head logits: the head runs over the scored rows in
// chunks of at most HeadChunkBytes / (4·V) rows (a multiple of 16, at least 16), so a batch
// never holds rows × V logits at once. 64 MiB is 320 rows of GPT-2's vocabulary, a few per
// cent of a 124M model's training memory. Every chunk product reads or writes a V × C matrix
// (the tied embedding, its gradient) whose cost the chunk's rows share, so the head's rate
// grows with the chunk's rows; past 320 its backward gains little.
const HeadChunkBytes = 64 << 20

// headChunkRows is the LM head's chunk for vocabulary v, or the model's override.
func (m *Model) headChunkRows() int {
	if m.HeadRows > 0 {
		return m.HeadRows
	}
	return headRowsFor(m.Config.VocabSize)
}

func headRowsFor(v int) int {
	return max(16, HeadChunkBytes/(4*v)/16*16)
}

// chunkRows is the size of the chunks r scored rows run in: as few chunks as headRows
// allows, of equal sizes (within a row), so that no chunk is a small remainder whose
// products run at a fraction of the rate.
func (a *activations) chunkRows(r int) int {
	chunks := (r + a.headRows - 1) / a.headRows
	return (r + chunks - 1) / chunks
}

// ensureActs makes room for n rows and r scored rows, with every layer's activations saved
// when train is set.
func (m *Model) ensureActs(n, r int, train bool) *activations {
	layers := 1
	if train {
		layers = m.Config.NumLayers
	}
	a := m.act
	if a != nil && a.n >= n && a.r >= r && len(a.layers) >= layers {
		return a
	}
	if a != nil {
		n, r, layers = max(n, a.n), max(r, a.r), max(layers, len(a.layers))
		// Let the old buffers go before the new ones are allocated, so that the new ones
		// reuse their memory instead of adding to it: activations are the largest thing a
		// model holds, and a batch larger than any before would otherwise peak at both.
		m.act = nil
		if a.floats() >= 1<<24 {
			runtime.GC()
		}
	}
	b, cfg := m.B, m.Config
	c, v := cfg.Channels, cfg.VocabSize
	// Rows in multiples of 64, so that batches growing by a few tokens do not reallocate.
	n = (n + 63) / 64 * 64
	a = &activations{n: n, r: r, headRows: min(max(r, 1), m.headChunkRows())}
	a.tok, a.pos, a.slot = b.AllocI32(n), b.AllocI32(n), b.AllocI32(n)
	a.encoded = b.Alloc(n * c)
	for range layers {
		a.layers = append(a.layers, layerActs{
			ln1: b.Alloc(n * c), ln1Mean: b.Alloc(n), ln1Rstd: b.Alloc(n),
			qkv: b.Alloc(n * 3 * c), attY: b.Alloc(n * c), attLse: b.Alloc(n * cfg.NumHeads),
			res2: b.Alloc(n * c),
			ln2:  b.Alloc(n * c), ln2Mean: b.Alloc(n), ln2Rstd: b.Alloc(n),
			fch: b.Alloc(n * 4 * c), fchG: b.Alloc(n * 4 * c), res3: b.Alloc(n * c),
		})
	}
	a.lnf, a.lnfMean, a.lnfRstd = b.Alloc(n*c), b.Alloc(n), b.Alloc(n)
	r1 := max(r, 1)
	a.rows, a.targets = b.AllocI32(r1), b.AllocI32(r1)
	a.headIn = b.Alloc(r1 * c)
	a.lse, a.logp, a.ent, a.dlogp, a.dent = b.Alloc(r1), b.Alloc(r1), b.Alloc(r1), b.Alloc(r1), b.Alloc(r1)
	a.logits = b.Alloc(a.headRows * v)
	a.hostPos = make([]int32, 0, n)
	m.act = a
	return a
}

// floats is about the number of floats the activations hold (for deciding when to collect).
func (a *activations) floats() int {
	s := a.encoded.N + a.lnf.N + a.headIn.N + a.logits.N + 14*a.dres.N
	for _, l := range a.layers {
		s += 16 * l.ln1.N
	}
	return s
}

// ensureBackward allocates the backward's scratch for the current activation sizes; models
// that only sample or score never pay for it.
func (m *Model) ensureBackward(a *activations) {
	if !a.dres.Nil() {
		return
	}
	b, c, n := m.B, m.Config.Channels, a.n
	a.dres, a.dln, a.dattY = b.Alloc(n*c), b.Alloc(n*c), b.Alloc(n*c)
	a.dqkv, a.dfch, a.dfchG = b.Alloc(n*3*c), b.Alloc(n*4*c), b.Alloc(n*4*c)
	a.dheadIn = b.Alloc(a.headRows * c)
}

// sampling is the sampler's next-token distribution: Prefill and Decode write their rows'
// logits and probabilities here. Kept apart from the activations, which a training batch
// regrows; allocated by the first Prefill or Decode.
type sampling struct {
	rows                  int
	headIn                backend.Buf // (rows, C) Prefill's last-token rows
	logits, probs         backend.Buf // (rows, V)
	lse                   backend.Buf // (rows)
	hostLogits, hostProbs []float32   // downloads, for device backends
	hostLSE               []float32
}

// ensureSampling makes room for the distribution of rows rows.
func (m *Model) ensureSampling(rows int) *sampling {
	s := m.smp
	if s != nil && s.rows >= rows {
		return s
	}
	b, c, v := m.B, m.Config.Channels, m.Config.VocabSize
	s = &sampling{rows: rows, headIn: b.Alloc(rows * c), logits: b.Alloc(rows * v), probs: b.Alloc(rows * v), lse: b.Alloc(rows)}
	m.smp = s
	return s
}
