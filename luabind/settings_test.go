package luabind

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/grpo"
	"github.com/rookscript/rookscript/engine/rookworld"
	"github.com/rookscript/rookscript/engine/stockfish"
)

// TestSectionSettingNames: every field of a section's struct (nested structs too) is a named
// setting (or explicitly "-").
func TestSectionSettingNames(t *testing.T) {
	for _, sec := range sectionSpecs {
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
		walk(sec.typ)
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

func TestDecode(t *testing.T) {
	L := lua.NewState()
	defer L.Close()
	c := grpo.DefaultConfig()
	if err := decode(luaTable(t, L, `{ beta = 0.1, loss_type = "dapo", num_iterations = 3, drop_zero_std = true }`), &c, ""); err != nil {
		t.Fatal(err)
	}
	if c.Beta != 0.1 || c.LossType != grpo.LossDAPO || c.NumIterations != 3 || !c.DropZeroStd || c.Epsilon != 0.2 {
		t.Errorf("decoded %+v", c)
	}
	var o adamwOptions // embedded structs: their settings are the outer struct's
	if err := decode(luaTable(t, L, `{ lr = 3e-4, lr_schedule = "cosine", total_updates = 10, betas = { 0.8, 0.9 } }`), &o, ""); err != nil {
		t.Fatal(err)
	}
	if o.LR != 3e-4 || o.Kind != "cosine" || o.Total != 10 || len(o.Betas) != 2 {
		t.Errorf("decoded %+v", o)
	}
	for src, want := range map[string]string{
		`{ [1] = 5 }`:                     "option keys are names",
		`{ beta = true }`:                 `option "beta": want a number, got true`,
		`{ beta = "x" }`:                  `option "beta": want a number, got the string "x"`,
		`{ kl_coef = 0.1 }`:               `unknown option "kl_coef"`, // a setting has one name
		`{ minibatches = 2.5 }`:           `option "minibatches": want an integer, got 2.5`,
		`{ drop_zero_std = 1 }`:           `option "drop_zero_std": want true or false, got 1`,
		`{ loss_type = {} }`:              `option "loss_type": want a string, got a table`,
		`{ scale_reward = "batch" }`:      `unknown option "scale_reward" (did you mean "scale_rewards"?)`,
		`{ importance_sampling = "seq" }`: `unknown option "importance_sampling"`,
		`{ betas = 1 }`:                   `unknown option "betas"`, // another struct's setting is not suggested either
	} {
		c := grpo.DefaultConfig()
		if err := decode(luaTable(t, L, src), &c, ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", src, err, want)
		}
	}
	var unknown *UnknownOptionError
	if err := decode(luaTable(t, L, `{ bets = 1 }`), &o, ""); !errors.As(err, &unknown) || unknown.Key != "bets" || unknown.Suggestion != ` (did you mean "betas"?)` {
		t.Errorf("a misspelt adamw key: %v (want a suggestion among adamw's own names)", err)
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
	          shaping = "centered", malformed = -0.5, fen_partial = true }`
	if err := decode(luaTable(t, L, src), &c, ""); err != nil {
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
		`{ policy = { best_rnk = 1 } }`:       `unknown option "policy.best_rnk" (did you mean "best_rank"?)`,
		`{ policy = { eval = "x" } }`:         `option "policy.eval": want a number, got the string "x"`,
		`{ env = { flags = 1, flags2 = 1 } }`: `unknown option "env.flags2" (did you mean "flags"?)`,
		`{ policy = 1 }`:                      `option "policy": want a table of settings, got 1`,
		`{ policy = { [1] = 0.5 } }`:          `option keys are names, got number 1`,
		`{ rank_credit = 1 }`:                 `option "rank_credit": want a list, got 1`,
		`{ rank_credit = { 1, "x" } }`:        `option "rank_credit": element 2: want a number, got the string "x"`,
		`{ rank_credit = { 1, best = 2 } }`:   `option "rank_credit": want a list (keys 1, 2, …, n)`,
		`{ shaping = 1 }`:                     `option "shaping": want a string, got 1`,
	} {
		c := rookworld.DefaultRewardConfig()
		if err := decode(luaTable(t, L, src), &c, ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", src, err, want)
		}
	}

	// A float of seconds.
	sf := stockfish.DefaultConfig()
	if err := decode(luaTable(t, L, `{ timeout = 2.5, depth = 6, path = "/bin/sf" }`), &sf, ""); err != nil {
		t.Fatal(err)
	}
	if sf.Timeout != 2.5 || sf.Depth != 6 || sf.Path != "/bin/sf" || sf.Workers != 1 {
		t.Errorf("decoded %+v", sf)
	}
	var unknown *UnknownOptionError
	if err := decode(luaTable(t, L, `{ dept = 6 }`), &sf, "stockfish."); !errors.As(err, &unknown) || unknown.Key != "stockfish.dept" {
		t.Errorf("a misspelt option: %v", err)
	}
}

// TestRecordTableNested: a config's record, as a Lua table, has nested structs as sub-tables
// and slices as lists, and decoding it gives the config back.
func TestRecordTableNested(t *testing.T) {
	L := lua.NewState()
	defer L.Close()
	want := rookworld.DefaultRewardConfig()
	want.Policy.Eval, want.RankCredit, want.Shaping = 0.3, []float64{1, 0.25, 0}, rookworld.ShapeStrict
	tbl := fromGo(L, record(want)).(*lua.LTable)
	if p, ok := tbl.RawGetString("policy").(*lua.LTable); !ok || p.RawGetString("eval") != lua.LNumber(0.3) {
		t.Fatalf("policy = %v", tbl.RawGetString("policy"))
	}
	if rc, ok := tbl.RawGetString("rank_credit").(*lua.LTable); !ok || rc.Len() != 3 || rc.RawGetInt(2) != lua.LNumber(0.25) {
		t.Fatalf("rank_credit = %v", tbl.RawGetString("rank_credit"))
	}
	var got rookworld.RewardConfig
	if err := decode(tbl, &got, ""); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip\n%+v\nwant\n%+v", got, want)
	}
}
