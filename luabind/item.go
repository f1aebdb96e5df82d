package luabind

import (
	"fmt"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/rookworld"
)

// item is one prompt as a call was given it: a string, or an item table (what positions:next
// returns). A batch keeps the items of its prompts, and every chess scorer judges an answer by
// its item alone: an A: prompt whose answer depends on its game's history (a fivefold
// repetition) carries that game (startFEN, history), which positions:next puts on the table.
// Nothing about a prompt lives anywhere else, so a batch built in one place and scored in
// another, and an item kept in a checkpoint's state table, is judged the same.
type item struct {
	prompt string
	// The item table's fields; "" for a string.
	task, fen, move, target, origin string
	// The game behind an A: prompt whose answer needs it: where it started and the moves that
	// led to the prompt's position (rookworld.HistoryFor); "" and nil otherwise.
	startFEN string
	history  []string
}

// input is the scorer's input for completion of it.
func (it item) input(completion string, truncated bool) rookworld.Input {
	return rookworld.Input{Prompt: it.prompt, Completion: completion, Truncated: truncated,
		StartFEN: it.startFEN, History: it.history}
}

// promptItem is the item positions:next draws: prompt p from source item it, with its game
// where the answer needs it.
func promptItem(it rookworld.Item, p rookworld.Prompt) item {
	start, history, _ := rookworld.HistoryFor(it, p)
	return item{prompt: p.Prompt, task: p.Task, fen: p.FEN, move: p.Move, target: p.Target, origin: p.Origin,
		startFEN: start, history: history}
}

// table is the item as Lua sees it: {prompt=, task=, fen=, move=, target=, origin=, start_fen=,
// history=}, each field only where it is set.
func (it item) table(L *lua.LState) *lua.LTable {
	t := L.CreateTable(0, 8)
	for _, f := range []struct{ name, v string }{{"prompt", it.prompt}, {"task", it.task}, {"fen", it.fen},
		{"move", it.move}, {"target", it.target}, {"origin", it.origin}, {"start_fen", it.startFEN}} {
		if f.v != "" || f.name == "prompt" {
			t.RawSetString(f.name, lua.LString(f.v))
		}
	}
	if it.startFEN != "" {
		h := L.CreateTable(len(it.history), 0)
		for _, m := range it.history {
			h.Append(lua.LString(m))
		}
		t.RawSetString("history", h)
	}
	return t
}

// ItemError is a prompt that cannot be read as an item: Index is its place in the list of
// prompts (1-based; 0 for a call's one prompt), Field the item table's field at fault ("" when
// the value is neither a string nor a table).
type ItemError struct {
	Index  int
	Field  string
	Reason string
}

func (e *ItemError) Error() string {
	what := "the prompt"
	if e.Index > 0 {
		what = fmt.Sprintf("prompt %d", e.Index)
	}
	if e.Field == "" {
		return what + " " + e.Reason
	}
	return fmt.Sprintf("%s: field %q: %s", what, e.Field, e.Reason)
}

// readItem reads a prompt: a string, or an item table with a string field prompt. The other
// fields positions:next sets are optional, and strings where given; start_fen and history
// come together (history, the moves from start_fen, a list of strings): a history without its
// start cannot be replayed.
func readItem(v lua.LValue) (item, error) {
	switch x := v.(type) {
	case lua.LString:
		return item{prompt: string(x)}, nil
	case *lua.LTable:
		x = realTable(x)
		var it item
		var err error
		str := func(name string, dst *string, required bool) {
			switch s := x.RawGetString(name).(type) {
			case lua.LString:
				*dst = string(s)
			case *lua.LNilType:
				if required {
					err = &ItemError{Field: name, Reason: "want a string, got nil"}
				}
			default:
				err = &ItemError{Field: name, Reason: "want a string, got a " + describe(s)}
			}
		}
		for _, f := range []struct {
			name     string
			dst      *string
			required bool
		}{{"prompt", &it.prompt, true}, {"task", &it.task, false}, {"fen", &it.fen, false}, {"move", &it.move, false},
			{"target", &it.target, false}, {"origin", &it.origin, false}, {"start_fen", &it.startFEN, false}} {
			if str(f.name, f.dst, f.required); err != nil {
				return item{}, err
			}
		}
		h := x.RawGetString("history")
		if h == lua.LNil {
			if it.startFEN != "" {
				return item{}, &ItemError{Field: "history", Reason: "missing: start_fen gives where a game starts, history its moves"}
			}
			return it, nil
		}
		if it.startFEN == "" {
			return item{}, &ItemError{Field: "history", Reason: "without start_fen: a game's moves need the position they start from"}
		}
		ht, ok := h.(*lua.LTable)
		if !ok {
			return item{}, &ItemError{Field: "history", Reason: "want a list of moves, got a " + describe(h)}
		}
		n, count := ht.Len(), 0
		ht.ForEach(func(lua.LValue, lua.LValue) { count++ })
		if count != n {
			return item{}, &ItemError{Field: "history", Reason: "want a list of moves, got a table with other keys"}
		}
		it.history = make([]string, n)
		for i := range n {
			m, ok := ht.RawGetInt(i + 1).(lua.LString)
			if !ok {
				return item{}, &ItemError{Field: "history", Reason: fmt.Sprintf("move %d: want a string, got a %s", i+1, describe(ht.RawGetInt(i+1)))}
			}
			it.history[i] = string(m)
		}
		return it, nil
	}
	return item{}, &ItemError{Reason: "is a " + describe(v) + ", want a string or an item table"}
}

// promptArg reads argument n, one prompt: a string or an item table.
func promptArg(L *lua.LState, n int) item {
	it, err := readItem(L.Get(n))
	if err != nil {
		L.ArgError(n, err.Error())
	}
	return it
}

// promptsArg reads argument n, a prompt list: a string, or a list of strings and item tables
// (what positions:next returns).
func promptsArg(L *lua.LState, n int) []item {
	switch v := L.Get(n).(type) {
	case lua.LString:
		return []item{{prompt: string(v)}}
	case *lua.LTable:
		items, err := readItems(v)
		if err != nil {
			L.ArgError(n, err.Error())
		}
		return items
	}
	L.ArgError(n, "want a prompt string or a list of prompts")
	return nil
}

// readItems reads a list of prompts, strings and item tables; an *ItemError names the
// prompt's place in the list.
func readItems(t *lua.LTable) ([]item, error) {
	t = realTable(t)
	out := make([]item, 0, t.Len())
	for i := 1; i <= t.Len(); i++ {
		it, err := readItem(t.RawGetInt(i))
		if err != nil {
			err.(*ItemError).Index = i
			return nil, err
		}
		out = append(out, it)
	}
	return out, nil
}

// texts are the items' prompts.
func texts(items []item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.prompt
	}
	return out
}
