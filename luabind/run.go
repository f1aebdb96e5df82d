package luabind

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/checkpoint"
)

const runType = "rook.run"

// run is a training run on disk: metrics log, checkpoints, the reference's identity.
type run struct {
	env      *Env
	r        *checkpoint.Run
	policy   *model
	ref      *model // nil when the run has no KL reference
	opt      *adam
	data     *positions
	identity checkpoint.Identity
	step     int
	resumed  bool
	recipe   json.RawMessage // the recipe state of the checkpoint resumed from
	progress *progress
}

func (r *run) String() string {
	return fmt.Sprintf("rook.run(%s, step %d%s)", r.r.Dir, r.step, map[bool]string{true: ", resumed", false: ""}[r.resumed])
}

func checkRun(L *lua.LState, n int) *run { return check[*run](L, n, runType) }

// rook.run{dir=, policy=, ref=, opt=, data=, steps=, keep=3, best=, best_mode="max",
// resume=, config=} → run (config: the resolved config to record; the last rook.config's by
// default). A new run records the recipe, the resolved config and the reference's
// identity (its source and content hash). With resume (a run directory), everything comes
// back from its last checkpoint: policy weights, optimizer state, data cursor, sampling
// counters and the recipe state (run:state()); the reference is reloaded from its recorded
// source and its hash checked — never taken from the resumed policy.
func (e *Env) luaRun(L *lua.LState) int {
	o := optsArg(L, 1, "rook.run")
	dir := o.str("dir", "")
	resume := o.str("resume", "")
	steps := o.int("steps", 0)
	keep := o.int("keep", 3)
	best := o.str("best", "")
	bestMode := o.str("best_mode", "")
	if best != "" && bestMode == "" {
		bestMode = "max"
	}
	r := &run{env: e}
	r.policy = userValue[*model](L, o, "policy", modelType, true)
	r.ref = userValue[*model](L, o, "ref", modelType, false)
	r.opt = userValue[*adam](L, o, "opt", adamType, true)
	r.data = userValue[*positions](L, o, "data", positionsType, false)
	var cfg any = e.config
	if t, ok := o.value("config").(*lua.LTable); ok {
		v, err := toGo(t)
		if err != nil {
			L.RaiseError("rook.run: config: %s", err.Error())
		}
		cfg = v
	}
	o.done()
	if r.opt.model != r.policy {
		L.RaiseError("rook.run: opt is not the policy's optimizer")
	}
	if r.ref != nil && !r.ref.frozen {
		L.RaiseError("rook.run: ref must be a frozen reference (policy:reference())")
	}
	if resume != "" {
		if dir != "" && filepath.Clean(dir) != filepath.Clean(resume) {
			L.RaiseError("rook.run: dir %s and resume %s name different runs", dir, resume)
		}
		if err := r.resume(L, resume); err != nil {
			return pushErr(L, err)
		}
	} else {
		if dir == "" {
			L.RaiseError("rook.run: dir is required")
		}
		if err := r.create(dir, checkpoint.Options{KeepLast: keep, BestMetric: best, BestMode: bestMode}, cfg); err != nil {
			return pushErr(L, err)
		}
	}
	r.progress = newProgress(e, steps, r.step)
	e.progress = r.progress
	L.Push(newUserData(L, runType, r))
	return 1
}

// userValue reads an optional or required userdata option of type T.
func userValue[T any](L *lua.LState, o *opts, key, typ string, required bool) T {
	var zero T
	v := o.value(key)
	if v == lua.LNil {
		if required {
			L.RaiseError("%s: option %q (a %s) is required", o.what, key, typ)
		}
		return zero
	}
	if ud, ok := v.(*lua.LUserData); ok {
		if x, ok := ud.Value.(T); ok {
			return x
		}
	}
	L.RaiseError("%s: option %q must be a %s, got %s", o.what, key, typ, describe(v))
	return zero
}

func (r *run) create(dir string, opts checkpoint.Options, cfg any) error {
	cr, err := checkpoint.Create(dir, opts)
	if err != nil {
		return err
	}
	r.r = cr
	if recipe := r.env.opts.Recipe; recipe != "" {
		src, err := os.ReadFile(recipe)
		if err != nil {
			return err
		}
		if err := cr.WriteRecipe(src); err != nil {
			return err
		}
	}
	if cfg != nil {
		if err := cr.WriteConfig(cfg); err != nil {
			return err
		}
	}
	// The reference's identity: reloaded from the policy's source, so the recorded hash is
	// what that source reproduces on resume. A reference that is not its source's weights
	// (taken from a trained policy) is recorded as synced at step 0 and stored with the run.
	id, _, _, err := checkpoint.NewReference(r.policy.source.Path)
	if err != nil {
		return err
	}
	if r.ref != nil && r.ref.hash != id.Hash {
		if _, err := id.Sync(0, r.ref.m.ParamsHost()); err != nil {
			return err
		}
	}
	r.identity = id
	return nil
}

func (r *run) resume(L *lua.LState, dir string) error {
	cr, err := checkpoint.Open(dir)
	if err != nil {
		return err
	}
	st, err := cr.Latest()
	if err != nil {
		return fmt.Errorf("resume %s: %w", dir, err)
	}
	r.r = cr
	if err := r.apply(st, true); err != nil {
		return err
	}
	r.resumed = true
	r.recipe = st.Recipe
	fmt.Fprintf(r.env.out, "resumed %s at step %d (reference %s, hash %s)\n", dir, st.Step, st.Reference.Source, short(st.Reference.Current()))
	return nil
}

// apply loads a checkpoint into the live objects. On resume the optimizer's settings come
// back too; on a rollback they stay as the recipe's recovery policy left them.
func (r *run) apply(st *checkpoint.State, resume bool) error {
	if err := st.Apply(r.policy.m, r.opt.o); err != nil {
		return err
	}
	if resume {
		r.opt.o.Config = st.Optimizer.Config
	}
	var draws uint64
	if err := st.GetRNG("policy.draws", &draws); err != nil {
		return err
	}
	r.policy.draws = draws
	if r.data != nil {
		if len(st.Cursor) == 0 || string(st.Cursor) == "null" {
			return fmt.Errorf("checkpoint %s has no data cursor, but the run has a data source", st.Name)
		}
		var c = r.data.src.Cursor()
		if err := json.Unmarshal(st.Cursor, &c); err != nil {
			return fmt.Errorf("checkpoint %s: data cursor: %w", st.Name, err)
		}
		if err := r.data.src.Restore(c); err != nil {
			return err
		}
	}
	r.identity = st.Reference
	if r.ref != nil {
		cfg, params, err := st.LoadReference()
		if err != nil {
			return err
		}
		if cfg != r.ref.m.Config {
			return fmt.Errorf("checkpoint %s: the reference's architecture differs from the run's", st.Name)
		}
		if err := r.ref.m.SetParams(params); err != nil {
			return err
		}
		r.ref.hash = st.Reference.Current()
	}
	r.policy.hash = st.ParamsHash
	r.step = st.Step
	return nil
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

var runMethods = map[string]lua.LGFunction{
	"log":            runLog,
	"save":           runSave,
	"state":          runState,
	"rollback":       runRollback,
	"sync_reference": runSyncReference,
	"report":         runReport,
	"metrics":        runMetrics,
}

// Fields: run.step (steps completed), run.resumed, run.dir.
func runIndex(L *lua.LState) int {
	r := checkRun(L, 1)
	switch L.CheckString(2) {
	case "step":
		L.Push(lua.LNumber(r.step))
	case "resumed":
		L.Push(lua.LBool(r.resumed))
	case "dir":
		L.Push(lua.LString(r.r.Dir))
	default:
		L.Push(lua.LNil)
	}
	return 1
}

// metricsArg reads a table of numbers (booleans become 1/0); other values are ignored.
func metricsArg(L *lua.LState, n int) map[string]float64 {
	out := map[string]float64{}
	L.CheckTable(n).ForEach(func(k, v lua.LValue) {
		switch x := v.(type) {
		case lua.LNumber:
			out[k.String()] = float64(x)
		case lua.LBool:
			out[k.String()] = boolNum(bool(x))
		}
	})
	return out
}

// run:log(step, metrics [, prefix]) appends the metrics (numbers; booleans as 0/1) to
// metrics.jsonl, names prefixed with prefix.."/" if given (e.g. "eval"), and updates the
// progress line. The run's step becomes step.
func runLog(L *lua.LState) int {
	r := checkRun(L, 1)
	step := L.CheckInt(2)
	m := metricsArg(L, 3)
	if prefix := L.OptString(4, ""); prefix != "" {
		pm := make(map[string]float64, len(m))
		for k, v := range m {
			pm[prefix+"/"+k] = v
		}
		m = pm
	}
	if err := r.r.AppendMetrics(step, m); err != nil {
		L.RaiseError("%s", err.Error())
	}
	r.step = max(r.step, step)
	if L.OptString(4, "") == "" {
		r.progress.update(step, m)
	}
	return 0
}

// run:save(step [, {state=, metrics=}]) writes a checkpoint (atomically) and returns its
// name: policy, optimizer, data cursor, sampling counters, reference identity, the recipe's
// state table (numbers, strings, booleans, nested tables) and metrics (for best-by-metric).
func runSave(L *lua.LState) int {
	r := checkRun(L, 1)
	step := L.CheckInt(2)
	o := optsArg(L, 3, "run:save")
	stateV := o.value("state")
	metricsV := o.value("metrics")
	o.done()
	st := checkpoint.NewState(step, r.policy.m, r.opt.o)
	st.Reference = r.identity
	if r.identity.Synced() && r.ref != nil {
		st.ReferenceParams = r.ref.m.ParamsHost()
	}
	if err := st.SetRNG("policy.draws", r.policy.draws); err != nil {
		L.RaiseError("%s", err.Error())
	}
	if r.data != nil {
		b, err := json.Marshal(r.data.src.Cursor())
		if err != nil {
			L.RaiseError("%s", err.Error())
		}
		st.Cursor = b
	}
	if stateV != lua.LNil {
		g, err := toGo(stateV)
		if err != nil {
			L.RaiseError("run:save: state: %s", err.Error())
		}
		if st.Recipe, err = json.Marshal(g); err != nil {
			L.RaiseError("run:save: state: %s", err.Error())
		}
	}
	if t, ok := metricsV.(*lua.LTable); ok {
		L.Push(t)
		st.Metrics = metricsArg(L, L.GetTop())
		L.Pop(1)
	}
	name, err := r.r.Save(st)
	if err != nil {
		return pushErr(L, err)
	}
	r.step = step
	r.progress.note(fmt.Sprintf("saved %s", name))
	L.Push(lua.LString(name))
	return 1
}

// run:state() → the recipe state saved with the checkpoint the run resumed from ({} for a
// new run).
func runState(L *lua.LState) int {
	r := checkRun(L, 1)
	if len(r.recipe) == 0 || string(r.recipe) == "null" {
		L.Push(L.NewTable())
		return 1
	}
	var v any
	if err := json.Unmarshal(r.recipe, &v); err != nil {
		L.RaiseError("run:state: %s", err.Error())
	}
	L.Push(fromGo(L, v))
	return 1
}

// run:rollback() restores the last checkpoint into the policy, optimizer moments, data
// cursor and reference (the learning rate stays as the recovery policy set it) and returns
// its step; nil, err when there is no checkpoint to go back to.
func runRollback(L *lua.LState) int {
	r := checkRun(L, 1)
	st, err := r.r.Latest()
	if errors.Is(err, checkpoint.ErrNoCheckpoint) {
		return pushErr(L, fmt.Errorf("rollback: no checkpoint saved yet in %s", r.r.Dir))
	}
	if err != nil {
		return pushErr(L, err)
	}
	if err := r.apply(st, false); err != nil {
		return pushErr(L, err)
	}
	r.progress.note(fmt.Sprintf("rolled back to %s", st.Name))
	L.Push(lua.LNumber(st.Step))
	return 1
}

// run:sync_reference(step) makes the reference a copy of the policy — the only way it ever
// changes — records the sync (step, hash, time) in the run's identity and the next
// checkpoint, and returns the new hash.
func runSyncReference(L *lua.LState) int {
	r := checkRun(L, 1)
	step := L.CheckInt(2)
	if r.ref == nil {
		L.RaiseError("run:sync_reference: the run has no reference")
	}
	params := r.policy.m.ParamsHost()
	if err := r.ref.m.SetParams(params); err != nil {
		L.RaiseError("%s", err.Error())
	}
	h, err := r.identity.Sync(step, params)
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
	r.ref.hash = h
	r.ref.syncs = append(r.ref.syncs, syncRecord{Step: step, Hash: h})
	r.progress.note(fmt.Sprintf("reference synced to the policy at step %d (%s)", step, short(h)))
	L.Push(lua.LString(h))
	return 1
}

// run:report(text) writes report.txt in the run directory (why a run stopped) and prints it.
func runReport(L *lua.LState) int {
	r := checkRun(L, 1)
	text := L.CheckString(2)
	path := filepath.Join(r.r.Dir, "report.txt")
	stamp := time.Now().Format(time.RFC3339)
	if err := os.WriteFile(path, []byte(stamp+"\n"+text+"\n"), 0o644); err != nil {
		return pushErr(L, err)
	}
	r.progress.finish()
	fmt.Fprintln(r.env.out, text)
	L.Push(lua.LString(path))
	return 1
}

// run:metrics() → every logged record (a list of tables), skipping a torn last line.
func runMetrics(L *lua.LState) int {
	r := checkRun(L, 1)
	recs, _, err := r.r.ReadMetrics()
	if err != nil {
		return pushErr(L, err)
	}
	out := make([]any, len(recs))
	for i, rec := range recs {
		out[i] = rec
	}
	L.Push(fromGo(L, out))
	return 1
}
