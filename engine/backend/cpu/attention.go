package cpu

import (
	"fmt"
	"math"
	"sort"

	"github.com/rookscript/rookscript/engine/backend"
)

// Attention over a packed batch. The forward runs row by row through the decode kernel
// (rk_attention_decode: every head of one query row over its keys, the prefix's and then its
// own): a row's attention is the same sums in the same order whether the sampler decodes it
// against its KV cache or a training forward meets it in a packed batch, alone, beside other
// sequences or continuing a shared prompt (DESIGN §6.1). It keeps each row's log-sum-exp per
// head, which is all the backward needs to recompute the probabilities (as FlashAttention
// does), so activation memory stays O(rows), not O(Σ T²).
//
// The backward runs one (family, head) pair per work item, where a family is a sequence and
// the sequences that continue it (backend.Pack.Prefix): a few GEMMs over each sequence's score
// matrix — (T, T) for a sequence of its own, (T, P+T) for a continuation of a prefix of P rows;
// the causal part above the diagonal is computed and discarded, which costs less than Go loops
// would over the useful part. A family is one work item because its continuations add into
// the prefix's key and value gradients: in sequence order, whatever the thread count. The
// backward needs no batch invariance: it recomputes the scores with OpenBLAS.

type attentionJob struct {
	backward                  bool
	out, lse, qkv, dqkv, dout []float32
	start, lens               []int32
	prefix                    []int32 // backend.Pack.Prefix (nil: none)
	fam                       []int32 // family f: sequences fam[f] .. fam[f+1]-1, the first the prefix
	nh, c                     int
	scratch                   [][]float32
}

func (j *attentionJob) run(w, lo, hi int) {
	if !j.backward {
		j.forwardRows(j.scratch[w], lo, hi)
		return
	}
	for k := lo; k < hi; k++ {
		f, h := k/j.nh, k%j.nh
		first, end := int(j.fam[f]), int(j.fam[f+1])
		ps, pl := int(j.start[first]), int(j.lens[first])
		j.backwardPair(j.scratch[w], ps, pl, h)
		for i := first + 1; i < end; i++ {
			j.backwardContinuation(j.scratch[w], ps, pl, int(j.start[i]), int(j.lens[i]), h)
		}
	}
}

// forwardRows attends rows lo .. hi-1 of the pack: row r of sequence i, at position r − start
// of its own rows, over its prefix's rows (if it continues one) and its own up to itself; up
// to attentionGrain rows of one sequence per call.
func (j *attentionJob) forwardRows(scr []float32, lo, hi int) {
	c3, hd := 3*j.c, j.c/j.nh
	scale := float32(1 / math.Sqrt(float64(hd)))
	// The sequence holding row lo: the last one starting at or before it.
	i := sort.Search(len(j.start), func(i int) bool { return int(j.start[i]) > lo }) - 1
	for r := lo; r < hi; {
		for int(j.start[i])+int(j.lens[i]) <= r {
			i++
		}
		s, end := int(j.start[i]), min(hi, int(j.start[i])+int(j.lens[i]))
		ps, pl := s, 0 // the prefix's rows: none
		if j.prefix != nil && j.prefix[i] >= 0 {
			ps, pl = int(j.start[j.prefix[i]]), int(j.lens[j.prefix[i]])
		}
		kp, ko := j.qkv[ps*c3+j.c:], j.qkv[s*c3+j.c:]
		cAttentionRows(j.out[r*j.c:], j.c, j.qkv[r*c3:], c3, end-r, kp, kp[j.c:], pl, ko, ko[j.c:], pl+r-s+1,
			j.nh, hd, c3, scale, scr, j.lse[r*j.nh:])
		r = end
	}
}

// families groups the pack's sequences into families and returns their bounds and the
// scratch (floats per worker) the largest sequence needs: the backward's two score matrices,
// (t, t) each for a sequence of its own and (t, p+t) for a continuation of p rows, or the
// forward's scores of attentionGrain rows over all heads (kernels.h).
func families(p backend.Pack, fam []int32, backward bool, nh int) ([]int32, int) {
	fam = fam[:0]
	need, root := 0, -1
	for i, l := range p.Len {
		t, w := int(l), int(l)
		switch pre := p.PrefixOf(i); {
		case pre < 0:
			fam = append(fam, int32(i))
			root = i
		case pre == root:
			w += int(p.Len[root])
		default:
			panic(fmt.Sprintf("cpu: sequence %d continues sequence %d, which is not the prefix before it", i, pre))
		}
		if backward {
			need = max(need, 2*t*w)
		} else {
			need = max(need, 4*nh*(w+attentionGrain))
		}
	}
	return append(fam, int32(len(p.Len))), need
}

// backwardContinuation: sequence rows s .. s+t-1 continue the prefix at rows ps .. ps+pl-1,
// whose scores are [Q·K_prefixᵀ | Q·K_ownᵀ] (t, pl+t), row r using pl + r + 1 of them. It writes the continuation's dq,
// dk, dv and adds into the prefix's dk, dv (which the prefix's own backward wrote first).
func (j *attentionJob) backwardContinuation(scr []float32, ps, pl, s, t, h int) {
	_, kp, vp, hd, scale := j.views(ps, h)
	q, k, v, _, _ := j.views(s, h)
	c3, w := 3*j.c, pl+t
	p, dp := scr[:t*w], scr[t*w:2*t*w]
	dy := j.dout[s*j.c+h*hd:]
	y := j.out[s*j.c+h*hd:]
	base, pbase := s*c3+h*hd, ps*c3+h*hd
	dq, dk, dv := j.dqkv[base:], j.dqkv[base+j.c:], j.dqkv[base+2*j.c:]
	dkp, dvp := j.dqkv[pbase+j.c:], j.dqkv[pbase+2*j.c:]

	sgemm(false, true, t, pl, hd, scale, q, c3, kp, c3, 0, p, w)
	sgemm(false, true, t, t, hd, scale, q, c3, k, c3, 0, p[pl:], w)
	cAttentionProbs(p, t, w, pl, j.lse[s*j.nh+h:], j.nh)
	sgemm(false, true, t, pl, hd, 1, dy, j.c, vp, c3, 0, dp, w)     // dP = dY·Vᵀ, prefix part
	sgemm(false, true, t, t, hd, 1, dy, j.c, v, c3, 0, dp[pl:], w)  // and own part
	sgemm(true, false, pl, hd, t, 1, p, w, dy, j.c, 1, dvp, c3)     // dV_prefix += Pᵀ·dY
	sgemm(true, false, t, hd, t, 1, p[pl:], w, dy, j.c, 0, dv, c3)  // dV = Pᵀ·dY
	cAttentionDScores(dp, p, t, w, pl, dy, y, j.c, hd)              // dS = P ⊙ (dP − D)
	sgemm(false, false, t, hd, pl, scale, dp, w, kp, c3, 0, dq, c3) // dQ = dS·K
	sgemm(false, false, t, hd, t, scale, dp[pl:], w, k, c3, 1, dq, c3)
	sgemm(true, false, pl, hd, t, scale, dp, w, q, c3, 1, dkp, c3)    // dK_prefix += dSᵀ·Q
	sgemm(true, false, t, hd, t, scale, dp[pl:], w, q, c3, 0, dk, c3) // dK = dSᵀ·Q
}

func (j *attentionJob) views(s, h int) (q, k, v []float32, hd int, scale float32) {
	c3 := 3 * j.c
	hd = j.c / j.nh
	base := s*c3 + h*hd
	return j.qkv[base:], j.qkv[base+j.c:], j.qkv[base+2*j.c:], hd, float32(1 / math.Sqrt(float64(hd)))
}

func (j *attentionJob) backwardPair(scr []float32, s, t, h int) {
	if t == 0 {
		return
	}
	q, k, v, hd, scale := j.views(s, h)
	c3 := 3 * j.c
	p, dp := scr[:t*t], scr[t*t:2*t*t]
	dy := j.dout[s*j.c+h*hd:]
	y := j.out[s*j.c+h*hd:]
	base := s*c3 + h*hd
	dq, dk, dv := j.dqkv[base:], j.dqkv[base+j.c:], j.dqkv[base+2*j.c:]

	// Recompute the probabilities from the saved log-sum-exp.
	sgemm(false, true, t, t, hd, scale, q, c3, k, c3, 0, p, t)
	cAttentionProbs(p, t, t, 0, j.lse[s*j.nh+h:], j.nh)
	sgemm(false, true, t, t, hd, 1, dy, j.c, v, c3, 0, dp, t) // dP = dY·Vᵀ
	sgemm(true, false, t, hd, t, 1, p, t, dy, j.c, 0, dv, c3) // dV = Pᵀ·dY
	// dS = P ⊙ (dP − D), D_r = dy_r·y_r = Σ_x P_rx dP_rx (the softmax backward's row term).
	cAttentionDScores(dp, p, t, t, 0, dy, y, j.c, hd)
	sgemm(false, false, t, hd, t, scale, dp, t, k, c3, 0, dq, c3) // dQ = dS·K
	sgemm(true, false, t, hd, t, scale, dp, t, q, c3, 0, dk, c3)  // dK = dSᵀ·Q
}

// attentionGrain is the rows of one chunk of the forward: rows that the kernel computes
// together (each key and value vector loaded serves them all), and few enough that the
// workers even out rows whose work grows with their position.
const attentionGrain = 4

func (c *CPU) Attention(out, lse, qkv backend.Buf, p backend.Pack, nh, ch int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fam, need := families(p, c.fam, false, nh)
	c.fam = fam
	c.att = attentionJob{out: out.F32(), lse: lse.F32(), qkv: qkv.F32(), start: p.Start, lens: p.Len, prefix: p.Prefix, nh: nh, c: ch, scratch: c.scratchFor(need)}
	c.pool.run(&c.att, p.Rows(), attentionGrain)
	c.att = attentionJob{}
}

func (c *CPU) AttentionBackward(dqkv, dout, out, lse, qkv backend.Buf, p backend.Pack, nh, ch int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fam, need := families(p, c.fam, true, nh)
	c.fam = fam
	c.att = attentionJob{backward: true, dqkv: dqkv.F32(), dout: dout.F32(), out: out.F32(), lse: lse.F32(), qkv: qkv.F32(), start: p.Start, lens: p.Len, fam: fam, nh: nh, c: ch, scratch: c.scratchFor(need)}
	c.pool.run(&c.att, (len(fam)-1)*nh, 1)
	c.att = attentionJob{}
}

// Decoding: one query row per sequence against its slot of the KV cache, all heads in one
// C call (vectorised dot products and updates over the cached positions): the same kernel as
// the forward's rows, over the same keys and values.

type decodeJob struct {
	out, qkv, kc, vc []float32
	slot, pos        []int32
	shared           []int32 // KV.Shared, nil when no slot shares
	nh, c, cap       int
	runs             []int32 // chunk r is rows [runs[r], runs[r+1])
	scratch          [][]float32
}

func (j *decodeJob) run(w, lo, hi int) {
	hd := j.c / j.nh
	scale := float32(1 / math.Sqrt(float64(hd)))
	end := int(j.runs[hi])
	for i := int(j.runs[lo]); i < end; i++ {
		src, n1, n, own := j.rowKV(i)
		var nk, nv []float32 // the next row's own keys and values, when this worker runs it
		if i+1 < end {
			_, m1, m, o := j.rowKV(i + 1)
			nk, nv = j.kc[o:o+(m-m1)*j.c], j.vc[o:o+(m-m1)*j.c]
		}
		sbase := src * j.cap * j.c
		cAttentionDecodeAhead(j.out[i*j.c:][:j.c], j.qkv[i*3*j.c:][:j.c], j.kc[sbase:], j.vc[sbase:], n1,
			j.kc[own:], j.vc[own:], n-n1, j.nh, hd, j.c, scale, j.scratch[w][:n*j.nh], nil, nk, nv)
	}
}

// rowKV is row i's cached positions: n in all, the first n1 in slot src (its own, or the
// prompt's it shares), the rest its own from offset own of the cache.
func (j *decodeJob) rowKV(i int) (src, n1, n, own int) {
	n, s := int(j.pos[i])+1, int(j.slot[i])
	if j.shared != nil {
		n1 = min(int(j.shared[2*s+1]), n)
	}
	return int(promptSlot(j.slot[i], j.shared)), n1, n, (s*j.cap + n1) * j.c
}

// promptSlot is the slot whose cached positions slot reads first: the one it shares a prompt
// with (KV.Shared, nil when no slot shares), or its own.
func promptSlot(slot int32, shared []int32) int32 {
	if shared != nil && shared[2*slot+1] > 0 {
		return shared[2*slot]
	}
	return slot
}

// decodeRuns cuts a decode step's rows into the pool's chunks, as boundaries into runs: runs
// of rows next to each other that read one prompt's cached keys and values (a group's
// samples: the slot that holds the prompt and the slots that share it), so that one worker
// reads the prompt from memory and its other rows find it in that worker's L2; or, when there
// are fewer such runs than twice the workers, one row per chunk, so that the workers even
// out. GPT-2 124M's decode attention at 64 rows (8 prompts × 8 samples) takes less time in
// runs than row by row; at 8 rows of one prompt, runs of 2 or 4 rows took more than rows, and
// so did the one run cut by heads into 2 or 4 chunks, each reading only its heads' columns of
// every position with the next row's own fetched ahead (BenchmarkDecode124M).
func decodeRuns(runs, slot, shared []int32, workers int) []int32 {
	runs = append(runs[:0], 0)
	for i := 1; i < len(slot); i++ {
		if promptSlot(slot[i], shared) != promptSlot(slot[i-1], shared) {
			runs = append(runs, int32(i))
		}
	}
	if len(runs) < 2*workers {
		runs = runs[:0]
		for i := range slot {
			runs = append(runs, int32(i))
		}
	}
	return append(runs, int32(len(slot)))
}

func (c *CPU) KVWrite(kv backend.KV, qkv backend.Buf, slot, pos backend.I32, n, ch int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kvWrite(kv, qkv, slot, pos, n, ch)
}

func kvWrite(kv backend.KV, qkv backend.Buf, slot, pos backend.I32, n, ch int) {
	src, kc, vc := qkv.F32(), kv.K.F32(), kv.V.F32()
	sl, ps := slot.Ints(), pos.Ints()
	for i := 0; i < n; i++ {
		if int(ps[i]) >= kv.Cap {
			panic("cpu: KVWrite position beyond the cache capacity")
		}
		dst := (int(sl[i])*kv.Cap + int(ps[i])) * ch
		_, _, _ = kc[dst:dst+ch], vc[dst:dst+ch], src[i*3*ch:i*3*ch+3*ch] // in bounds, or a panic before C writes
	}
	cKVWrite(kc, vc, src, sl, ps, n, ch, kv.Cap)
}

func (c *CPU) AttentionDecode(out, qkv backend.Buf, kv backend.KV, slot, pos backend.I32, n, nh, ch int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kvWrite(kv, qkv, slot, pos, n, ch)
	c.dec = decodeJob{out: out.F32(), qkv: qkv.F32(), kc: kv.K.F32(), vc: kv.V.F32(), slot: slot.Ints()[:n], pos: pos.Ints()[:n], nh: nh, c: ch, cap: kv.Cap, scratch: c.scratchFor(kv.Cap * nh)}
	if kv.Shared.M != nil {
		c.dec.shared = kv.Shared.Ints()
	}
	c.decRuns = decodeRuns(c.decRuns, c.dec.slot, c.dec.shared, c.pool.workers)
	c.dec.runs = c.decRuns
	c.pool.run(&c.dec, len(c.decRuns)-1, 1)
	c.dec = decodeJob{}
}
