package luabind

import (
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/dist"
	"github.com/rookscript/rookscript/engine/rollout"
)

// rook.batch.join: a batch of chosen groups of several scored batches (rollout.Join), each
// group with its items, for DAPO's dynamic sampling (scripts/dynamic.lua). Groups are named by
// their index in the whole batch, which every rank of a data-parallel run agrees on; the
// joined batch is dealt to the ranks as model:rollout deals a batch — group j to rank j mod
// size — whichever rank sampled it, so that N ranks train the batch one rank would, each on
// its share. A group dealt to another rank than the one that sampled it travels there.

// wholePick is a joined group: group (0-based, of the whole batch) of part.
type wholePick struct{ part, group int }

// rook.batch.join(batches [, groups]) → batch: groups[i] lists the groups of batches[i] to
// keep (1-based, of the whole batch; nil: all), in the order they are joined.
func (e *Env) luaBatchJoin(L *lua.LState) int {
	parts, picks := joinArgs(L)
	c := e.world()
	bs := make([]*rollout.Batch, len(parts))
	for i, p := range parts {
		bs[i] = p.b
	}
	local := make([]map[int]int, len(parts)) // whole group → this rank's
	for i, p := range bs {
		local[i] = map[int]int{}
		for k := range p.Prompts {
			local[i][p.GlobalGroup(k)] = k
		}
	}
	if c.Size() == 1 {
		rp := make([]rollout.Pick, len(picks))
		for j, pk := range picks {
			rp[j] = rollout.Pick{Part: pk.part, Group: local[pk.part][pk.group]}
		}
		joined, err := rollout.Join(bs, rp)
		if err != nil {
			L.RaiseError("rook.batch.join: %s", err.Error())
		}
		L.Push(newUserData(L, batchType, &batch{b: joined, items: joinedItems(parts, nil, rp)}))
		return 1
	}
	share, items, err := e.dealJoined(parts, bs, local, picks)
	if err != nil {
		L.RaiseError("rook.batch.join: %s", err.Error())
	}
	L.Push(newUserData(L, batchType, &batch{b: share, items: items}))
	return 1
}

// joinArgs reads rook.batch.join's arguments: the batches, and the groups picked, in order.
func joinArgs(L *lua.LState) ([]*batch, []wholePick) {
	t := realTable(L.CheckTable(1))
	n := t.Len()
	if n == 0 {
		L.ArgError(1, "no batch to join")
	}
	parts := make([]*batch, n)
	for i := range n {
		ud, ok := t.RawGetInt(i + 1).(*lua.LUserData)
		b, isBatch := (*batch)(nil), false
		if ok {
			b, isBatch = ud.Value.(*batch)
		}
		if !isBatch {
			L.ArgError(1, fmt.Sprintf("element %d is a %s, want a rook.batch", i+1, describe(t.RawGetInt(i+1))))
		}
		parts[i] = b
	}
	var lists *lua.LTable
	if v := L.Get(2); v != lua.LNil {
		lists = realTable(L.CheckTable(2))
		lists.ForEach(func(k, _ lua.LValue) {
			if i, ok := k.(lua.LNumber); !ok || float64(i) != float64(int(i)) || int(i) < 1 || int(i) > n {
				L.ArgError(2, fmt.Sprintf("key %s: want one list of groups per batch (%d)", k, n))
			}
		})
	}
	var picks []wholePick
	for i, p := range parts {
		whole := p.b.WholeGroups()
		var list *lua.LTable
		if lists != nil {
			switch v := lists.RawGetInt(i + 1).(type) {
			case *lua.LTable:
				list = realTable(v)
			case *lua.LNilType:
			default:
				L.ArgError(2, fmt.Sprintf("groups[%d] is a %s, want a list of group numbers or nil (all)", i+1, describe(v)))
			}
		}
		if list == nil {
			for g := range whole {
				picks = append(picks, wholePick{i, g})
			}
			continue
		}
		seen := map[int]bool{}
		for k := 1; k <= list.Len(); k++ {
			v, ok := list.RawGetInt(k).(lua.LNumber)
			g := int(v)
			switch {
			case !ok || float64(v) != float64(g):
				L.ArgError(2, fmt.Sprintf("groups[%d][%d] is %s, want a group number", i+1, k, list.RawGetInt(k)))
			case g < 1 || g > whole:
				L.ArgError(2, fmt.Sprintf("groups[%d][%d] is %d: batch %d has groups 1 to %d", i+1, k, g, i+1, whole))
			case seen[g]:
				L.ArgError(2, fmt.Sprintf("groups[%d] lists group %d twice", i+1, g))
			}
			seen[g] = true
			picks = append(picks, wholePick{i, g - 1})
		}
	}
	return parts, picks
}

// joinedItems are the items of the groups picked, in order: parts' items, then those of the
// received batches (after the parts).
func joinedItems(parts []*batch, received [][]item, picks []rollout.Pick) []item {
	out := make([]item, len(picks))
	for j, pk := range picks {
		if pk.Part < len(parts) {
			out[j] = parts[pk.Part].items[pk.Group]
		} else {
			out[j] = received[pk.Part-len(parts)][pk.Group]
		}
	}
	return out
}

// dealJoined is this rank's share of the joined batch in a data-parallel run: the groups j
// with j mod size = rank, in order. Each rank sends the groups it holds that are dealt to
// another; every error is every rank's, so that no rank waits on one that gave up.
func (e *Env) dealJoined(parts []*batch, bs []*rollout.Batch, local []map[int]int, picks []wholePick) (*rollout.Batch, []item, error) {
	c := e.world()
	size, rank, n := c.Size(), c.Rank(), len(picks)
	if n > 0 && n < size {
		return nil, nil, fmt.Errorf("%d groups cannot be shared by %d ranks: a rank trains whole groups (keep at least one per rank)", n, size)
	}
	var send []rollout.Pick
	var at []int
	for j, pk := range picks {
		if k, ok := local[pk.part][pk.group]; ok && j%size != rank {
			send, at = append(send, rollout.Pick{Part: pk.part, Group: k}), append(at, j)
		}
	}
	sub, err := rollout.Join(bs, send)
	var payload []byte
	if err == nil {
		payload, err = encodeGroups(at, sub, joinedItems(parts, nil, send))
	}
	if err = e.agree(err); err != nil {
		return nil, nil, err
	}
	all, err := dist.Gather(c, payload)
	if err != nil {
		return nil, nil, err
	}
	// The groups dealt here that another rank holds, as further parts of the join.
	var received [][]item
	from := map[int]rollout.Pick{}
	for r, raw := range all {
		if r == rank {
			continue
		}
		w, derr := decodeGroups(raw)
		if derr != nil {
			err = fmt.Errorf("the groups rank %d sent: %w", r, derr)
			break
		}
		need := false
		for k, j := range w.Positions {
			if _, dup := from[j]; j%size == rank && !dup {
				from[j], need = rollout.Pick{Part: len(parts) + len(received), Group: k}, true
			}
		}
		if need {
			w.Batch.Stats = rollout.Stats{} // the sender's cost, counted there
			w.Batch.SampledLike(bs[0])      // by its policy, whose weights are this rank's
			bs = append(bs, w.Batch)
			received = append(received, w.items())
		}
	}
	mine, positions := []rollout.Pick{}, []int{}
	for j := rank; j < n && err == nil; j += size {
		pk := picks[j]
		if k, ok := local[pk.part][pk.group]; ok {
			mine = append(mine, rollout.Pick{Part: pk.part, Group: k})
		} else if p, ok := from[j]; ok {
			mine = append(mine, p)
		} else {
			err = fmt.Errorf("group %d of batch %d is on no rank", pk.group+1, pk.part+1)
		}
		positions = append(positions, j)
	}
	var share *rollout.Batch
	if err == nil {
		share, err = rollout.Join(bs, mine)
	}
	if err = e.agree(err); err != nil {
		return nil, nil, err
	}
	share.Groups, share.TotalGroups = positions, n
	return share, joinedItems(parts, received, mine), nil
}

// groupsWire is what a rank sends of the joined groups it holds: their places in the joined
// batch, the groups as a batch, and their items.
type groupsWire struct {
	Positions []int
	Batch     *rollout.Batch
	Items     []itemWire
}

// itemWire is an item's fields, exported for encoding.
type itemWire struct {
	Prompt, Task, FEN, Move, Target, Origin, StartFEN string
	History                                           []string
}

func encodeGroups(positions []int, b *rollout.Batch, items []item) ([]byte, error) {
	w := groupsWire{Positions: positions, Batch: b, Items: make([]itemWire, len(items))}
	for i, it := range items {
		w.Items[i] = itemWire{Prompt: it.prompt, Task: it.task, FEN: it.fen, Move: it.move, Target: it.target,
			Origin: it.origin, StartFEN: it.startFEN, History: it.history}
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(&w); err != nil {
		return nil, fmt.Errorf("encoding the groups sent to other ranks: %w", err)
	}
	return buf.Bytes(), nil
}

func decodeGroups(raw []byte) (*groupsWire, error) {
	var w groupsWire
	if err := gob.NewDecoder(bytes.NewReader(raw)).Decode(&w); err != nil {
		return nil, err
	}
	if w.Batch == nil || len(w.Items) != len(w.Positions) || len(w.Batch.Prompts) != len(w.Positions) {
		return nil, errors.New("a malformed message")
	}
	return &w, nil
}

func (w *groupsWire) items() []item {
	out := make([]item, len(w.Items))
	for i, it := range w.Items {
		out[i] = item{prompt: it.Prompt, task: it.Task, fen: it.FEN, move: it.Move, target: it.Target, origin: it.Origin,
			startFEN: it.StartFEN, history: it.History}
	}
	return out
}
