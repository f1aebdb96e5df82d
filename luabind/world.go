package luabind

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/dist"
	"github.com/rookscript/rookscript/engine/gpt2"
)

// A data-parallel run (mpirun -np N rookscript recipe.lua): every rank runs the same recipe.
// Rank 0 alone writes the run directory and prints; the ranks draw the same prompts, each
// samples and scores its share of the groups (model:rollout), and rook.grpo.step keeps them
// in step (engine/grpo). A decision one rank takes alone — a save, a rollback's checkpoint —
// reaches the others through a broadcast, so that every rank takes the same branch.

// world is the environment's world of ranks.
func (e *Env) world() dist.Comm {
	if e.opts.World == nil {
		return dist.Single{}
	}
	return e.opts.World
}

// main reports whether this rank writes and prints for the run: rank 0.
func (e *Env) main() bool { return e.world().Rank() == 0 }

// rook.world: {rank=, size=, is_main=}.
func (e *Env) worldTable(L *lua.LState) *lua.LTable {
	c := e.world()
	t := L.NewTable()
	t.RawSetString("rank", lua.LNumber(c.Rank()))
	t.RawSetString("size", lua.LNumber(c.Size()))
	t.RawSetString("is_main", lua.LBool(c.Rank() == 0))
	return t
}

// fromMain runs f on rank 0 and gives every rank its outcome: its error (nil for none) and
// the bytes it returned.
func (e *Env) fromMain(f func() ([]byte, error)) ([]byte, error) {
	c := e.world()
	var out []byte
	var err error
	if c.Rank() == 0 {
		out, err = f()
	}
	if c.Size() == 1 {
		return out, err
	}
	msg := []byte(nil)
	if err != nil {
		msg = []byte(err.Error())
	}
	got, berr := broadcastBytes(c, [][]byte{msg, out}, 0)
	if berr != nil {
		return nil, berr
	}
	if len(got[0]) > 0 {
		return got[1], errors.New(string(got[0]))
	}
	return got[1], nil
}

// agree returns, on every rank, an error naming each rank whose err is not nil (nil when
// none is): a step every rank takes (loading a checkpoint, say) fails everywhere or nowhere.
func (e *Env) agree(err error) error {
	c := e.world()
	if c.Size() == 1 {
		return err
	}
	msg := []byte(nil)
	if err != nil {
		msg = []byte(err.Error())
	}
	all, gerr := dist.Gather(c, msg)
	if gerr != nil {
		return gerr
	}
	var bad []string
	for r, m := range all {
		if len(m) > 0 {
			bad = append(bad, fmt.Sprintf("rank %d: %s", r, m))
		}
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// broadcastBytes sends root's parts to every rank (each rank's parts count is the same).
func broadcastBytes(c dist.Comm, parts [][]byte, root int) ([][]byte, error) {
	sizes := make([]byte, 8*len(parts))
	for i, p := range parts {
		binary.LittleEndian.PutUint64(sizes[8*i:], uint64(len(p)))
	}
	if err := c.Broadcast(sizes, root); err != nil {
		return nil, err
	}
	out := make([][]byte, len(parts))
	for i := range parts {
		out[i] = make([]byte, binary.LittleEndian.Uint64(sizes[8*i:]))
		if c.Rank() == root {
			copy(out[i], parts[i])
		}
		if err := c.Broadcast(out[i], root); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// weightsCheckEvery is how often, in steps, the ranks of a data-parallel run compare their
// policies' weights: a content hash each, which costs a pass over the weights.
const weightsCheckEvery = 10

// sameWeights compares the ranks' policy weights at every weightsCheckEvery-th step: they
// apply the same update to the same weights (engine/grpo), so a difference is a bug, and the
// run stops naming the ranks that differ from rank 0.
func (r *run) sameWeights(step int) error {
	c := r.env.world()
	if c.Size() == 1 || step%weightsCheckEvery != 0 {
		return nil
	}
	hash := gpt2.ParamsHash(r.policy.m.Config, r.policy.m.ParamsHost())
	all, err := dist.Gather(c, []byte(hash))
	if err != nil {
		return err
	}
	var bad []string
	for rk, h := range all {
		if string(h) != string(all[0]) {
			bad = append(bad, fmt.Sprintf("rank %d's weights hash to %s, rank 0's to %s", rk, short(string(h)), short(string(all[0]))))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("the ranks' policies differ at step %d (%s): they must apply the same update; stopping", step, strings.Join(bad, "; "))
	}
	return nil
}
