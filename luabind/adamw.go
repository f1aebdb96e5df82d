package luabind

import (
	"fmt"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/optim"
)

const adamType = "rook.adamw"

// adam is an optimizer bound to one model.
type adam struct {
	o     *optim.AdamW
	model *model
}

func (a *adam) String() string {
	c, s := a.o.Config, a.o.Schedule
	return fmt.Sprintf("rook.adamw(lr=%g, betas={%g, %g}, eps=%g, weight_decay=%g, lr_schedule=%s, lr_warmup=%d, steps=%d)",
		c.LR, c.Beta1, c.Beta2, c.Eps, c.WeightDecay, s.Kind, s.Warmup, a.o.Steps)
}

func checkAdam(L *lua.LState, n int) *adam { return check[*adam](L, n, adamType) }

// adamwOptions are rook.adamw's settings: AdamW's and its learning-rate schedule's, and
// betas = {beta1, beta2} as torch spells them.
type adamwOptions struct {
	optim.AdamWConfig
	optim.Schedule
	Betas []float64 `json:"betas,omitempty"`
}

// rook.adamw(model, {lr=, betas={b1, b2}, eps=, weight_decay=, decay_all=, lr_schedule=,
// lr_warmup=, total_updates=, lr_min_ratio=}) → optimizer. The optimizer owns the learning
// rate: lr shaped per update by the schedule (a linear warm-up over lr_warmup updates, then
// "constant" or "cosine" down to lr·lr_min_ratio at total_updates).
func (e *Env) luaAdamW(L *lua.LState) int {
	m := checkModel(L, 1)
	if m.frozen {
		L.ArgError(1, "a reference model is frozen: it cannot have an optimizer")
	}
	o := settingsArg[adamwOptions](L, 2, "adamw", "rook.adamw")
	opt, err := optim.NewAdamW(m.m, o.AdamWConfig)
	if err == nil {
		err = opt.SetSchedule(o.Schedule)
	}
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
	L.Push(newUserData(L, adamType, &adam{o: opt, model: m}))
	return 1
}

func (e *Env) adamMethods() map[string]lua.LGFunction {
	return map[string]lua.LGFunction{
		// opt:step([opts]) applies what forward_backward accumulated (primitives.go).
		"step": e.adamStep,
		// opt:steps() → updates applied so far (the schedule's clock).
		"steps": func(L *lua.LState) int { L.Push(lua.LNumber(checkAdam(L, 1).o.Steps)); return 1 },
		// opt:lr() → the learning rate of the next update.
		"lr": func(L *lua.LState) int { L.Push(lua.LNumber(checkAdam(L, 1).o.LR())); return 1 },
		// opt:set_lr(lr) sets the peak rate the schedule shapes.
		"set_lr": func(L *lua.LState) int {
			a := checkAdam(L, 1)
			lr := float64(L.CheckNumber(2))
			c := a.o.Config
			c.LR = lr
			if err := c.Validate(); err != nil {
				L.ArgError(2, err.Error())
			}
			a.o.Config.LR = lr
			return 0
		},
		// opt:scale_lr(f) multiplies the rate of every later update by f (a recovery policy's
		// move; the schedule keeps its shape).
		"scale_lr": func(L *lua.LState) int {
			if err := checkAdam(L, 1).o.ScaleLR(float64(L.CheckNumber(2))); err != nil {
				L.ArgError(2, err.Error())
			}
			return 0
		},
		// opt:options() → the optimizer's settings under their canonical names.
		"options": func(L *lua.LState) int {
			a := checkAdam(L, 1)
			L.Push(fromGo(L, record(adamwOptions{AdamWConfig: a.o.Config, Schedule: a.o.Schedule})))
			return 1
		},
	}
}
