package luabind

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/internal/tbread"
)

// A value TensorBoard cannot hold beside the session's others (a name logged again at a step)
// is warned of and left out, never replacing the first; the config goes in as text and as
// flat hparams.
func TestTensorBoardRefusedValueAndConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	src := `
local rook = require("rook")
local cfg = rook.config{ nested = { depth = 3 }, list = { 1, 2 }, name = "x" }
local p = rook.load("random:tiny")
local run = assert(rook.run{ dir = "` + dir + `", policy = p, opt = rook.adamw(p) })
run:log(0, { reward_mean = 0.25 }, "eval")
run:log(0, { reward_mean = 0.5 }, "eval")
run:log(1, { loss = 1.5 })
run:close()
`
	out, err := runLua(t, Options{Trust: true, Args: []string{}}, "tb.lua", src)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `warning: tbevents: "eval/reward_mean" at step 0 after step 0`) || !strings.Contains(out, "metrics.jsonl has it") {
		t.Errorf("no warning of the value left out:\n%s", out)
	}
	_, files, err := tbread.ReadDir(filepath.Join(dir, tensorboardDir))
	if err != nil {
		t.Fatal(err)
	}
	view := tbread.PythonView(files)
	if ps := view["eval/reward_mean"]; len(ps) != 1 || ps[0].Value != 0.25 {
		t.Errorf("eval/reward_mean: %v, want the first value only", ps)
	}
	if ps := view["loss"]; len(ps) != 1 || ps[0].Step != 1 || ps[0].Value != 1.5 {
		t.Errorf("loss: %v", ps)
	}
	if ps := view["config"]; len(ps) != 1 || !strings.Contains(ps[0].Text, `    "name": "x"`) {
		t.Errorf("config: %v", ps)
	}
	got := map[string]any{}
	for _, e := range files[0] {
		for _, v := range e.Values {
			if v.Plugin != "hparams" {
				continue
			}
			for _, f := range tbread.MustParse(v.Content) {
				if f.Num != 3 { // session_start_info
					continue
				}
				for _, sf := range tbread.MustParse(f.B) {
					if sf.Num != 1 { // hparams map entries
						continue
					}
					var key string
					for _, ef := range tbread.MustParse(sf.B) {
						switch ef.Num {
						case 1:
							key = string(ef.B)
						case 2:
							for _, vf := range tbread.MustParse(ef.B) {
								switch vf.Num {
								case 2:
									got[key] = math.Float64frombits(vf.U)
								case 3:
									got[key] = string(vf.B)
								}
							}
						}
					}
				}
			}
		}
	}
	if got["nested.depth"] != 3.0 || got["list"] != "[1,2]" || got["name"] != "x" {
		t.Errorf("hparams %v", got)
	}
}
