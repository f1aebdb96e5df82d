package luabind

import (
	"fmt"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/grpo"
	"github.com/rookscript/rookscript/engine/optim"
)

const adamType = "rook.adamw"

// adam is an optimizer bound to one model.
type adam struct {
	o     *optim.AdamW
	model *model
}

func (a *adam) String() string {
	c := a.o.Config
	return fmt.Sprintf("rook.adamw(lr=%g, betas={%g, %g}, eps=%g, weight_decay=%g, steps=%d)", c.LR, c.Beta1, c.Beta2, c.Eps, c.WeightDecay, a.o.Steps)
}

func checkAdam(L *lua.LState, n int) *adam { return check[*adam](L, n, adamType) }

// rook.adamw(model, {lr=, betas={b1, b2}, eps=, weight_decay=, decay_all=}) → optimizer.
func (e *Env) luaAdamW(L *lua.LState) int {
	m := checkModel(L, 1)
	if m.frozen {
		L.ArgError(1, "a reference model is frozen: it cannot have an optimizer")
	}
	o := optsArg(L, 2, "rook.adamw")
	d := optim.DefaultAdamW()
	cfg := optim.AdamWConfig{LR: o.num("lr", d.LR), Beta1: d.Beta1, Beta2: d.Beta2, Eps: o.num("eps", d.Eps),
		WeightDecay: o.num("weight_decay", d.WeightDecay), DecayAll: o.boolean("decay_all", false)}
	if bt, ok := o.value("betas").(*lua.LTable); ok {
		b := numberList(L, bt, "rook.adamw betas")
		if len(b) != 2 {
			L.RaiseError("rook.adamw: betas must be {beta1, beta2}, got %d numbers", len(b))
		}
		cfg.Beta1, cfg.Beta2 = b[0], b[1]
	} else if o.value("betas") != lua.LNil {
		L.RaiseError("rook.adamw: betas must be a table {beta1, beta2}")
	}
	o.done()
	opt, err := optim.NewAdamW(m.m, cfg)
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
	L.Push(newUserData(L, adamType, &adam{o: opt, model: m}))
	return 1
}

var adamMethods = map[string]lua.LGFunction{
	"steps": func(L *lua.LState) int { L.Push(lua.LNumber(checkAdam(L, 1).o.Steps)); return 1 },
	"lr":    func(L *lua.LState) int { L.Push(lua.LNumber(checkAdam(L, 1).o.Config.LR)); return 1 },
	"set_lr": func(L *lua.LState) int {
		a := checkAdam(L, 1)
		lr := float64(L.CheckNumber(2))
		if !(lr >= 0) {
			L.ArgError(2, "lr must be ≥ 0")
		}
		a.o.Config.LR = lr
		return 0
	},
}

// trainerState is the GRPO trainer of a policy, kept across steps for its scratch buffers.
type trainerState struct{ tr *grpo.Trainer }

// grpoConfig reads a step's options over grpo.DefaultConfig. "clip" sets both clip bounds.
func grpoConfig(L *lua.LState, o *opts, lr float64) grpo.Config {
	c := grpo.DefaultConfig()
	c.LR = lr
	c.Scale = o.str("scale", c.Scale)
	c.StdEps = o.num("std_eps", c.StdEps)
	c.DropZeroStd = o.boolean("drop_zero_std", c.DropZeroStd)
	clip := o.num("clip", -1)
	if clip >= 0 {
		c.ClipLow, c.ClipHigh = clip, clip
	}
	c.ClipLow = o.num("clip_low", c.ClipLow)
	c.ClipHigh = o.num("clip_high", c.ClipHigh)
	c.RatioLevel = o.str("ratio_level", c.RatioLevel)
	c.Aggregation = o.str("aggregation", c.Aggregation)
	c.Beta = o.num("beta", c.Beta)
	c.KLEstimator = o.str("kl_estimator", c.KLEstimator)
	c.EntropyCoef = o.num("entropy_coef", c.EntropyCoef)
	c.MaskTruncated = o.boolean("mask_truncated", c.MaskTruncated)
	c.Epochs = o.int("epochs", c.Epochs)
	c.Minibatches = o.int("minibatches", c.Minibatches)
	c.MicroBatch = o.int("micro_batch", c.MicroBatch)
	c.MaxGradNorm = o.num("max_grad_norm", c.MaxGradNorm)
	c.LR = o.num("lr", c.LR)
	if err := c.Validate(); err != nil {
		L.RaiseError("%s", err.Error())
	}
	return c
}

// rook.grpo.defaults() → the default step options, as a table.
func luaGRPODefaults(L *lua.LState) int {
	c := grpo.DefaultConfig()
	L.Push(fromGo(L, map[string]any{"scale": c.Scale, "std_eps": c.StdEps, "drop_zero_std": c.DropZeroStd,
		"clip_low": c.ClipLow, "clip_high": c.ClipHigh, "ratio_level": c.RatioLevel, "aggregation": c.Aggregation,
		"beta": c.Beta, "kl_estimator": c.KLEstimator, "entropy_coef": c.EntropyCoef, "mask_truncated": c.MaskTruncated,
		"epochs": c.Epochs, "minibatches": c.Minibatches, "micro_batch": c.MicroBatch, "max_grad_norm": c.MaxGradNorm}))
	return 1
}

// rook.grpo.step(policy, ref, opt, batch [, opts]) → metrics table. ref may be nil when
// beta = 0 (the reference is then never run). The learning rate is opts.lr or the
// optimizer's. metrics.finite is a boolean: false when an update was skipped for a
// non-finite loss or gradient.
func (e *Env) luaGRPOStep(L *lua.LState) int {
	p := checkModel(L, 1)
	var ref *model
	if L.Get(2) != lua.LNil {
		ref = checkModel(L, 2)
		if !ref.frozen {
			L.ArgError(2, "the reference must be a frozen copy (policy:reference())")
		}
		if ref.m.Config != p.m.Config {
			L.ArgError(2, "the reference's architecture differs from the policy's")
		}
	}
	checkRunReference(L, p, ref)
	opt := checkAdam(L, 3)
	if opt.model != p {
		L.ArgError(3, "this optimizer belongs to another model")
	}
	b := checkBatch(L, 4)
	o := optsArg(L, 5, "rook.grpo.step")
	cfg := grpoConfig(L, o, opt.o.Config.LR)
	o.done()
	if cfg.Beta > 0 && ref == nil {
		L.ArgError(2, "beta > 0 needs a reference model")
	}
	if p.frozen {
		L.ArgError(1, "the policy is a frozen reference")
	}
	if p.trainer == nil {
		p.trainer = &trainerState{tr: &grpo.Trainer{Policy: p.m, Opt: opt.o}}
	}
	tr := p.trainer.tr
	tr.Opt, tr.Ref = opt.o, nil
	if ref != nil {
		tr.Ref = ref.m
	}
	tr.Hooks.AfterBackward = nil
	if p.faultNaN {
		p.faultNaN = false
		tr.Hooks.AfterBackward = poisonGradient
	}
	m, err := tr.Step(L.Context(), b.b, cfg)
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
	L.Push(metricsTable(L, m))
	return 1
}

// poisonGradient writes a NaN into one gradient element (model:inject_nan()).
func poisonGradient(m *gpt2.Model) {
	g, _ := m.Grad("ln_f.bias")
	m.B.Upload(g.Slice(0, 1), []float32{float32(nan())})
}

// metricsTable converts step metrics to Lua: numbers, except "finite" which is a boolean.
func metricsTable(L *lua.LState, m map[string]float64) *lua.LTable {
	t := L.CreateTable(0, len(m))
	for k, v := range m {
		if k == "finite" {
			t.RawSetString(k, lua.LBool(v != 0))
			continue
		}
		t.RawSetString(k, lua.LNumber(v))
	}
	return t
}
