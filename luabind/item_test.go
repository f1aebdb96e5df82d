package luabind

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/chess"
	"github.com/rookscript/rookscript/engine/rookworld"
)

const repetitionPGN = "../engine/rookworld/testdata/repetition.pgn"

// A batch is judged by the items it carries, wherever it is scored. A batch of the knights
// game's fifth repetition is built inside a function; then another source gives the same
// prompt text from a game that began ten plies later, where the bare FEN is right (a book of
// games kept by prompt text would now judge the first batch's prompt by that game); then the
// batch is scored in another chunk. Its draw by repetition scores 1, and the same answer to
// the second source's item, judged by its own short game, 0.775, as does a batch of the prompt
// as a plain string, which carries no game.
func TestBatchScoresWithItsOwnGame(t *testing.T) {
	e, err := New(Options{Quiet: true, Trust: true, Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	run := func(src string) {
		t.Helper()
		if err := e.DoString(t.Context(), src, "items.lua"); err != nil {
			t.Fatal(err)
		}
	}
	run(`
		rook = require("rook")
		policy = rook.load("random:tiny")
		local function build()
			local data = rook.positions{ path = "` + repetitionPGN + `", per_game = 1000, loop = false, task = "env" }
			for _, it in ipairs(data:next(100)) do
				if it.origin == "` + repetitionPGN + `:4 ply 17" then
					return policy:rollout({ it }, { group = 2, max_new_tokens = 2, seed = 1 })
				end
			end
		end
		long = build()`)
	long := e.L.GetGlobal("long").(*lua.LUserData).Value.(*batch)
	it := long.items[0]
	if len(it.history) != 17 || it.startFEN != chess.StartFEN {
		t.Fatalf("the knights game's item carries %q %v, want its 17 moves from the start", it.startFEN, it.history)
	}

	// The same prompt from the game that starts after its seventh ply.
	g, err := chess.ReplayGame(it.startFEN, it.history[:7])
	if err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(t.TempDir(), "short.pgn")
	pgn := fmt.Sprintf("[Event \"The knights game from ply 7\"]\n[SetUp \"1\"]\n[FEN %q]\n[Result \"*\"]\n\n"+
		"4... Nc6 5. Ng1 Nb8 6. Nf3 Nc6 7. Ng1 Nb8 8. Nf3 Nc6 9. Ng1 Nb8 *\n", g.Position().FEN())
	if err := os.WriteFile(short, []byte(pgn), 0o644); err != nil {
		t.Fatal(err)
	}
	run(`
		local data = rook.positions{ path = "` + short + `", per_game = 1000, loop = false, task = "env" }
		for _, it in ipairs(data:next(100)) do
			if it.prompt == long:items()[1].prompt then same = it end
		end
		assert(same and same.history == nil, "the short game gives the same prompt, with no game to carry")
		plain = policy:rollout({ same.prompt }, { group = 2, max_new_tokens = 2, seed = 1 })
		other = policy:rollout({ same }, { group = 2, max_new_tokens = 2, seed = 1 })`)

	right, err := rookworld.EnvStepAfter(it.startFEN, it.history, it.fen, it.move)
	if err != nil || right.Termination != chess.FivefoldRepetition {
		t.Fatalf("the rules with the game: %+v, %v; want a fivefold repetition", right, err)
	}
	for _, name := range []string{"long", "plain", "other"} {
		b := e.L.GetGlobal(name).(*lua.LUserData).Value.(*batch)
		for k := range b.b.Completions {
			b.b.Completions[k].Text, b.b.Completions[k].Truncated = right.Completion(), false
		}
	}
	run(`
		rook.reward.chess(long)
		rook.reward.chess(plain)
		rook.reward.chess(other)
		scored = { long = long:rewards(), plain = plain:rewards(), other = other:rewards(),
		           score_long = rook.chess.score(long:items()[1], long[1].text).total,
		           score_same = rook.chess.score(same, long[1].text).total }`)
	got, err := toGo(e.L.GetGlobal("scored"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"long": []any{1.0, 1.0}, "plain": []any{0.775, 0.775}, "other": []any{0.775, 0.775},
		"score_long": 1.0, "score_same": 0.775}
	if !reflect.DeepEqual(rounded(got), want) {
		t.Errorf("the draw by repetition scores %v, want %v", got, want)
	}
}

// rounded is v (as toGo gives it) with its numbers rounded to 1e-9.
func rounded(v any) any {
	switch x := v.(type) {
	case float64:
		return math.Round(x*1e9) / 1e9
	case []any:
		out := make([]any, len(x))
		for i, y := range x {
			out[i] = rounded(y)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, y := range x {
			out[k] = rounded(y)
		}
		return out
	}
	return v
}

// readItem reads a string or an item table, and refuses what it cannot read with an
// *ItemError naming the field; readItems, a list's, adds the prompt's place in the list. An
// item table that went through a checkpoint (a run's state: toGo, JSON and back) reads as it
// was.
func TestReadItem(t *testing.T) {
	L := lua.NewState()
	defer L.Close()
	game := item{prompt: "A: fen+e2e4+e2e4+", task: "A", fen: "fen", move: "e2e4", origin: "f:1 ply 20",
		startFEN: chess.StartFEN, history: []string{"g1f3", "g8f6"}}
	for _, tc := range []struct {
		name  string
		src   string // a Lua expression
		want  item
		field string // the *ItemError's field; "-" for none
	}{
		{"a string", `"P: x"`, item{prompt: "P: x"}, "-"},
		{"a table with its prompt", `{ prompt = "P: x", extra = 1 }`, item{prompt: "P: x"}, "-"},
		{"an item with its game", `{ prompt = "A: fen+e2e4+e2e4+", task = "A", fen = "fen", move = "e2e4",
			origin = "f:1 ply 20", start_fen = "` + chess.StartFEN + `", history = { "g1f3", "g8f6" } }`, game, "-"},
		{"no prompt", `{ fen = "x" }`, item{}, "prompt"},
		{"a number prompt", `{ prompt = 3 }`, item{}, "prompt"},
		{"a table task", `{ prompt = "P: x", task = {} }`, item{}, "task"},
		{"a history without its start", `{ prompt = "A: x", history = { "e2e4" } }`, item{}, "history"},
		{"a start without its history", `{ prompt = "A: x", start_fen = "x" }`, item{}, "history"},
		{"a history of numbers", `{ prompt = "A: x", start_fen = "x", history = { 1 } }`, item{}, "history"},
		{"a history with keys", `{ prompt = "A: x", start_fen = "x", history = { "e2e4", by = "me" } }`, item{}, "history"},
		{"a history that is a string", `{ prompt = "A: x", start_fen = "x", history = "e2e4" }`, item{}, "history"},
		{"a number", `3`, item{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := L.DoString("v = " + tc.src + "; list = { \"P: first\", v }"); err != nil {
				t.Fatal(err)
			}
			got, err := readItem(L.GetGlobal("v"))
			list, lerr := readItems(L.GetGlobal("list").(*lua.LTable))
			if tc.field == "-" {
				if err != nil || lerr != nil {
					t.Fatalf("readItem: %v; in a list: %v", err, lerr)
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.want) || len(list) != 2 || fmt.Sprint(list[1]) != fmt.Sprint(tc.want) {
					t.Errorf("readItem = %+v, in a list %+v; want %+v", got, list, tc.want)
				}
				return
			}
			var ie *ItemError
			if !errors.As(err, &ie) || ie.Field != tc.field || ie.Index != 0 {
				t.Errorf("readItem: err = %v, want an *ItemError for field %q", err, tc.field)
			}
			if !errors.As(lerr, &ie) || ie.Field != tc.field || ie.Index != 2 {
				t.Errorf("readItems: err = %v, want an *ItemError for prompt 2's field %q", lerr, tc.field)
			}
		})
	}

	// An item table through a checkpoint's state (toGo, JSON, fromGo) reads the same.
	v, err := toGo(game.table(L))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var back any
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if got, err := readItem(fromGo(L, back)); err != nil || fmt.Sprint(got) != fmt.Sprint(game) || !slices.Equal(got.history, game.history) {
		t.Errorf("an item through a checkpoint reads %+v, %v; want %+v", got, err, game)
	}
}
