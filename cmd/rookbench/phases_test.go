package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/gpt2"
)

// slowed makes every product, attention and LayerNorm call take a known time more, so that
// the clock's phases have lower bounds a misattributed call would break. It waits by spinning:
// a sleep overshoots by more than the times themselves.
type slowed struct {
	backend.Backend
	product, attention time.Duration
}

func (s *slowed) MatMul(out, inp, w, bias backend.Buf, n, c, oc int) {
	wait(s.product)
	s.Backend.MatMul(out, inp, w, bias, n, c, oc)
}

func (s *slowed) MatMulAdd(out, res, inp, w, bias backend.Buf, n, c, oc int) {
	wait(s.product)
	s.Backend.MatMulAdd(out, res, inp, w, bias, n, c, oc)
}

func (s *slowed) MatMulGELU(pre, out, inp, w, bias backend.Buf, n, c, oc int) {
	wait(s.product)
	s.Backend.MatMulGELU(pre, out, inp, w, bias, n, c, oc)
}

func (s *slowed) AttentionDecode(out, qkv backend.Buf, kv backend.KV, slot, pos backend.I32, n, nh, c int) {
	wait(s.attention)
	s.Backend.AttentionDecode(out, qkv, kv, slot, pos, n, nh, c)
}

func (s *slowed) LayerNorm(out, mean, rstd, inp, w, b backend.Buf, n, c int, eps float32) {
	wait(s.product)
	s.Backend.LayerNorm(out, mean, rstd, inp, w, b, n, c, eps)
}

func wait(d time.Duration) {
	for t := time.Now(); time.Since(t) < d; {
	}
}

func TestDecodePhases(t *testing.T) {
	cfg := gpt2.RandomConfigs["tiny"] // 2 layers: 9 products and 2 attention calls a step
	be := &slowed{Backend: cpu.New(2), product: 300 * time.Microsecond, attention: 500 * time.Microsecond}
	m, err := gpt2.New(be, cfg, gpt2.RandomParams(cfg, 1))
	if err != nil {
		t.Fatal(err)
	}
	p, err := measureDecodePhases(m, 2, 1, 2, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	layers := float64(cfg.NumLayers)
	minProducts := (4*layers + 1) * 0.3 // ms a step
	minAttention := layers * 0.5
	minLayerNorms := (2*layers + 1) * 0.3 // timed as the rest
	for i := range p.step.samples {
		step, prod, att, rest := p.step.samples[i], p.products.samples[i], p.attention.samples[i], p.rest.samples[i]
		if prod < minProducts || att < minAttention || rest < minLayerNorms {
			t.Errorf("run %d: products %.2f ms, attention %.2f, rest %.2f: want at least %.2f, %.2f and %.2f", i, prod, att, rest, minProducts, minAttention, minLayerNorms)
		}
		// Each run's clock starts at its decode steps: the run before it, and its own
		// prefill, are not counted in its phases.
		if math.Abs(prod+att+rest-step) > 1e-9*step || prod > step-minLayerNorms { // the phases add up to the step, to rounding
			t.Errorf("run %d: step %.2f ms against products %.2f + attention %.2f + rest %.2f", i, step, prod, att, rest)
		}
	}
}

func TestDecodePhaseRows(t *testing.T) {
	b := &bench{genPhases: map[string]decodePhases{"8": {
		step: measured([]float64{22}), products: measured([]float64{18}), attention: measured([]float64{3}), rest: measured([]float64{1}),
	}}}
	fl := decodeFloor{products: measured([]float64{15}), attention: measured([]float64{1.5}), productFLOP: 2e9}
	var rows []Row
	b.decodePhaseRows("g", "8", 8, fl, func(r Row) { rows = append(rows, r) })
	want := map[string]float64{"engine.decode_clocked8": 22, "engine.decode_products8": 18, "floor.decode_products_ratio8": 1.2,
		"engine.decode_attention8": 3, "floor.decode_attention_ratio8": 2, "engine.decode_rest8": 1}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for _, r := range rows {
		if w, ok := want[r.Key]; !ok || r.Median == nil || *r.Median != w {
			t.Errorf("row %s (%s): %v, want %v", r.Key, r.Name, r.Median, w)
		}
		if r.Key == "engine.decode_products8" && (r.GFLOPS == nil || strings.TrimSpace(r.Name) == "") {
			t.Errorf("the products' row has no GFLOP/s")
		}
	}
	rows = nil
	b.decodePhaseRows("g", "", 64, fl, func(r Row) { rows = append(rows, r) })
	if len(rows) != 0 {
		t.Errorf("phases not timed: %d rows, want none", len(rows))
	}
}
