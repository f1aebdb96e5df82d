package luabind

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/checkpoint"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/optim"
)

const runType = "rook.run"

// run is a training run on disk: metrics log, checkpoints, the reference's identity. It holds
// its directory's lock from rook.run until run:close() or the end of the environment.
type run struct {
	env        *Env
	r          *checkpoint.Run
	policy     *model
	ref        *model         // nil until the recipe gives one or asks for run.ref
	refUD      *lua.LUserData // ref as Lua sees it, so that run.ref == ref
	opt        *adam
	optBase    optim.AdamWConfig // the optimizer's settings as the recipe built them
	data       *positions
	identity   checkpoint.Identity
	step       int // steps completed: the step of the policy's weights
	steps      int // the planned number of steps (progress line, run:save_due)
	saveEvery  int
	resumed    bool
	recipe     json.RawMessage    // the recipe state of the checkpoint resumed from
	state      *lua.LTable        // run:state(), the live table every run:save records
	logged     map[string]float64 // the metrics run:log gave at step loggedStep (run:save's default)
	loggedStep int
	progress   *progress
	saveErr    error  // why the last save failed; nil after a save that succeeded
	stopped    string // the recovery policy's report, when it stopped the run
	closed     bool

	samples    int // completions per step run:log writes to samples.jsonl
	printEvery int // print one of them every this many steps (0: never)
	noSignal   int // steps in a row without reward signal
	summary    runSummary
	tb         *tensorboard // nil with tensorboard = false, and on ranks other than 0
}

func (r *run) String() string {
	var extra string
	if r.resumed {
		extra += ", resumed"
	}
	if r.closed {
		extra += ", closed"
	}
	return fmt.Sprintf("rook.run(%s, step %d%s)", r.r.Dir, r.step, extra)
}

func checkRun(L *lua.LState, n int) *run { return check[*run](L, n, runType) }

// checkOpenRun is checkRun for the methods that write.
func checkOpenRun(L *lua.LState, n int) *run {
	r := checkRun(L, n)
	if r.closed {
		L.ArgError(n, fmt.Sprintf("run %s is closed", r.r.Dir))
	}
	return r
}

// rook.run{dir=, policy=, ref=, opt=, data=, steps=, save_every=, keep=3, best=,
// best_mode="max", resume=, config=, samples=4, print_sample_every=0, tensorboard=true} → run, or nil, err (the
// directory is another run's, or in use by another process, or its checkpoint does not load).
// config: the resolved config to record (the last rook.config's by default); steps and
// save_every: what run:save_due goes by. (Keys a resume may not change are rook.config's rule
// "fixed".)
//
// A new run takes the directory's lock and records the recipe, the resolved config and the
// reference's identity (its source and content hash). With resume (a run directory),
// everything comes back from its last checkpoint: policy weights, optimizer state, data
// cursor, sampling counters and the recipe state (run:state()); the reference is reloaded from
// its recorded source and its hash checked — never taken from the resumed policy (run.ref is
// it); the metrics logged after the checkpoint are taken out of metrics.jsonl, since the run
// logs those steps again. With tensorboard, the run also writes what it logs as TensorBoard
// event files in run_dir/tb (tensorboard.go).
func (e *Env) luaRun(L *lua.LState) int {
	o := runOptions{Keep: checkpoint.DefaultKeepLast, Samples: DefaultSamples, Tensorboard: true}
	options(L, 1, "rook.run", &o)
	if o.Best != "" && o.BestMode == "" {
		o.BestMode = "max"
	}
	if o.Policy == nil || o.Opt == nil {
		L.RaiseError("rook.run: options \"policy\" (a %s) and \"opt\" (a %s) are required", modelType, adamType)
	}
	dir, resume, steps := o.Dir, o.Resume, o.Steps
	var grants []func() // a confined recipe's access to the run, once it has opened
	for _, d := range []string{dir, resume} {
		grant, err := e.runDirGrant(d, grantRun)
		if err != nil {
			raiseConfigf(L, "rook.run: %s", err.Error())
		}
		grants = append(grants, grant)
	}
	r := &run{env: e, steps: steps, saveEvery: o.SaveEvery, policy: o.Policy, ref: o.Ref, opt: o.Opt, data: o.Data,
		samples: o.Samples, printEvery: o.PrintSampleEvery}
	if r.samples < 0 || r.printEvery < 0 {
		raiseConfigf(L, "rook.run: samples and print_sample_every must be ≥ 0")
	}
	if r.ref != nil {
		r.refUD = L.CheckTable(1).RawGetString("ref").(*lua.LUserData)
	}
	var cfg any = e.config
	if o.Config != nil {
		v, err := toGo(o.Config)
		if err != nil {
			L.RaiseError("rook.run: config: %s", err.Error())
		}
		cfg = v
	}
	if r.opt.model != r.policy {
		L.RaiseError("rook.run: opt is not the policy's optimizer")
	}
	if r.ref != nil && !r.ref.frozen {
		L.RaiseError("rook.run: ref must be a frozen reference (policy:reference())")
	}
	if o.SaveEvery < 0 || steps < 0 {
		L.RaiseError("rook.run: steps and save_every must be ≥ 0")
	}
	for _, m := range []*model{r.policy, r.ref} {
		if m != nil && m.run != nil {
			L.RaiseError("rook.run: this model already belongs to run %s (run:close() it first)", m.run.r.Dir)
		}
	}
	if resume != "" {
		if dir != "" && !sameDir(dir, resume) {
			raiseConfigf(L, "rook.run: dir %s and resume %s name different runs", dir, resume)
		}
		if err := r.resume(L, resume, cfg); err != nil {
			return pushErr(L, err)
		}
	} else {
		if dir == "" {
			L.RaiseError("rook.run: dir is required")
		}
		if err := r.create(dir, checkpoint.Options{KeepLast: o.Keep, BestMetric: o.Best, BestMode: o.BestMode}, cfg); err != nil {
			return pushErr(L, err)
		}
		e.announcePending() // the weights are the ones loaded
	}
	if o.Tensorboard && e.main() {
		// A new run's first record can be its step-0 evaluation; a resumed run logs again
		// from the step after its checkpoint.
		start := r.step
		if r.resumed {
			start = r.step + 1
		}
		tb, err := openTensorboard(r.r.Dir, start, readRunConfig(r.r.Dir), !r.resumed)
		if err != nil {
			r.r.Close()
			return pushErr(L, err)
		}
		r.tb = tb
	}
	for _, grant := range grants {
		grant()
	}
	r.policy.run = r
	if r.ref != nil {
		r.ref.run = r
	}
	e.runs = append(e.runs, r)
	e.addCloser(r)
	e.intr.mu.Lock()
	e.intr.writers++
	e.intr.runs = append(e.intr.runs, r)
	e.intr.mu.Unlock()
	r.progress = newProgress(e, steps, r.step)
	e.progress = r.progress
	r.summary.start(r.step)
	L.Push(newUserData(L, runType, r))
	return 1
}

// Close releases the run directory's lock; the run writes nothing more.
func (r *run) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.printSummary()
	r.printSummaryMore()
	var tbErr error
	if r.tb != nil {
		tbErr = r.tb.Close()
	}
	for _, m := range []*model{r.policy, r.ref} {
		if m != nil && m.run == r {
			m.run = nil
		}
	}
	in := r.env.intr
	in.mu.Lock()
	in.writers--
	in.mu.Unlock()
	if err := r.r.Close(); err != nil {
		return err
	}
	return tbErr
}

// printSummaryMore ends the summary with the lines printSummary does not write: the command
// that shows the run's TensorBoard files, and the bad records its data source skipped.
func (r *run) printSummaryMore() {
	if r.env.opts.Quiet || r.r == nil || !r.env.main() {
		return
	}
	var b strings.Builder
	if r.tb != nil {
		fmt.Fprintf(&b, "  %-12s tensorboard --logdir %s\n", "tensorboard", r.r.Dir)
	}
	if r.data != nil {
		if sc, ok := r.data.src.(skipCounter); ok && sc.Skipped() > 0 {
			fmt.Fprintf(&b, "  %-12s %d bad records of %s skipped (skip_invalid)\n", "positions", sc.Skipped(), r.data.spec.Path)
		}
	}
	fmt.Fprint(r.env.out, b.String())
}

// runOptions are rook.run's options.
type runOptions struct {
	Dir       string      `json:"dir"`
	Resume    string      `json:"resume"`
	Policy    *model      `json:"policy"`
	Ref       *model      `json:"ref"`
	Opt       *adam       `json:"opt"`
	Data      *positions  `json:"data"`
	Steps     int         `json:"steps"`
	SaveEvery int         `json:"save_every"`
	Keep      int         `json:"keep"`
	Best      string      `json:"best"`
	BestMode  string      `json:"best_mode"`
	Config    *lua.LTable `json:"config"`

	Samples          int  `json:"samples"`
	PrintSampleEvery int  `json:"print_sample_every"`
	Tensorboard      bool `json:"tensorboard"`
}

// openOnEveryRank: once rank 0 has created or opened the run in dir for writing, every other
// rank opens it read-only, and all agree that each could (rank 0 closing its run otherwise).
func (r *run) openOnEveryRank(dir string) error {
	e := r.env
	if !e.main() {
		cr, err := checkpoint.OpenReadOnly(dir)
		if err == nil {
			r.r = cr
		}
		return e.agree(err)
	}
	if err := e.agree(nil); err != nil {
		r.r.Close()
		return err
	}
	return nil
}

// create starts a new run in dir. In a data-parallel run rank 0 creates the directory and
// writes it; the other ranks read it (a filesystem every rank sees), and write nothing.
func (r *run) create(dir string, opts checkpoint.Options, cfg any) error {
	e := r.env
	_, err := e.fromMain(func() ([]byte, error) {
		cr, err := checkpoint.Create(dir, opts)
		if err != nil {
			return nil, err
		}
		r.r = cr
		if err := r.writeRecords(cfg); err != nil {
			cr.Close()
			return nil, err
		}
		return nil, nil
	})
	if err != nil {
		return err
	}
	if err := r.openOnEveryRank(dir); err != nil {
		return err
	}
	id, err := r.startReference()
	if err := e.agree(err); err != nil {
		r.r.Close()
		return err
	}
	r.identity = id
	r.optBase = r.opt.o.Config
	return nil
}

// writeRecords writes the run's copies of its recipe and resolved config (rank 0).
func (r *run) writeRecords(cfg any) error {
	if err := r.writeRecipe(); err != nil {
		return err
	}
	if cfg != nil {
		return r.r.WriteConfig(cfg)
	}
	return nil
}

// startReference is the identity of a new run's KL reference (DESIGN §6.6), named by where
// its weights come from: the reference the recipe gave, by its own source, or without one the
// policy's source. The source is loaded again, so that the recorded hash is what it reproduces
// on resume. A reference that is not its source's weights (a copy of a trained policy) is
// recorded as synced at step 0 and stored with the run.
//
// A policy that no longer holds its source's weights (trained in this process before the run)
// and no reference: the source is then weights the policy does not start from, and a KL to
// them is nobody's choice. The identity records the policy's start (PolicyStart), the log says
// so, and run.ref refuses to stand in for the choice — which costs a recipe with β = 0
// nothing, and one with β > 0 a word: ref = policy:reference() or a loaded model's.
func (r *run) startReference() (checkpoint.Identity, error) {
	m := r.ref
	if m == nil {
		m = r.policy
	}
	id, _, _, err := checkpoint.NewReference(m.source.Path)
	if err != nil {
		return id, err
	}
	if id.Hash != m.sourceHash {
		return id, fmt.Errorf("reference model %s: its source now loads to weights of hash %s, not the %s it was loaded with: it changed since", id.Source, short(id.Hash), short(m.sourceHash))
	}
	if r.ref != nil {
		if r.ref.hash != id.Hash {
			_, err = id.Sync(0, r.ref.m.ParamsHost())
		}
		return id, err
	}
	if h := gpt2.ParamsHash(r.policy.m.Config, r.policy.m.ParamsHost()); h != id.Hash {
		id.PolicyStart = h
		if !r.env.opts.Quiet {
			r.env.say(fmt.Sprintf("note: rook.run was given no reference and the policy does not hold its source's weights (%s, hash %s) but weights trained before the run (hash %s): run.ref will not stand in for a KL reference; give rook.run ref = policy:reference() (the weights the run starts from) or a loaded model's reference",
				id.Source, short(id.Hash), short(h)))
		}
	}
	return id, nil
}

// writeRecipe stores a copy of the recipe being run.
func (r *run) writeRecipe() error {
	recipe := r.env.opts.Recipe
	if recipe == "" {
		return nil
	}
	src, err := os.ReadFile(recipe)
	if err != nil {
		return err
	}
	return r.r.WriteRecipe(src)
}

// resume continues the run in dir from its newest checkpoint. In a data-parallel run rank 0
// opens it for writing and names the checkpoint; every rank loads that one.
func (r *run) resume(L *lua.LState, dir string, cfg any) error {
	e := r.env
	name, err := e.fromMain(func() ([]byte, error) {
		cr, err := checkpoint.Open(dir)
		if err != nil {
			return nil, err
		}
		r.r = cr
		n, err := cr.LatestName()
		if err != nil {
			cr.Close()
			return nil, fmt.Errorf("resume %s: %w", dir, err)
		}
		return []byte(n), nil
	})
	if err != nil {
		return err
	}
	if err := r.openOnEveryRank(dir); err != nil {
		return err
	}
	if err := r.resumeFrom(string(name), cfg); err != nil {
		r.r.Close()
		return err
	}
	return nil
}

func (r *run) resumeFrom(name string, cfg any) error {
	cr, e := r.r, r.env
	st, err := cr.Load(name)
	if err != nil {
		err = fmt.Errorf("resume %s: %w", cr.Dir, err)
	} else {
		err = r.apply(st, true)
	}
	if err := e.agree(err); err != nil {
		return err
	}
	// What the run goes on with is recorded, and every later checkpoint carries it.
	if cfg == nil && st.Config != nil {
		cfg = st.Config
	}
	b, err := e.fromMain(func() ([]byte, error) {
		dropped, err := cr.RewindMetrics(st)
		if err != nil {
			return nil, fmt.Errorf("resume %s: %w", cr.Dir, err)
		}
		return []byte(fmt.Sprint(dropped)), r.writeRecords(cfg)
	})
	if err != nil {
		return err
	}
	dropped, _ := strconv.Atoi(string(b))
	r.resumed = true
	r.recipe = st.Recipe
	if e.resume != nil {
		e.resume.applied = true
	}
	r.policy.announce = "" // the line below says what the policy holds
	e.announcePending()
	id := st.Reference
	refKind := ""
	if id.Random {
		refKind = "RANDOM weights "
	}
	e.say(fmt.Sprintf("resumed %s at step %d: policy weights of %s (hash %s; the run started from %s), KL reference %s%s (hash %s%s)",
		cr.Dir, st.Step, st.Name, short(st.ParamsHash), r.policy.source.Path, refKind, id.Source, short(id.Current()), syncNote(id)))
	if dropped > 0 {
		e.say(fmt.Sprintf("resume: %d metrics records logged after %s moved to %s (those steps run again)", dropped, st.Name, checkpoint.DiscardedMetricsFile))
	}
	if note := kernelsNote(st.Kernels, kernels(r.policy.m.B), st.Name); note != "" {
		e.say(note)
	}
	return nil
}

// syncNote names the reference's history since its last copy of the policy: the copy's step,
// and each mix's step and alpha.
func syncNote(id checkpoint.Identity) string {
	var parts []string
	for _, s := range id.Syncs {
		if s.Alpha == 0 {
			parts = []string{fmt.Sprintf("synced to the policy at step %d", s.Step)}
		} else {
			parts = append(parts, fmt.Sprintf("mixed with the policy at step %d (alpha %g)", s.Step, s.Alpha))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return ", " + strings.Join(parts, ", then ")
}

// mixParams is (1−alpha)·ref + alpha·policy, elementwise in float32, TRL's order:
// ref.mul_(1 − alpha).add_(policy, alpha=alpha).
func mixParams(ref, policy []float32, alpha float64) []float32 {
	out := make([]float32, len(ref))
	keep, take := float32(1-alpha), float32(alpha)
	for i := range out {
		out[i] = float32(ref[i]*keep) + float32(policy[i]*take) // each product rounded: no fused multiply-add
	}
	return out
}

// apply loads a checkpoint into the live objects. On a rollback the optimizer keeps its
// settings (the learning rate as the recovery policy left it). On resume they come from the
// checkpoint, except those the recipe now builds differently from how the run built them:
// a config changed on the command line (resumeOptimizer).
func (r *run) apply(st *checkpoint.State, resume bool) error {
	built := r.opt.o.Config
	if err := st.Apply(r.policy.m, r.opt.o); err != nil {
		return err
	}
	if resume {
		cfg, changed := resumeOptimizer(built, st.Optimizer.Base, st.Optimizer.Config)
		r.opt.o.Config, r.optBase = cfg, built
		for _, c := range changed {
			r.env.say("resume: optimizer " + c)
		}
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
	if id := st.Reference; r.ref != nil && id.PolicyStart != "" && !id.Synced() {
		return fmt.Errorf("checkpoint %s: the run was given no reference and its policy started from weights trained before it (hash %s), not from its source %s: the reference given now would hold the source's weights, which the policy never started from; resume without ref and choose with run:sync_reference, or start a new run with the reference you mean",
			st.Name, short(id.PolicyStart), id.Source)
	}
	if r.ref != nil {
		cfg, params, err := st.LoadReference()
		if err != nil {
			return err
		}
		if cfg != r.ref.m.Config {
			return fmt.Errorf("checkpoint %s: the reference's architecture differs from the run's", st.Name)
		}
		if err := r.ref.setParams(params, st.Reference.Current()); err != nil {
			return err
		}
		r.ref.source, r.ref.sourceHash = referenceSource(st.Reference), st.Reference.Hash
	}
	r.step = st.Step
	return nil
}

// resumeOptimizer merges the optimizer settings on resume. saved are the checkpoint's, base
// those the run's recipe built the optimizer with (zero if not recorded), built those the
// recipe built now. A setting built as before comes back as saved (a recovery policy's lower
// learning rate included); one built differently was changed by the user and is taken — the
// learning rate scaled by what the run had done to it since it was built. Returns what changed.
func resumeOptimizer(built, base, saved optim.AdamWConfig) (optim.AdamWConfig, []string) {
	if base == (optim.AdamWConfig{}) {
		base = saved
	}
	out := saved
	var changed []string
	num := func(name string, b, bs float64, o *float64) {
		if b != bs {
			changed = append(changed, fmt.Sprintf("%s %g → %g (the config's)", name, *o, b))
			*o = b
		}
	}
	if built.LR != base.LR {
		lr := built.LR
		if base.LR > 0 && saved.LR != base.LR {
			lr = built.LR * saved.LR / base.LR
			changed = append(changed, fmt.Sprintf("lr %g → %g (the config's %g × %g, the factor the run had applied)", saved.LR, lr, built.LR, saved.LR/base.LR))
		} else {
			changed = append(changed, fmt.Sprintf("lr %g → %g (the config's)", saved.LR, lr))
		}
		out.LR = lr
	}
	num("beta1", built.Beta1, base.Beta1, &out.Beta1)
	num("beta2", built.Beta2, base.Beta2, &out.Beta2)
	num("eps", built.Eps, base.Eps, &out.Eps)
	num("weight_decay", built.WeightDecay, base.WeightDecay, &out.WeightDecay)
	if built.DecayAll != base.DecayAll {
		changed = append(changed, fmt.Sprintf("decay_all %v → %v (the config's)", out.DecayAll, built.DecayAll))
		out.DecayAll = built.DecayAll
	}
	return out, changed
}

// kernels names what decides a backend's bits (its Describe, else its name), as a checkpoint
// records it.
func kernels(b backend.Backend) string {
	if d, ok := b.(interface{ Describe() string }); ok {
		return d.Describe()
	}
	return b.Name()
}

// kernelsNote is what a resume says when the checkpoint was written on other kernels than this
// process runs: the run goes on, but from here its sums round as these kernels round them, so
// it is not the run that would have continued there (DESIGN §6.7). Nothing when they match
// or the checkpoint predates the record.
func kernelsNote(recorded, now, name string) string {
	if recorded == "" || recorded == now {
		return ""
	}
	return fmt.Sprintf("resume: %s was written on %s, and this process runs %s: the run goes on, but not bit for bit as it would have there", name, recorded, now)
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
	"save_due":       runSaveDue,
	"state":          runState,
	"rollback":       runRollback,
	"sync_reference": runSyncReference,
	"report":         runReport,
	"stop":           runStop,
	"metrics":        runMetrics,
	"close":          runClose,
}

// Fields: run.step (steps completed: the step of the policy's weights), run.resumed,
// run.dir, run.ref (the KL reference the run recorded: after a resume, the original reloaded
// from its source, or the synced one from the checkpoint), run.interrupted (an interrupt asks
// the recipe to save and end), run.stopped (the recovery policy's report, or nil).
func runIndex(L *lua.LState) int {
	r := checkRun(L, 1)
	switch L.CheckString(2) {
	case "step":
		L.Push(lua.LNumber(r.step))
	case "resumed":
		L.Push(lua.LBool(r.resumed))
	case "dir":
		L.Push(lua.LString(r.r.Dir))
	case "ref":
		L.Push(r.reference(L))
	case "interrupted":
		L.Push(lua.LBool(r.env.intr.signal() != nil))
	case "stopped":
		if r.stopped == "" {
			L.Push(lua.LNil)
		} else {
			L.Push(lua.LString(r.stopped))
		}
	default:
		L.Push(lua.LNil)
	}
	return 1
}

// reference returns the run's KL reference, loading it the first time when the recipe gave
// none: from the checkpoint after a sync, else from the recorded source, its hash checked. It
// refuses a run given no reference whose policy was trained before it (Identity.PolicyStart)
// until a sync makes the choice.
func (r *run) reference(L *lua.LState) *lua.LUserData {
	if id := r.identity; r.refUD == nil && id.PolicyStart != "" && !id.Synced() {
		L.RaiseError("run.ref: run %s was given no reference, and its policy started from weights trained before the run (hash %s), not from its source %s (hash %s): a KL to the source measures the distance to weights the policy never started from. Choose: rook.run{…, ref = policy:reference()} before training (the weights the run starts from), or ref = rook.load(%q):reference() (the source's)",
			r.r.Dir, short(id.PolicyStart), id.Source, short(id.Hash), id.Source)
	}
	return r.loadReference(L)
}

// loadReference is reference without the refusal: what a sync replaces.
func (r *run) loadReference(L *lua.LState) *lua.LUserData {
	if r.refUD != nil {
		return r.refUD
	}
	id := r.identity
	var cfg gpt2.Config
	var params []float32
	var err error
	if id.Synced() {
		var st *checkpoint.State
		if st, err = r.r.Latest(); err == nil {
			cfg, params, err = st.LoadReference()
		}
	} else {
		cfg, params, err = checkpoint.LoadReference(id)
	}
	if err != nil {
		L.RaiseError("run.ref: %s", err.Error())
	}
	gm, err := gpt2.New(r.policy.m.B, cfg, params)
	if err != nil {
		L.RaiseError("run.ref: %s", err.Error())
	}
	r.ref = &model{m: gm, source: referenceSource(id), sourceHash: id.Hash, hash: id.Current(), frozen: true, device: r.policy.device}
	if !r.closed {
		r.ref.run = r
	}
	r.refUD = newUserData(L, modelType, r.ref)
	return r.refUD
}

// referenceSource is where a reference of identity id comes from, as a model's source.
func referenceSource(id checkpoint.Identity) gpt2.Source {
	return gpt2.Source{Kind: id.Kind, Path: id.Source, Random: id.Random}
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

// run:log(step, metrics [, prefix | batch]) appends the metrics (numbers; booleans as 0/1)
// to metrics.jsonl, names prefixed with prefix.."/" if given (e.g. "eval"), and updates the
// progress line. The run's step becomes step. Given the step's batch (after rook.grpo.step
// set its advantages), it also writes the run's samples of it to samples.jsonl and prints one
// every print_sample_every steps. A step without reward signal (metrics.no_signal_reason, set
// by rook.grpo.step) says why on its progress line; several in a row give a warning. The
// record and the samples also go to the run's TensorBoard file, with the same time.
func runLog(L *lua.LState) int {
	r := checkOpenRun(L, 1)
	step := L.CheckInt(2)
	m := metricsArg(L, 3)
	prefix := ""
	var b *batch
	switch v := L.Get(4).(type) {
	case lua.LString:
		prefix = string(v)
	case *lua.LUserData:
		b = checkBatch(L, 4)
	case *lua.LNilType:
	default:
		L.ArgError(4, "a metrics prefix (string) or the step's batch expected")
	}
	if b != nil {
		b.addNoSignal(m, L.CheckTable(3)) // no_signal/P, no_signal/A (signal.go)
	}
	if prefix != "" {
		pm := make(map[string]float64, len(m))
		for k, v := range m {
			pm[prefix+"/"+k] = v
		}
		m = pm
	}
	// To the millisecond, as metrics.jsonl writes it, so that TensorBoard has the same time.
	now := time.Now().Truncate(time.Millisecond)
	if r.env.main() {
		if err := r.r.AppendMetricsAt(step, now, m); err != nil {
			L.RaiseError("%s", err.Error())
		}
		if err := r.tensorboardLog(step, now, m, b); err != nil {
			L.RaiseError("run:log: %s", err.Error())
		}
	}
	r.step = max(r.step, step)
	if step != r.loggedStep || r.logged == nil {
		r.logged, r.loggedStep = map[string]float64{}, step
	}
	maps.Copy(r.logged, m)
	L.Push(L.Get(3))
	if prefix != "" {
		return 1
	}
	if err := r.sameWeights(step); err != nil {
		L.RaiseError("run:log(%d): %s", step, err.Error())
	}
	r.summary.logged(step, m)
	why := lua.LVAsString(L.CheckTable(3).RawGetString("no_signal_reason"))
	r.progress.update(step, m, why)
	r.warnNoSignal(why)
	if b != nil {
		if err := r.logSamples(step, b); err != nil {
			L.RaiseError("run:log: %s", err.Error())
		}
	}
	return 1
}

// run:save_due(step) → whether the recipe should save at step: every save_every steps, at
// the run's last step, and at once after an interrupt (run:save then ends the recipe).
func runSaveDue(L *lua.LState) int {
	r := checkOpenRun(L, 1)
	step := L.CheckInt(2)
	due := r.env.intr.signal() != nil || (r.saveEvery > 0 && step%r.saveEvery == 0) || (r.steps > 0 && step == r.steps)
	if c := r.env.world(); c.Size() > 1 {
		// A signal reaches the ranks at different moments: when one rank has seen it, every
		// rank saves and ends as it does. One collective, the same on every rank.
		v := []float64{boolNum(due), 0, 0}
		if s, ok := r.env.intr.signal().(syscall.Signal); ok {
			v[1], v[2] = 1, float64(s)
		}
		if err := c.SumF64(v); err != nil {
			L.RaiseError("run:save_due: %s", err.Error())
		}
		due = v[0] > 0
		if v[1] > 0 && r.env.intr.signal() == nil {
			r.env.Interrupt(syscall.Signal(int(v[2] / v[1])))
		}
	}
	L.Push(lua.LBool(due))
	return 1
}

// run:save(step [, {state=, metrics=}]) writes a checkpoint (atomically) and returns its
// name: policy, optimizer, data cursor, sampling counters, reference identity, the resolved
// config, the recipe's state table (numbers, strings, booleans, nested tables) and metrics
// (for best-by-metric). A save that fails raises an error naming the file and the cause, and
// the recipe's exit code is non-zero if no later save succeeds. After an interrupt the save
// ends the recipe (exit 130 or 143, with the command that resumes).
func runSave(L *lua.LState) int {
	r := checkOpenRun(L, 1)
	step := L.CheckInt(2)
	var o struct {
		State   lua.LValue  `json:"state"`
		Metrics *lua.LTable `json:"metrics"`
	}
	options(L, 3, "run:save", &o)
	stateV := o.State
	if t, ok := stateV.(*lua.LTable); ok {
		r.state = t // the live state from now on
	} else if stateV == nil || stateV == lua.LNil {
		stateV = r.liveState(L)
	}
	if step < r.step {
		L.ArgError(2, fmt.Sprintf("the run is at step %d: a checkpoint is labelled with the step of the weights it holds", r.step))
	}
	st := checkpoint.NewState(step, r.policy.m, r.opt.o)
	st.Optimizer.Base = r.optBase
	st.Kernels = kernels(r.policy.m.B)
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
	if stateV != nil && stateV != lua.LNil {
		g, err := toGo(stateV)
		if err != nil {
			L.RaiseError("run:save: state: %s", err.Error())
		}
		if st.Recipe, err = json.Marshal(g); err != nil {
			L.RaiseError("run:save: state: %s", err.Error())
		}
	}
	if t := o.Metrics; t != nil {
		L.Push(t)
		st.Metrics = metricsArg(L, L.GetTop())
		L.Pop(1)
	} else if _, ok := r.logged[r.r.Options().BestMetric]; ok && r.loggedStep == step {
		st.Metrics = maps.Clone(r.logged) // a step with the best metric: the best checkpoint's candidate
	}
	// Rank 0 writes the checkpoint; every rank learns how it went (name, warning or error).
	out, ferr := r.env.fromMain(func() ([]byte, error) {
		name, err := r.r.Save(st)
		if name == "" {
			return nil, err
		}
		warning := ""
		if err != nil {
			warning = err.Error()
		}
		return []byte(name + "\x00" + warning), nil
	})
	if ferr != nil {
		r.saveErr = ferr
		L.RaiseError("run:save(%d): %s", step, ferr.Error())
	}
	name, warning, _ := strings.Cut(string(out), "\x00")
	var err error
	if warning != "" {
		err = errors.New(warning)
	}
	r.saveErr = nil
	r.step = step
	if err != nil {
		// The checkpoint is complete and LATEST; only BEST or pruning failed.
		r.progress.note("warning: " + err.Error())
	} else {
		r.progress.note(fmt.Sprintf("saved %s", name))
	}
	if sig := r.env.intr.signal(); sig != nil {
		in := r.env.intr
		in.mu.Lock()
		in.saved = r
		in.mu.Unlock()
		r.progress.finish()
		L.RaiseError("%s: saved checkpoint %s, ending the run", signalName(sig), name)
	}
	L.Push(lua.LString(name))
	return 1
}

// run:state() → the run's state table: what the recipe keeps across a resume (evaluations,
// the recovery policy's counters). It starts as the state of the checkpoint the run resumed
// from ({} for a new run), is the same table at every call, and every run:save records it.
func runState(L *lua.LState) int {
	L.Push(checkRun(L, 1).liveState(L))
	return 1
}

func (r *run) liveState(L *lua.LState) *lua.LTable {
	if r.state != nil {
		return r.state
	}
	r.state = L.NewTable()
	if len(r.recipe) > 0 && string(r.recipe) != "null" {
		var v any
		if err := json.Unmarshal(r.recipe, &v); err != nil {
			L.RaiseError("run:state: %s", err.Error())
		}
		if t, ok := fromGo(L, v).(*lua.LTable); ok {
			r.state = t
		}
	}
	return r.state
}

// rook.run_state(dir) → state, step, checkpoint | nil, err: the recipe state the newest
// checkpoint of run directory dir recorded (run:save's state), read without the run's lock and
// without loading its weights — what an ablation collects from runs other processes made.
func (e *Env) luaRunState(L *lua.LState) int {
	dir := L.CheckString(1)
	e.mustPath(L, "read", dir)
	r, err := checkpoint.OpenReadOnly(dir)
	if err != nil {
		return pushErr(L, err)
	}
	defer r.Close()
	raw, step, name, err := r.RecordedState()
	if err != nil {
		return pushErr(L, err)
	}
	var v any = map[string]any{}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &v); err != nil {
			return pushErr(L, fmt.Errorf("checkpoint %s: recipe state: %w", name, err))
		}
	}
	L.Push(fromGo(L, v))
	L.Push(lua.LNumber(step))
	L.Push(lua.LString(name))
	return 3
}

// run:rollback() goes back to the last checkpoint and returns its step: the policy,
// optimizer moments and step count, data cursor, sampling counters and reference come back
// (the learning rate stays as the recovery policy set it), and so does the step — run.step is
// the checkpoint's, the recipe repeats the steps after it, and their first records move out
// of metrics.jsonl to metrics-discarded.jsonl. Raises an error when there is no checkpoint
// to go back to or it does not load.
func runRollback(L *lua.LState) int {
	r := checkOpenRun(L, 1)
	e := r.env
	// Rank 0 names the checkpoint; every rank goes back to it.
	nb, err := e.fromMain(func() ([]byte, error) {
		name, err := r.r.LatestName()
		if errors.Is(err, checkpoint.ErrNoCheckpoint) {
			return nil, fmt.Errorf("no checkpoint saved yet in %s: nothing to go back to", r.r.Dir)
		}
		return []byte(name), err
	})
	if err != nil {
		L.RaiseError("run:rollback: %s", err.Error())
	}
	st, err := r.r.Load(string(nb))
	if err == nil {
		err = r.apply(st, false)
	}
	if err := e.agree(err); err != nil {
		L.RaiseError("run:rollback to %s: %s", nb, err.Error())
	}
	r.logged = nil // the steps after the checkpoint run again
	b, err := e.fromMain(func() ([]byte, error) {
		dropped, err := r.r.RewindMetrics(st)
		return []byte(strconv.Itoa(dropped)), err
	})
	if err != nil {
		L.RaiseError("run:rollback to %s: %s", st.Name, err.Error())
	}
	dropped, _ := strconv.Atoi(string(b))
	if r.tb != nil {
		// The repeated steps are a new session: TensorBoard drops the values from the
		// step after the checkpoint on, as metrics.jsonl did.
		if err := r.tb.session(st.Step+1, time.Now()); err != nil {
			L.RaiseError("run:rollback to %s: %s", st.Name, err.Error())
		}
	}
	r.progress.note(fmt.Sprintf("rolled back to %s (%d later records moved to %s)", st.Name, dropped, checkpoint.DiscardedMetricsFile))
	L.Push(lua.LNumber(st.Step))
	return 1
}

// run:sync_reference(step [, alpha]) makes the reference a copy of the policy, or with alpha
// in (0, 1) the mix (1−alpha)·ref + alpha·policy (TRL's ref_model_mixup_alpha) — the only way
// a run's reference ever changes — records it (step, hash, time, alpha) in the run's identity
// and the next checkpoint, and returns the new hash.
func runSyncReference(L *lua.LState) int {
	r := checkOpenRun(L, 1)
	step := L.CheckInt(2)
	alpha := float64(L.OptNumber(3, 1))
	if !(alpha > 0 && alpha <= 1) {
		L.ArgError(3, fmt.Sprintf("alpha must be in (0, 1], got %g", alpha))
	}
	r.loadReference(L)
	params := r.policy.m.ParamsHost()
	if alpha < 1 {
		params = mixParams(r.ref.m.ParamsHost(), params, alpha)
	}
	id := r.identity
	h, err := id.Mix(step, alpha, params)
	if err == nil {
		err = r.ref.setParams(params, h)
	}
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
	r.identity = id
	r.ref.syncs = append(r.ref.syncs, syncRecord{Step: step, Hash: h})
	r.progress.note(fmt.Sprintf("reference%s (%s)", strings.TrimPrefix(syncNote(id), ","), short(h)))
	L.Push(lua.LString(h))
	return 1
}

// run:report(text) writes report.txt in the run directory and prints it.
func runReport(L *lua.LState) int {
	r := checkRun(L, 1)
	path, err := r.report(L.CheckString(2))
	if err != nil {
		return pushErr(L, err)
	}
	L.Push(lua.LString(path))
	return 1
}

func (r *run) report(text string) (string, error) {
	path := filepath.Join(r.r.Dir, "report.txt")
	stamp := time.Now().Format(time.RFC3339)
	_, err := r.env.fromMain(func() ([]byte, error) {
		return nil, os.WriteFile(path, []byte(stamp+"\n"+text+"\n"), 0o644)
	})
	if err != nil {
		return "", err
	}
	if r.env.main() {
		r.progress.finish()
		fmt.Fprintln(r.env.out, text)
	}
	return path, nil
}

// run:stop(report) records that the recovery policy stopped the run: report.txt is written
// and printed, and when the recipe ends its exit code is 3 (not 0: the run did not complete).
// The recipe goes on to whatever it does after its loop (a final evaluation).
func runStop(L *lua.LState) int {
	r := checkRun(L, 1)
	text := L.CheckString(2)
	path, err := r.report(text)
	if err != nil {
		L.RaiseError("run:stop: %s", err.Error())
	}
	r.stopped = text
	L.Push(lua.LString(path))
	return 1
}

// run:close() releases the run directory (another process may then resume it); the run
// writes nothing more. The environment closes its runs when it ends.
func runClose(L *lua.LState) int {
	if err := checkRun(L, 1).Close(); err != nil {
		L.RaiseError("run:close: %s", err.Error())
	}
	return 0
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

// sameDir reports whether two paths name the same directory (the same file when both exist).
func sameDir(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(fa, fb)
	}
	absA, errA := filepath.Abs(a)
	absB, errB := filepath.Abs(b)
	return errA == nil && errB == nil && absA == absB
}
