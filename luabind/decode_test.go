package luabind

import (
	"reflect"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/grpo"
)

// TestEngineSettingNames: every field of an engine config struct is a named setting (or
// explicitly "-"), and no name (canonical or alias) means two different settings, so a flat
// recipe config can carry them all.
func TestEngineSettingNames(t *testing.T) {
	owner := map[string]string{}
	for _, typ := range engineSettings {
		var walk func(reflect.Type)
		walk = func(st reflect.Type) {
			for i := range st.NumField() {
				f := st.Field(i)
				if f.Anonymous {
					walk(f.Type)
					continue
				}
				if _, ok := f.Tag.Lookup("json"); !ok {
					t.Errorf("%s.%s has no json tag: it has no name as a setting", st, f.Name)
				}
			}
		}
		walk(typ)
		s := schemaOf(typ)
		for _, name := range s.names {
			for _, n := range append([]string{name}, s.fields[name].aliases...) {
				if prev, dup := owner[n]; dup {
					t.Errorf("%q names %s and %s.%s", n, prev, typ, name)
				}
				owner[n] = typ.String() + "." + name
			}
		}
	}
}

func TestDecodeOptions(t *testing.T) {
	L := lua.NewState()
	defer L.Close()
	table := func(src string) *lua.LTable {
		if err := L.DoString("return " + src); err != nil {
			t.Fatal(err)
		}
		v := L.Get(-1).(*lua.LTable)
		L.Pop(1)
		return v
	}
	c := grpo.DefaultConfig()
	if err := decodeOptions(table(`{ kl_coef = 0.1, loss_type = "dapo", num_iterations = 3, drop_zero_std = true }`), &c); err != nil {
		t.Fatal(err)
	}
	if c.Beta != 0.1 || c.LossType != grpo.LossDAPO || c.NumIterations != 3 || !c.DropZeroStd || c.Epsilon != 0.2 {
		t.Errorf("decoded %+v", c)
	}
	var o adamwOptions // embedded structs: their settings are the outer struct's
	if err := decodeOptions(table(`{ lr = 3e-4, lr_schedule = "cosine", total_updates = 10, betas = {} }`), &o, "betas"); err != nil {
		t.Fatal(err)
	}
	if o.LR != 3e-4 || o.Kind != "cosine" || o.Total != 10 {
		t.Errorf("decoded %+v", o)
	}
	for src, want := range map[string]string{
		`{ [1] = 5 }`:                     "option keys are names",
		`{ beta = true }`:                 `option "beta": want a number, got true`,
		`{ kl_coef = "x" }`:               `option "kl_coef" (beta): want a number, got the string "x"`,
		`{ minibatches = 2.5 }`:           `option "minibatches": want an integer, got 2.5`,
		`{ drop_zero_std = 1 }`:           `option "drop_zero_std": want true or false, got 1`,
		`{ loss_type = {} }`:              `option "loss_type": want a string, got a table`,
		`{ epsilon = 0.1, clip = 0.2 }`:   `option "epsilon" is given twice, as "epsilon", "clip"`,
		`{ scale_reward = "batch" }`:      `unknown option "scale_reward" (did you mean "scale_rewards"?)`,
		`{ importance_sampling = "seq" }`: `unknown option "importance_sampling"`,
	} {
		c := grpo.DefaultConfig()
		if err := decodeOptions(table(src), &c); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", src, err, want)
		}
	}
}
