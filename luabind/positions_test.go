package luabind

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/chess"
	"github.com/rookscript/rookscript/engine/rookworld"
)

// rook.positions on data sets: a split list picks the test split where the directory has
// one, a cursor saved through Lua resumes a JSONL stream, text_column names the rows' column,
// skip_invalid counts what it skips and says so in the log, and a bad row's error names its
// file, row and column.
func TestPositionsDataSet(t *testing.T) {
	dir := t.TempDir()
	row := func(fen string) string {
		return rookworld.PolicyText(fen, []string{"e2e4"}, []float64{0.3}, "e2e4")
	}
	const kingless = "5R2/6R1/8/3P4/p7/1b2R2P/2p3P1/6K1 b - - 0 58"
	const other = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
	write := func(name string, lines ...string) string {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
		return p
	}
	jsonl := func(col, text string) string { return fmt.Sprintf("{%q: %q}", col, text) }
	set := filepath.Join(dir, "set")
	write("set/train/a.jsonl", jsonl("text", row(chess.StartFEN)))
	write("set/test/a.jsonl", jsonl("text", row(other)))
	rows := write("rows.jsonl", jsonl("row", row(chess.StartFEN)), jsonl("row", row(kingless)), jsonl("row", row(other)))

	src := fmt.Sprintf(`
local rook = require("rook")
local function first(opts) return opts and rook.positions(opts):next(1)[1].fen end
assert(first{ path = %[1]q } == %[3]q, "train split by default")
assert(first{ path = %[1]q, split = "test" } == %[4]q, "split = test")
assert(first{ path = %[1]q, split = { "test", "train" } } == %[4]q, "the first split there is")
assert(not pcall(rook.positions, { path = %[1]q, split = 3 }), "a split that is not a name")
local ok, err = rook.positions{ path = %[1]q, split = "validation" }
assert(ok == nil and err:find("validation", 1, true), err)

local strict = rook.positions{ path = %[2]q, text_column = "row" }
strict:next(1)
local ok, err = pcall(strict.next, strict, 1)
assert(not ok and err:find(%[2]q .. ": row 2: column \"row\": illegal position", 1, true), err)

local lenient = rook.positions{ path = %[2]q, text_column = "row", skip_invalid = true, loop = false }
local a = lenient:next(1)[1]
local cursor = lenient:cursor()
local b = lenient:next(1)[1]
assert(b.fen == %[4]q and #lenient:next(1) == 0)
local s = lenient:stats()
assert(s.items == 2 and s.skipped == 1 and s.epoch == 0, "stats")
local again = rook.positions{ path = %[2]q, text_column = "row", skip_invalid = true, loop = false }
again:restore(cursor)
local c = again:next(1)[1]
assert(c.prompt == b.prompt and c.target == b.target and c.origin == b.origin, "restored")
print("cursor " .. cursor.kind .. " " .. cursor.file .. " " .. cursor.line)
`, set, rows, chess.StartFEN, other)
	out, err := runLua(t, Options{Trust: true}, "positions.lua", src)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"rook.positions " + rows + ": skipped a bad record (skip_invalid): " + rows + ": row 2: column \"row\": illegal position",
		"cursor dataset rows.jsonl 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
