package luabind

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/grpo"
	"github.com/rookscript/rookscript/engine/rookworld"
	"github.com/rookscript/rookscript/engine/stockfish"
)

// TestEngineSettingNames: every field of a setting group's struct (nested structs too) is a
// named setting (or explicitly "-"), and no name a flat config may use (canonical or alias)
// means two different settings, so a flat recipe config can carry them all. A group made of
// other groups' settings (rook.eval's) uses their names: each of its settings is one of
// theirs, under the same names.
func TestEngineSettingNames(t *testing.T) {
	owner := map[string]string{}
	for _, g := range settingGroups {
		var walk func(reflect.Type)
		walk = func(st reflect.Type) {
			for i := range st.NumField() {
				f := st.Field(i)
				if f.Anonymous {
					walk(f.Type)
					continue
				}
				tag, ok := f.Tag.Lookup("json")
				if !ok {
					t.Errorf("%s.%s has no json tag: it has no name as a setting", st, f.Name)
				}
				if f.Type.Kind() == reflect.Struct && tag != "-" {
					walk(f.Type)
				}
			}
		}
		walk(g.typ)
		if g.of != nil {
			continue
		}
		s := schemaOf(g.typ)
		for _, name := range s.names {
			names := g.flatNames(name)
			if len(names) == 0 && !slices.Contains(g.perCall, name) {
				t.Errorf("%s.%s has no name in a flat config", g.name, name)
			}
			for _, n := range names {
				if prev, dup := owner[n]; dup {
					t.Errorf("%q names %s and %s.%s", n, prev, g.name, name)
				}
				owner[n] = g.name + "." + name
			}
		}
	}
	for _, g := range settingGroups {
		if g.of == nil {
			continue
		}
		s := schemaOf(g.typ)
		for _, name := range s.names {
			found := false
			for _, o := range g.of {
				og := group(o)
				if og == nil {
					t.Fatalf("group %s is made of unknown group %q", g.name, o)
				}
				if _, ok := schemaOf(og.typ).fields[name]; ok {
					found = true
					if a, b := g.flatNames(name), og.flatNames(name); !slices.Equal(a, b) {
						t.Errorf("%s.%s is named %v, %s.%s %v", g.name, name, a, o, name, b)
					}
					if a, b := s.fields[name].typ, schemaOf(og.typ).fields[name].typ; a != b {
						t.Errorf("%s.%s is a %s, %s.%s a %s", g.name, name, a, o, name, b)
					}
				}
			}
			if !found {
				t.Errorf("%s.%s is a setting of none of %v", g.name, name, g.of)
			}
		}
	}
}

// luaTable evaluates a Lua table constructor.
func luaTable(t *testing.T, L *lua.LState, src string) *lua.LTable {
	t.Helper()
	if err := L.DoString("return " + src); err != nil {
		t.Fatal(err)
	}
	v := L.Get(-1).(*lua.LTable)
	L.Pop(1)
	return v
}

func TestDecodeOptions(t *testing.T) {
	L := lua.NewState()
	defer L.Close()
	c := grpo.DefaultConfig()
	if err := decodeOptions(luaTable(t, L, `{ kl_coef = 0.1, loss_type = "dapo", num_iterations = 3, drop_zero_std = true }`), &c); err != nil {
		t.Fatal(err)
	}
	if c.Beta != 0.1 || c.LossType != grpo.LossDAPO || c.NumIterations != 3 || !c.DropZeroStd || c.Epsilon != 0.2 {
		t.Errorf("decoded %+v", c)
	}
	var o adamwOptions // embedded structs: their settings are the outer struct's
	if err := decodeOptions(luaTable(t, L, `{ lr = 3e-4, lr_schedule = "cosine", total_updates = 10, betas = {} }`), &o, "betas"); err != nil {
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
		if err := decodeOptions(luaTable(t, L, src), &c); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", src, err, want)
		}
	}
}

// TestDecodeNestedListsAndNamedStrings: a nested config struct is read from a sub-table over
// its defaults, a slice from a list, a named string type from a string; an error names the
// key by its path.
func TestDecodeNestedListsAndNamedStrings(t *testing.T) {
	L := lua.NewState()
	defer L.Close()
	c := rookworld.DefaultRewardConfig()
	src := `{ policy = { best_rank = 0.6 }, env = { fen = 0.5, flags = 0.25 }, rank_credit = { 1, 0.5 },
	          shaping = "centered", malformed_floor = -0.5, fen_partial = true }`
	if err := decodeOptions(luaTable(t, L, src), &c); err != nil {
		t.Fatal(err)
	}
	want := rookworld.DefaultRewardConfig()
	want.Policy.BestRank = 0.6
	want.Env.FEN, want.Env.Flags = 0.5, 0.25
	want.RankCredit = []float64{1, 0.5}
	want.Shaping = rookworld.ShapeCentered
	want.MalformedFloor, want.FENPartial = -0.5, true
	if !reflect.DeepEqual(c, want) {
		t.Errorf("decoded\n%+v\nwant\n%+v", c, want)
	}
	if d := rookworld.DefaultRewardConfig(); d.RankCredit[1] != 0.7 {
		t.Errorf("decoding a list changed the defaults' list: %v", d.RankCredit)
	}

	for src, want := range map[string]string{
		`{ policy = { best_rnk = 1 } }`:            `unknown option "policy.best_rnk" (did you mean "policy.best_rank"?)`,
		`{ policy = { eval = "x" } }`:              `option "policy.eval": want a number, got the string "x"`,
		`{ env = { flags = 1, flags2 = 1 } }`:      `unknown option "env.flags2" (did you mean "env.flags"?)`,
		`{ policy = 1 }`:                           `option "policy": want a table of settings, got 1`,
		`{ policy = { [1] = 0.5 } }`:               `option keys are names, got number 1 (in "policy")`,
		`{ rank_credit = 1 }`:                      `option "rank_credit": want a list, got 1`,
		`{ rank_credit = { 1, "x" } }`:             `option "rank_credit": element 2: want a number, got the string "x"`,
		`{ rank_credit = { 1, best = 2 } }`:        `option "rank_credit": want a list (keys 1, 2, …, n)`,
		`{ shaping = 1 }`:                          `option "shaping": want a string, got 1`,
		`{ malformed = -1, malformed_floor = -1 }`: `option "malformed" is given twice, as "malformed", "malformed_floor"`,
	} {
		c := rookworld.DefaultRewardConfig()
		if err := decodeOptions(luaTable(t, L, src), &c); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", src, err, want)
		}
	}

	// A float of seconds, and a recipe's alias for the bare name.
	sf := stockfish.DefaultConfig()
	if err := decodeOptions(luaTable(t, L, `{ timeout = 2.5, stockfish_depth = 6, stockfish = "/bin/sf" }`), &sf); err != nil {
		t.Fatal(err)
	}
	if sf.Timeout != 2.5 || sf.Depth != 6 || sf.Path != "/bin/sf" || sf.Workers != 1 {
		t.Errorf("decoded %+v", sf)
	}
}

// TestSettingsTableNested: settingsTable renders nested structs as sub-tables and slices as
// lists, and decoding what it renders gives the config back.
func TestSettingsTableNested(t *testing.T) {
	L := lua.NewState()
	defer L.Close()
	want := rookworld.DefaultRewardConfig()
	want.Policy.Eval, want.RankCredit, want.Shaping = 0.3, []float64{1, 0.25, 0}, rookworld.ShapeStrict
	tbl := settingsTable(L, want)
	if p, ok := tbl.RawGetString("policy").(*lua.LTable); !ok || p.RawGetString("eval") != lua.LNumber(0.3) {
		t.Fatalf("policy = %v", tbl.RawGetString("policy"))
	}
	if rc, ok := tbl.RawGetString("rank_credit").(*lua.LTable); !ok || rc.Len() != 3 || rc.RawGetInt(2) != lua.LNumber(0.25) {
		t.Fatalf("rank_credit = %v", tbl.RawGetString("rank_credit"))
	}
	var got rookworld.RewardConfig
	if err := decodeOptions(tbl, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip\n%+v\nwant\n%+v", got, want)
	}
}
