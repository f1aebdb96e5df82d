package backend

import "fmt"

// Pack describes a packed batch: sequence i occupies rows Start[i] .. Start[i]+Len[i]-1 of
// every activation, and its tokens have positions 0 .. Len[i]-1. Host slices; a device
// backend copies what it needs.
//
// Prefix, when not nil, lets sequences share a prefix computed once: Prefix[i] is the
// sequence that sequence i continues, or -1. A continuation's rows attend to every row of its
// prefix and then causally to their own, exactly as if the prefix were written in front of
// them (its positions continue the prefix's). A prefix continues nothing, and its
// continuations follow it directly, one after the other (a GRPO group: the prompt once, then
// its completions).
type Pack struct {
	Start  []int32
	Len    []int32
	Prefix []int32
}

// PrefixOf is the sequence sequence i continues, or -1.
func (p Pack) PrefixOf(i int) int {
	if p.Prefix == nil {
		return -1
	}
	return int(p.Prefix[i])
}

// Rows is the number of rows (tokens) in the pack.
func (p Pack) Rows() int {
	if len(p.Start) == 0 {
		return 0
	}
	k := len(p.Start) - 1
	return int(p.Start[k] + p.Len[k])
}

// KV is one layer's key/value cache: Slots sequences of up to Cap positions, C channels
// each, laid out [slot][pos][C].
type KV struct {
	K, V Buf
	Cap  int
	// Shared (2 per slot): slot s reads its positions below Shared[2s+1] from slot
	// Shared[2s] — a prompt cached once for a group of samples — and the rest from its own;
	// 0 positions when it shares nothing. Nil: no slot shares.
	Shared I32
}

// AdamW holds the hyper-parameters of one AdamW update (decoupled weight decay, bias
// correction as in torch.optim.AdamW).
type AdamW struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
	Step                               int // 1-based step used for bias correction
	// NoDecay are the spans of p that take no weight decay (biases and LayerNorm gains, in
	// most GPT-2 trainers), sorted and disjoint, so that one call updates every tensor
	// whatever its decay.
	NoDecay []Span
}

// Span is the run of elements [Off, Off+N) of a buffer: one tensor of a flat parameter or
// gradient buffer.
type Span struct{ Off, N int }

// CheckSpans panics, naming op, on a span outside a buffer of n elements or, where sorted is
// set, one that starts before the previous one ends: what every backend refuses of AdamW's
// NoDecay (sorted) and SumSquaresMany's spans.
func CheckSpans(op string, n int, spans []Span, sorted bool) {
	end := 0
	for _, s := range spans {
		if s.Off < 0 || s.N < 0 || s.Off+s.N > n || (sorted && s.Off < end) {
			panic(fmt.Sprintf("%s: span [%d, %d) outside %d elements or out of order", op, s.Off, s.Off+s.N, n))
		}
		end = s.Off + s.N
	}
}

// Backend is the set of kernels GPT-2 needs. Shapes: n rows, c input channels, oc output
// channels, v vocabulary, nh heads. See the package documentation for conventions.
type Backend interface {
	Name() string

	// Memory.
	Alloc(n int) Buf    // zeroed
	AllocI32(n int) I32 // zeroed
	Upload(dst Buf, src []float32)
	Download(dst []float32, src Buf)
	UploadI32(dst I32, src []int32)
	Copy(dst, src Buf)
	Fill(dst Buf, v float32)

	// Encoder: out[i] = wte[tok[i]] + wpe[pos[i]].
	Encoder(out Buf, tok, pos I32, wte, wpe Buf, n, c int)
	// EncoderBackward: dwte[tok[i]] += dout[i]; dwpe[pos[i]] += dout[i].
	EncoderBackward(dwte, dwpe, dout Buf, tok, pos I32, n, c int)

	// LayerNorm over the last dimension; saves mean and 1/std per row for the backward.
	LayerNorm(out, mean, rstd, inp, w, b Buf, n, c int, eps float32)
	// LayerNormBackward: dinp += ..., dw += ..., db += ... .
	LayerNormBackward(dinp, dw, db, dout, inp, w, mean, rstd Buf, n, c int)

	// MatMul: out[n,oc] = inp[n,c]·w[oc,c]ᵀ + bias (bias may be Nil).
	MatMul(out, inp, w, bias Buf, n, c, oc int)
	// MatMulAdd: out[n,oc] = res + (inp·wᵀ + bias), a projection and the residual add after
	// it (bias may be Nil; res must not overlap out), rounded as MatMul followed by Add.
	MatMulAdd(out, res, inp, w, bias Buf, n, c, oc int)
	// MatMulGELU: pre[n,oc] = inp·wᵀ + bias, and out = GELU(pre), as MatMul followed by GELU.
	MatMulGELU(pre, out, inp, w, bias Buf, n, c, oc int)
	// MatMulBackward: dinp[n,c] = dout·w (overwritten), dw += doutᵀ·inp, dbias += Σ rows
	// of dout (dbias may be Nil). dinp may be Nil when the input needs no gradient.
	MatMulBackward(dinp, dw, dbias, dout, inp, w Buf, n, c, oc int)

	// Attention over a packed batch. qkv is (n, 3c) with q, k, v in that order; out is (n, c).
	// lse (n, nh) receives each row's log-sum-exp of the scaled scores, which is all the
	// backward needs to recompute the probabilities.
	Attention(out, lse, qkv Buf, p Pack, nh, c int)
	// AttentionBackward: dqkv (n, 3c) is overwritten.
	AttentionBackward(dqkv, dout, out, lse, qkv Buf, p Pack, nh, c int)

	// GELU (tanh approximation, "gelu_new") and its backward: dinp = gelu'(inp)·dout.
	GELU(out, inp Buf)
	GELUBackward(dinp, inp, dout Buf)

	// Add: out = a + b. AddTo: dst += src.
	Add(out, a, b Buf)
	AddTo(dst, src Buf)
	Scale(dst Buf, s float32)

	// GatherRows: dst[i] = src[rows[i]]. ScatterRows: dst[rows[i]] = src[i]; other rows of
	// dst are left as they are.
	GatherRows(dst, src Buf, rows I32, c int)
	ScatterRows(dst, src Buf, rows I32, c int)

	// LogProbs: for each row r of logits (rows, v), with z = logits·invTemp:
	// lse[r] = log Σ exp z, logp[r] = z[target[r]] − lse[r], and if ent is not Nil the
	// entropy ent[r] = −Σ p log p.
	LogProbs(lse, logp, ent, logits Buf, targets I32, rows, v int, invTemp float32)
	// LogProbsBackward overwrites logits with dL/dlogits given dL/dlogp (dlogp) and, when
	// dent is not Nil, dL/dentropy (dent).
	LogProbsBackward(logits, lse, ent, dlogp, dent Buf, targets I32, rows, v int, invTemp float32)

	// Softmax writes probs[r] = softmax(logits[r]·invTemp) and lse[r] = log Σ exp(logits[r]·invTemp)
	// for each of rows rows of width v (the sampler's distribution).
	Softmax(probs, lse, logits Buf, rows, v int, invTemp float32)

	// KVWrite stores the k and v parts of qkv rows into cache slot slot[i] at position pos[i].
	KVWrite(kv KV, qkv Buf, slot, pos I32, n, c int)
	// AttentionDecode: row i's k and v (from qkv) are stored at position pos[i] of slot[i] in
	// the cache, as KVWrite stores them, and the row attends with its q over positions
	// 0..pos[i] of its slot — the first of them from the slot it shares a prefix with
	// (KV.Shared), if it does. One call, so that a decode step writes and reads the cache in
	// one pass (one launch a layer on a GPU).
	AttentionDecode(out, qkv Buf, kv KV, slot, pos I32, n, nh, c int)

	// AdamW updates p in place from gradient g and moments m, v; elements in h.NoDecay
	// update as with WeightDecay 0.
	AdamW(p, g, m, v Buf, h AdamW)
	// SumSquares returns Σ x² in float64 (non-finite if any element is).
	SumSquares(b Buf) float64
	// SumSquaresMany writes out[i] = Σ x² over spans[i] of b, in float64 (non-finite where an
	// element is): the squared norms of every tensor of a gradient in one call, which a device
	// computes in one pass and copies to the host once rather than once a tensor. Each value
	// has the bits SumSquares gives for that span alone on the same backend.
	SumSquaresMany(b Buf, spans []Span, out []float64)
}

// RankSummer is a backend that sums a buffer over the ranks of a data-parallel run where the
// buffer lies (the CUDA backend over NCCL: see package launch's Ranks), instead of a copy to
// the host, a sum through MPI and a copy back. It is optional: a trainer falls back to the
// host path for a backend that has none, or that has joined no ranks.
type RankSummer interface {
	// JoinedRanks is the number of ranks the backend sums over: 0 when it has joined none, and
	// SumRanks must not be called.
	JoinedRanks() int
	// SumRanks replaces x, on every rank, with its element-wise sum over the ranks (the same
	// length everywhere): each element the float32 sum of the ranks' values added in rank
	// order, the same bits on every rank — what dist.Comm.SumF32 gives through the host.
	SumRanks(x Buf) error
}
