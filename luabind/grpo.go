package luabind

import (
	"errors"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/grpo"
)

// grpoOptions reads rook.grpo.step's options into a grpo.Config: this project's defaults, or
// TRL's when trl_compat = true; then every key given, under its canonical name or an alias.
func grpoOptions(t *lua.LTable) (grpo.Config, error) {
	c := grpo.DefaultConfig()
	if t != nil && t.RawGetString("trl_compat") == lua.LTrue {
		c = grpo.TRLConfig()
	}
	if t != nil && t.RawGetString("lr") != lua.LNil {
		return c, errors.New(`option "lr": the learning rate belongs to the optimizer (rook.adamw{lr=, lr_schedule=, lr_warmup=}, opt:set_lr, opt:scale_lr)`)
	}
	if err := decodeOptions(t, &c); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// trainerState is the GRPO trainer of a policy, kept across steps for its scratch buffers
// and its warn-once memory.
type trainerState struct{ tr *grpo.Trainer }

// rook.grpo.defaults([{trl_compat = true}]) → the step's default options under their
// canonical names (TRL's defaults and conventions with trl_compat).
func luaGRPODefaults(L *lua.LState) int {
	c, err := grpoOptions(L.OptTable(1, nil))
	if err != nil {
		L.RaiseError("rook.grpo.defaults: %s", bare(err, "grpo"))
	}
	L.Push(settingsTable(L, c))
	return 1
}

// rook.grpo.step(policy, ref, opt, batch [, opts]) → metrics table. ref may be nil when
// beta = 0 (the reference is then never run). Each update runs at the optimizer's scheduled
// learning rate. metrics.finite is a boolean: false when an update was skipped for a
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
	cfg, err := grpoOptions(L.OptTable(5, nil))
	if err != nil {
		L.RaiseError("rook.grpo.step: %s", bare(err, "grpo"))
	}
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
	tr.Warn = func(msg string) {
		if !e.opts.Quiet {
			e.say("warning: rook.grpo.step: " + strings.TrimPrefix(msg, "grpo: "))
		}
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

// rook.debug.inject_nan(policy) makes the policy's next GRPO step find a NaN in its
// gradient (fault drills and tests of recovery policies).
func luaInjectNaN(L *lua.LState) int {
	checkModel(L, 1).faultNaN = true
	return 0
}

// poisonGradient writes a NaN into one gradient element.
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
