package main

import (
	"fmt"
	"time"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/gpt2"
)

// A decode step by phase: the weight products (every MatMul, MatMulAdd and MatMulGELU, the
// LM head's included), attention over the cached keys and values (AttentionDecode), and the
// rest (LayerNorms, the cache writes, argmax, the Go between calls). Each phase
// has its own floor (decodeFloors), so the rows say which one a step's distance from its
// floor comes from. The phases are timed in runs of their own, after the generation rounds,
// on a copy of the model whose backend clocks each call: the clock costs two readings of the
// time per call, about a hundred calls a step.

// phaseClock is a backend that adds the time of each product and attention call to its
// phase. The CPU backend's calls return when their work is done; a GPU's return at launch,
// so the CPU's are the only ones it can time.
type phaseClock struct {
	backend.Backend
	products, attention time.Duration
}

func (p *phaseClock) MatMul(out, inp, w, bias backend.Buf, n, c, oc int) {
	t := time.Now()
	p.Backend.MatMul(out, inp, w, bias, n, c, oc)
	p.products += time.Since(t)
}

func (p *phaseClock) MatMulAdd(out, res, inp, w, bias backend.Buf, n, c, oc int) {
	t := time.Now()
	p.Backend.MatMulAdd(out, res, inp, w, bias, n, c, oc)
	p.products += time.Since(t)
}

func (p *phaseClock) MatMulGELU(pre, out, inp, w, bias backend.Buf, n, c, oc int) {
	t := time.Now()
	p.Backend.MatMulGELU(pre, out, inp, w, bias, n, c, oc)
	p.products += time.Since(t)
}

func (p *phaseClock) AttentionDecode(out, qkv backend.Buf, kv backend.KV, slot, pos backend.I32, n, nh, c int) {
	t := time.Now()
	p.Backend.AttentionDecode(out, qkv, kv, slot, pos, n, nh, c)
	p.attention += time.Since(t)
}

// BatchInvariant is the clocked backend's answer: the copy computes what the model does.
func (p *phaseClock) BatchInvariant() bool {
	b, ok := p.Backend.(interface{ BatchInvariant() bool })
	return ok && b.BatchInvariant()
}

// decodePhases is a decode step's time and its phases' in ms, one sample per generation.
type decodePhases struct {
	step, products, attention, rest series
}

// measureDecodePhases runs warmup + runs greedy generations of group samples for each of
// nPrompts prompts on a copy of m whose backend is clocked, and returns the mean decode
// step's phases of each timed one.
func measureDecodePhases(m *gpt2.Model, threads, nPrompts, group, warmup, runs int) (decodePhases, error) {
	clock := &phaseClock{Backend: m.B}
	cm, err := gpt2.New(clock, m.Config, m.ParamsHost())
	if err != nil {
		return decodePhases{}, err
	}
	g, err := newEngineGen(cm, threads, nPrompts, group)
	if err != nil {
		return decodePhases{}, err
	}
	g.decodeStart = func() { clock.products, clock.attention = 0, 0 }
	ms := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 / genNew } // per step
	var step, prod, att, rest []float64
	for i := range warmup + runs {
		collect()
		s, err := g.once()
		if err != nil {
			return decodePhases{}, err
		}
		if i < warmup {
			continue
		}
		st, pr, at := s.decode/genNew, ms(clock.products), ms(clock.attention)
		step, prod, att, rest = append(step, st), append(prod, pr), append(att, at), append(rest, st-pr-at)
	}
	return decodePhases{measured(step), measured(prod), measured(att), measured(rest)}, nil
}

// decodePhaseRows adds the phases of a decode step of rows (key "" for the 64-row step, "8"
// for the 8-row one), each against its floor in fl; nothing when they were not timed.
func (b *bench) decodePhaseRows(gr, key string, rows int, fl decodeFloor, add func(Row)) {
	p, ok := b.genPhases[key]
	if !ok {
		return
	}
	add(valueRow(gr, "engine.decode_clocked"+key, fmt.Sprintf("  by phase, %d rows, in runs of their own with each call timed: the step", rows), "ms", p.step, 0))
	add(valueRow(gr, "engine.decode_products"+key, "    weight products (MatMul, MatMulAdd, MatMulGELU; the LM head's too)", "ms", p.products, fl.productFLOP))
	add(belowBandwidth(ratioRow(gr, "floor.decode_products_ratio"+key, "      / floor: their FLOPs at the SGEMM rate, or the weights' bytes at the bandwidth", "", p.products, fl.products, false), fl.productsByBytes))
	add(valueRow(gr, "engine.decode_attention"+key, "    attention over the cached keys and values", "ms", p.attention, 0))
	add(belowBandwidth(ratioRow(gr, "floor.decode_attention_ratio"+key, "      / floor: the cached keys' and values' bytes at the bandwidth", "", p.attention, fl.attention, false), true))
	add(valueRow(gr, "engine.decode_rest"+key, "    the rest: LayerNorms, cache writes, argmax, the Go between calls", "ms", p.rest, 0))
}

// belowBandwidth marks a phase's ratio row Loose when its floor is bytes at the bandwidth
// (byBytes) and the phase beat it: it read memory faster than the run's bandwidth samples, which
// were then taken on a slower machine (flagLooseFloors carries this to the step's ratios). A
// floor of FLOPs at the SGEMM rate proves nothing when beaten: the engine's own product kernel
// can run faster than OpenBLAS's at a shape (the gemm section's MatMul rate).
func belowBandwidth(r Row, byBytes bool) Row {
	if byBytes && r.Median != nil && *r.Median < 1 {
		r.Loose = true
		r.Note = joinNote("below its floor: the bandwidth was measured on a slower machine", r.Note)
	}
	return r
}
