package checkpoint

import (
	"github.com/rookscript/rookscript/engine/atomicfile"

	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/safetensors"
)

// saveHook, when set, runs at each stage of Save: the crash test kills its process there.
var saveHook func(stage string)

func hook(stage string) {
	if saveHook != nil {
		saveHook(stage)
	}
}

// Save writes st as checkpoint step-N (N = st.Step) and makes it LATEST, then updates BEST and
// prunes. It refuses an invalid state before writing anything: wrong sizes, non-finite
// weights or moments, a missing reference identity, a reference whose weights do not match
// its identity. A checkpoint of the same step is replaced. On success st.Name, st.Time and
// st.ParamsHash are set; if only BEST or pruning failed, the name is returned with the error.
func (r *Run) Save(st *State) (string, error) {
	if st == nil {
		return "", errors.New("checkpoint: Save(nil)")
	}
	name := stepName(st.Step)
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("saving checkpoint %s in %s: %w", name, r.Dir, err)
	}
	if err := r.writable("saving"); err != nil {
		return fail(err)
	}
	policyHash, err := st.validate()
	if err != nil {
		return fail(err)
	}
	if m := r.opts.BestMetric; m != "" && len(st.Metrics) > 0 {
		if _, ok := st.Metrics[m]; !ok {
			return fail(fmt.Errorf("best metric %q is not among the state's metrics", m))
		}
	}
	config := st.Config
	if config == nil {
		config = r.config
	}
	// Everything logged up to this step is durable before a checkpoint claims the step, and
	// the checkpoint records how much that was (RewindMetrics).
	metricsBytes, err := syncIfExists(r.metricsPath())
	if err != nil {
		return fail(err)
	}

	dir := r.path()
	tmp, err := os.MkdirTemp(dir, ".tmp-"+name+"-")
	if err != nil {
		return fail(err)
	}
	placed := false
	defer func() {
		if !placed {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp makes it private
		return fail(err)
	}
	hook("tmp")
	if err := gpt2.SaveHF(filepath.Join(tmp, "model"), st.Model, st.Params); err != nil {
		return fail(err)
	}
	hook("model")
	total := gpt2.NewLayout(st.Model).Total
	opt := []safetensors.Tensor{
		safetensors.F32("m", []int{total}, st.Optimizer.M),
		safetensors.F32("v", []int{total}, st.Optimizer.V),
		i64Scalar("steps", int64(st.Optimizer.Steps)),
	}
	if err := safetensors.Write(filepath.Join(tmp, "optimizer.safetensors"), opt, map[string]string{"optimizer": "adamw"}); err != nil {
		return fail(err)
	}
	hook("optimizer")
	dirs := []string{filepath.Join(tmp, "model")}
	if st.Reference.Synced() {
		if err := gpt2.SaveHF(filepath.Join(tmp, "reference"), st.Reference.Config, st.ReferenceParams); err != nil {
			return fail(err)
		}
		dirs = append(dirs, filepath.Join(tmp, "reference"))
		hook("reference")
	}

	fs := &fileState{Step: st.Step, Time: time.Now().UTC(), Model: toFileConfig(st.Model), ParamsHash: policyHash,
		Optimizer: toFileOptimizer(st.Optimizer), RNG: st.RNG, Cursor: st.Cursor, Recipe: st.Recipe, Config: config, Kernels: st.Kernels,
		Reference: toFileIdentity(st.Reference), Metrics: metricMap(st.Metrics), MetricsBytes: &metricsBytes,
		Retention: fileRetention{KeepLast: r.opts.KeepLast, BestMetric: r.opts.BestMetric, BestMode: r.opts.BestMode},
		Files:     map[string]fileEntry{}}
	if fs.RNG == nil {
		fs.RNG = map[string]json.RawMessage{}
	}
	if fs.Metrics == nil {
		fs.Metrics = metricMap{}
	}
	for _, f := range checkpointFiles(st.Reference.Synced()) {
		e, err := hashFile(filepath.Join(tmp, filepath.FromSlash(f)))
		if err != nil {
			return fail(err)
		}
		fs.Files[f] = e
	}
	data, err := encodeState(fs)
	if err != nil {
		return fail(fmt.Errorf("state.json: %w", err))
	}
	if err := writeSynced(filepath.Join(tmp, "state.json"), data); err != nil {
		return fail(err)
	}
	hook("state")
	for _, d := range append(dirs, tmp) {
		if err := atomicfile.SyncDir(d); err != nil {
			return fail(err)
		}
	}

	replaced, err := r.moveAside(name)
	if err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, r.path(name)); err != nil {
		return fail(err)
	}
	placed = true
	if err := atomicfile.SyncDir(dir); err != nil {
		return fail(err)
	}
	hook("renamed")
	if err := atomicfile.WriteBytes(r.path("LATEST"), []byte(name+"\n")); err != nil {
		return fail(err)
	}
	st.Name, st.Time, st.ParamsHash, st.MetricsBytes = name, fs.Time, policyHash, metricsBytes
	hook("latest")
	if err := r.updateBest(name, st.Metrics, replaced); err != nil {
		return name, fmt.Errorf("saved checkpoint %s in %s, but updating BEST failed: %w", name, r.Dir, err)
	}
	hook("best")
	if err := r.prune(name); err != nil {
		return name, fmt.Errorf("saved checkpoint %s in %s, but pruning failed: %w", name, r.Dir, err)
	}
	hook("pruned")
	return name, nil
}

// checkpointFiles lists the files a checkpoint's manifest covers.
func checkpointFiles(synced bool) []string {
	f := []string{"model/config.json", "model/model.safetensors", "optimizer.safetensors"}
	if synced {
		f = append(f, "reference/config.json", "reference/model.safetensors")
	}
	return f
}

func i64Scalar(name string, v int64) safetensors.Tensor {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, uint64(v))
	return safetensors.Tensor{Name: name, DType: "I64", Shape: []int{}, Data: b}
}

// syncIfExists fsyncs a file that may not exist and returns its size (0 if it does not).
func syncIfExists(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// tempName is a fresh name for a directory to be removed (".tmp-" prefixed, so the loader
// ignores it and the next save removes it if this one cannot).
func (r *Run) tempName(what, name string) string {
	return r.path(".tmp-" + what + "-" + name + "-" + strings.ToLower(rand.Text()[:10]))
}

// moveAside moves an existing checkpoint called name out of the way of its replacement.
// While it is out of place LATEST must not name it: if it does, LATEST is first pointed at
// the newest other checkpoint, so a crash in between still leaves a loadable LATEST (when the
// run has no other checkpoint there is nothing to point at). Every step-N directory is
// complete, since only finished ones are renamed into place and pruning renames away first.
func (r *Run) moveAside(name string) (bool, error) {
	if _, err := os.Lstat(r.path(name)); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if latest, err := r.latestName(); err == nil && latest == name {
		names, err := r.List()
		if err != nil {
			return false, err
		}
		for i := len(names) - 1; i >= 0; i-- {
			if names[i] != name {
				if err := atomicfile.WriteBytes(r.path("LATEST"), []byte(names[i]+"\n")); err != nil {
					return false, err
				}
				break
			}
		}
	}
	hook("repointed")
	if err := os.Rename(r.path(name), r.tempName("replaced", name)); err != nil {
		return false, err
	}
	hook("aside")
	return true, nil
}

// better reports whether a beats b under mode.
func better(mode string, a, b float64) bool {
	if mode == "min" {
		return a < b
	}
	return a > b
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// updateBest points BEST at name if its metric beats the current best's. When name replaced
// the checkpoint BEST named, the old value is gone and every checkpoint is compared again.
func (r *Run) updateBest(name string, metrics map[string]float64, replaced bool) error {
	metric, mode := r.opts.BestMetric, r.opts.BestMode
	if metric == "" {
		return nil
	}
	cur, err := r.Best()
	if err != nil {
		cur = "" // an unreadable BEST names nothing; it is overwritten below
	}
	if replaced && cur == name {
		return r.rescanBest()
	}
	v, ok := metrics[metric]
	if !ok || !finite(v) {
		return nil
	}
	if cur != "" && cur != name {
		if fs, err := r.readState(cur); err == nil {
			if cv, ok := fs.Metrics[metric]; ok && finite(cv) && !better(mode, v, cv) {
				return nil
			}
		}
	}
	return atomicfile.WriteBytes(r.path("BEST"), []byte(name+"\n"))
}

// rescanBest points BEST at the best of all checkpoints (the earliest on ties), or removes it.
func (r *Run) rescanBest() error {
	names, err := r.List()
	if err != nil {
		return err
	}
	best, bestV := "", 0.0
	for _, n := range names {
		fs, err := r.readState(n)
		if err != nil {
			continue
		}
		if v, ok := fs.Metrics[r.opts.BestMetric]; ok && finite(v) && (best == "" || better(r.opts.BestMode, v, bestV)) {
			best, bestV = n, v
		}
	}
	if best == "" {
		if err := os.Remove(r.path("BEST")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return atomicfile.SyncDir(r.path())
	}
	return atomicfile.WriteBytes(r.path("BEST"), []byte(best+"\n"))
}

// prune removes checkpoints beyond the newest KeepLast, never the one LATEST (latest) or BEST
// names, and the leftovers of interrupted saves. A checkpoint is renamed away before it is
// deleted, so a crash mid-delete leaves no half checkpoint under a step-N name.
func (r *Run) prune(latest string) error {
	names, err := r.List()
	if err != nil {
		return err
	}
	keep := map[string]bool{latest: true}
	if b, err := r.Best(); err == nil && b != "" {
		keep[b] = true
	}
	if k := r.opts.KeepLast; k < 0 {
		return r.sweepTemp()
	} else if len(names) > k {
		for _, n := range names[len(names)-k:] {
			keep[n] = true
		}
	} else {
		for _, n := range names {
			keep[n] = true
		}
	}
	for _, n := range names {
		if keep[n] {
			continue
		}
		gone := r.tempName("pruned", n)
		if err := os.Rename(r.path(n), gone); err != nil {
			return err
		}
		if err := os.RemoveAll(gone); err != nil {
			return err
		}
	}
	return r.sweepTemp()
}

// sweepTemp removes what interrupted saves, replacements and prunes left behind.
func (r *Run) sweepTemp() error {
	entries, err := os.ReadDir(r.path())
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			if err := os.RemoveAll(r.path(e.Name())); err != nil {
				return err
			}
		}
	}
	return atomicfile.SyncDir(r.path())
}
