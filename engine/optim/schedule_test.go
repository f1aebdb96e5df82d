package optim

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/gpt2"
)

func TestScheduleFactor(t *testing.T) {
	cosine := Schedule{Kind: ScheduleCosine, Warmup: 10, Total: 110, MinRatio: 0.1}
	cases := []struct {
		s      Schedule
		update int
		want   float64
	}{
		{ConstantSchedule(), 1, 1},
		{Schedule{Kind: ScheduleConstant, Warmup: 10}, 1, 0.1}, // the warm-up applies to every kind
		{Schedule{Kind: ScheduleConstant, Warmup: 10}, 5, 0.5},
		{Schedule{Kind: ScheduleConstant, Warmup: 10}, 500, 1},
		{cosine, 10, 1},
		{cosine, 60, 0.55}, // halfway: floor + ½(1 − floor)
		{cosine, 110, 0.1},
		{cosine, 999, 0.1},
		{Schedule{Kind: ScheduleCosine, Total: 4}, 2, 0.5}, // no warm-up: (1 + cos(π/2))/2
		// A warm-up longer than the schedule (a short run): it never reaches lr, then the floor.
		{Schedule{Kind: ScheduleCosine, Warmup: 20, Total: 3, MinRatio: 0.1}, 3, 0.15},
		{Schedule{Kind: ScheduleCosine, Warmup: 20, Total: 3, MinRatio: 0.1}, 21, 0.1},
	}
	for _, c := range cases {
		if err := c.s.Validate(); err != nil {
			t.Fatalf("%+v: %v", c.s, err)
		}
		if got := c.s.Factor(c.update); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("%+v at update %d = %g, want %g", c.s, c.update, got, c.want)
		}
	}
	for _, c := range []struct {
		s     Schedule
		key   string
		value any // nil: NaN
	}{
		{Schedule{Kind: "cosinee"}, "lr_schedule", "cosinee"},
		{Schedule{Kind: "linear"}, "lr_schedule", "linear"},
		{Schedule{Kind: ScheduleCosine, Warmup: 10, Total: -1}, "total_updates", -1},
		{Schedule{Kind: ScheduleConstant, Warmup: -1}, "lr_warmup", -1},
		{Schedule{Kind: ScheduleCosine, Total: 5, MinRatio: 1.5}, "lr_min_ratio", 1.5},
		{Schedule{Kind: ScheduleCosine, Total: 5, MinRatio: math.NaN()}, "lr_min_ratio", nil},
	} {
		err := c.s.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Key != c.key || (c.value != nil && ce.Value != c.value) {
			t.Errorf("%+v: error %v, want a *ConfigError for %s = %v", c.s, err, c.key, c.value)
		}
	}
}

// TestOptimizerOwnsTheLearningRate: each update runs at Config.LR × the schedule's factor at
// the update count; ScaleLR moves the whole schedule; and an optimizer rebuilt from what a
// checkpoint stores (Config, Steps, moments) plus the recipe's schedule continues with the
// same rates and weights.
func TestOptimizerOwnsTheLearningRate(t *testing.T) {
	sched := Schedule{Kind: ScheduleCosine, Warmup: 2, Total: 8, MinRatio: 0.25}
	cfg := AdamWConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8}
	a := tinyModel(t, gpt2.RandomParams(tinyConfig, 5))
	oa, err := NewAdamW(a, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if oa.LR() != cfg.LR {
		t.Fatalf("without a schedule the rate is %g, want lr %g", oa.LR(), cfg.LR)
	}
	if err := oa.SetSchedule(sched); err != nil {
		t.Fatal(err)
	}
	var ce *ConfigError
	if err := oa.SetSchedule(Schedule{Kind: "cosinee"}); !errors.As(err, &ce) || ce.Key != "lr_schedule" {
		t.Fatalf("SetSchedule accepted an unknown kind: %v", err)
	}
	// A recipe may leave a cosine schedule's length to be known later; the optimizer needs it.
	unset := Schedule{Kind: ScheduleCosine, Warmup: 2}
	if err := unset.Validate(); err != nil {
		t.Fatalf("a cosine schedule without total_updates yet: %v", err)
	}
	if err := oa.SetSchedule(unset); !errors.As(err, &ce) || ce.Key != "total_updates" || ce.Value != 0 {
		t.Fatalf("SetSchedule took a cosine schedule without total_updates: %v", err)
	}
	r := rand.New(rand.NewPCG(2, 3))
	grad := func() []float32 {
		g := make([]float32, a.Layout.Total)
		for i := range g {
			g[i] = float32(r.NormFloat64())
		}
		return g
	}
	var rates []float64
	step := func(o *AdamW, g []float32) {
		rates = append(rates, o.LR())
		o.model.EnsureGrads()
		o.model.B.Upload(o.model.Grads, g)
		o.Step(o.LR())
	}
	for range 3 {
		step(oa, grad())
	}
	if err := oa.ScaleLR(0.5); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if err := oa.ScaleLR(bad); err == nil {
			t.Errorf("ScaleLR(%g) accepted", bad)
		}
	}
	want := []float64{0.5e-2, 1e-2, cfg.LR * sched.Factor(3), 0.5 * cfg.LR * sched.Factor(4)}
	if got := oa.LR(); math.Abs(got-want[3]) > 1e-17 {
		t.Fatalf("after ScaleLR(0.5) the next rate is %g, want %g", got, want[3])
	}
	for i, w := range want[:3] {
		if math.Abs(rates[i]-w) > 1e-17 {
			t.Errorf("update %d ran at %g, want %g", i+1, rates[i], w)
		}
	}

	// What a checkpoint carries: the config (as JSON, under its tags), steps and moments.
	saved, err := json.Marshal(oa.Config)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(saved), `"lr":0.005`) {
		t.Fatalf("config JSON %s does not carry the scaled lr", saved)
	}
	var restored AdamWConfig
	if err := json.Unmarshal(saved, &restored); err != nil {
		t.Fatal(err)
	}
	m, v := oa.Export()
	b := tinyModel(t, a.ParamsHost())
	ob, err := NewAdamW(b, cfg) // the recipe builds it from its own config again
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.SetSchedule(sched); err != nil {
		t.Fatal(err)
	}
	ob.Config = restored
	if err := ob.Restore(m, v, oa.Steps); err != nil {
		t.Fatal(err)
	}
	for range 6 { // past the end of the cosine: the floor
		g := grad()
		if oa.LR() != ob.LR() {
			t.Fatalf("after restore the rates differ: %g and %g", oa.LR(), ob.LR())
		}
		step(oa, g)
		step(ob, g)
	}
	if got, want := oa.LR(), 0.5*cfg.LR*sched.MinRatio; math.Abs(got-want) > 1e-17 {
		t.Errorf("rate after the cosine = %g, want the scaled floor %g", got, want)
	}
	if !bitsEqual(a.ParamsHost(), b.ParamsHost()) {
		t.Fatal("the restored optimizer diverged")
	}
}

func TestClipScale(t *testing.T) {
	for _, c := range []struct{ total, max, want float64 }{
		{0.5, 1, 1}, {2, 1, 1 / (2 + 1e-6)}, {2, 0, 1},
	} {
		if got := ClipScale(c.total, c.max); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("ClipScale(%g, %g) = %g, want %g", c.total, c.max, got, c.want)
		}
	}
}
