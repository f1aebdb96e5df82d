package checkpoint

import (
	"github.com/rookscript/rookscript/engine/atomicfile"

	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// ErrNoCheckpoint is returned (wrapped) by Latest when the run has not saved one yet.
var ErrNoCheckpoint = errors.New("no checkpoint")

// DefaultKeepLast is how many of the newest checkpoints a run keeps when its recipe does not
// say (and what Open assumes for a checkpoint that recorded no retention).
const DefaultKeepLast = 3

// Options configure a run directory's retention.
type Options struct {
	// KeepLast is how many of the newest checkpoints (by step) to keep besides the LATEST and
	// BEST ones, at least 1; a negative value keeps all. 0 is an error: it is what an unset
	// field or a mistyped "keep = 0" look like, and neither may silently mean a default.
	KeepLast int
	// BestMetric names the State.Metrics entry that picks the best checkpoint ("" keeps
	// none); BestMode is "min" or "max". A non-finite value never becomes best.
	BestMetric string
	BestMode   string
	// Resume lets Create open a directory that already holds checkpoints.
	Resume bool
}

func (o Options) normalize() (Options, error) {
	switch {
	case o.KeepLast == 0:
		return o, fmt.Errorf("checkpoint options: keep 0 checkpoints: keep at least 1 (the newest), or a negative count to keep all")
	case o.BestMetric == "" && o.BestMode != "":
		return o, fmt.Errorf("checkpoint options: best mode %q without a best metric", o.BestMode)
	case o.BestMetric != "" && o.BestMode != "min" && o.BestMode != "max":
		return o, fmt.Errorf("checkpoint options: best metric %q needs mode \"min\" or \"max\", got %q", o.BestMetric, o.BestMode)
	}
	return o, nil
}

// Run is a run directory. It is not safe for concurrent use. One process writes a run
// directory at a time: Create and Open take an exclusive lock on it (LockFile), which Close
// or the end of the process releases; OpenReadOnly reads without it.
type Run struct {
	Dir      string
	opts     Options
	config   json.RawMessage // the last WriteConfig, recorded in checkpoints
	lock     *os.File        // the writer's lock; nil when read-only or closed
	readOnly bool
}

// ErrReadOnly is returned (wrapped) by the writing methods of a run opened with OpenReadOnly
// or closed.
var ErrReadOnly = errors.New("run directory not open for writing")

// Create opens dir for a new run, creating it if needed, and locks it. A directory that
// already holds checkpoints is refused unless opts.Resume is set, so a new run cannot prune
// or shadow an old one by accident. A metrics.jsonl left by a run that never saved a
// checkpoint is moved to DiscardedMetricsFile: the new run's log starts empty.
func Create(dir string, opts Options) (*Run, error) {
	opts, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	if err := refuseForeign(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "checkpoints"), 0o755); err != nil {
		return nil, err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	r := &Run{Dir: dir, opts: opts, lock: lock}
	if err := r.create(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Preflight says, creating and locking nothing, whether Create (resume false) or Open (resume
// true) would refuse dir as it is now: a new run in a directory that holds checkpoints, a
// resume of a directory that is not a run, a run another process writes. A recipe calls it
// before its expensive work (loading the model, building the default one), so that the
// refusal comes first; Create and Open still decide, under the lock.
func Preflight(dir string, resume bool) error {
	if resume {
		r, err := OpenReadOnly(dir)
		if err != nil {
			return err
		}
		r.Close()
		return probeLock(dir)
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	// As Create decides: a folder that is not a run, another writer (it takes the lock), then
	// the checkpoints.
	if err := refuseForeign(dir); err != nil {
		return err
	}
	if err := probeLock(dir); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "checkpoints")); err == nil {
		return (&Run{Dir: dir}).refuseCheckpoints()
	}
	return nil
}

// runMarkers are the entries that make a directory a run's (Create makes the first two).
var runMarkers = []string{"checkpoints", LockFile, "metrics.jsonl"}

// IsRun reports whether dir holds a run: one of runMarkers.
func IsRun(dir string) bool {
	for _, m := range runMarkers {
		if _, err := os.Lstat(filepath.Join(dir, m)); err == nil {
			return true
		}
	}
	return false
}

// refuseForeign refuses a directory that exists, is not empty and is not a run: a new run
// writes config.json, recipe.lua and metrics.jsonl into its directory, and a model folder or
// the working directory must never have those overwritten.
func refuseForeign(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) || len(entries) == 0 {
		return nil
	}
	if err != nil {
		return err
	}
	var found []string
	for _, e := range entries {
		for _, m := range runMarkers {
			if e.Name() == m {
				return nil
			}
		}
		if len(found) < 5 {
			found = append(found, e.Name())
		}
	}
	return &NotRunError{Dir: dir, Holds: found, More: len(entries) - len(found)}
}

// refuseCheckpoints is the error of a new run in a directory whose checkpoints/ holds any.
func (r *Run) refuseCheckpoints() error {
	names, err := r.List()
	if err != nil {
		return err
	}
	if _, lerr := os.Stat(r.path("LATEST")); len(names) > 0 || lerr == nil {
		return fmt.Errorf("%s already holds checkpoints (%s): resume it or choose another directory", r.Dir, strings.Join(names, ", "))
	}
	return nil
}

func (r *Run) create() error {
	if !r.opts.Resume {
		if err := r.refuseCheckpoints(); err != nil {
			return err
		}
		if _, err := r.discardMetricsFrom(0); err != nil {
			return err
		}
		return r.rewindSamples(-1)
	}
	return r.endTornMetricsLine()
}

// Open opens an existing run directory for resume and locks it, with the retention options
// its newest checkpoint recorded (DefaultKeepLast and no best metric if it has none).
func Open(dir string) (*Run, error) {
	r, err := OpenReadOnly(dir)
	if err != nil {
		return nil, err
	}
	if r.lock, err = lockDir(dir); err != nil {
		return nil, err
	}
	r.readOnly = false
	if err := r.endTornMetricsLine(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// OpenReadOnly opens a run directory to read its checkpoints and metrics without the
// writer's lock (an evaluation, a plot, a check while the run goes on). Its writing methods
// return ErrReadOnly.
func OpenReadOnly(dir string) (*Run, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s does not exist", dir)
	}
	if fi, err := os.Stat(filepath.Join(dir, "checkpoints")); err != nil || !fi.IsDir() {
		return nil, &NotRunError{Dir: dir}
	}
	r := &Run{Dir: dir, opts: Options{KeepLast: DefaultKeepLast, Resume: true}, readOnly: true}
	// A LATEST that cannot be read is Latest's error to report, not Open's.
	if name, err := r.latestName(); err == nil {
		if fs, err := r.readState(name); err == nil {
			o := Options{KeepLast: fs.Retention.KeepLast, BestMetric: fs.Retention.BestMetric, BestMode: fs.Retention.BestMode, Resume: true}
			if o, err := o.normalize(); err == nil {
				r.opts = o
			}
		}
	}
	return r, nil
}

// Close releases the writer's lock; the run cannot write any more. Closing twice is a no-op.
func (r *Run) Close() error {
	r.readOnly = true
	if r.lock == nil {
		return nil
	}
	err := r.lock.Close()
	r.lock = nil
	return err
}

// writable reports ErrReadOnly for a run that may not write.
func (r *Run) writable(what string) error {
	if r.readOnly || r.lock == nil {
		return fmt.Errorf("%s in %s: %w (opened read-only, or closed)", what, r.Dir, ErrReadOnly)
	}
	return nil
}

// Options returns the run's retention options.
func (r *Run) Options() Options { return r.opts }

func (r *Run) path(elem ...string) string {
	return filepath.Join(append([]string{r.Dir, "checkpoints"}, elem...)...)
}

// WriteRecipe stores a copy of the recipe source as recipe.lua.
func (r *Run) WriteRecipe(src []byte) error {
	if err := r.writable("writing recipe.lua"); err != nil {
		return err
	}
	return atomicfile.WriteBytes(filepath.Join(r.Dir, "recipe.lua"), src)
}

// WriteConfig stores the resolved config as config.json; later checkpoints record it too.
func (r *Run) WriteConfig(cfg any) error {
	if err := r.writable("writing config.json"); err != nil {
		return err
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("run config: %w", err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(r.Dir, "config.json"), append(b, '\n')); err != nil {
		return err
	}
	r.config = b
	return nil
}

// RecordedConfig returns the resolved config the newest checkpoint ran with and that
// checkpoint's name; for a checkpoint that recorded none, config.json's (nil if there is no
// such file). It reads state.json only, checking its checksum, not the weights.
func (r *Run) RecordedConfig() (cfg json.RawMessage, checkpoint string, err error) {
	fs, name, err := r.latestState()
	if err != nil {
		return nil, name, err
	}
	if fs.Config != nil {
		return fs.Config, name, nil
	}
	b, err := os.ReadFile(filepath.Join(r.Dir, "config.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, name, nil
	}
	if err != nil {
		return nil, name, err
	}
	if !json.Valid(b) {
		return nil, name, fmt.Errorf("%s is not valid JSON", filepath.Join(r.Dir, "config.json"))
	}
	return b, name, nil
}

// latestState reads the newest checkpoint's state.json (checksum checked), not its weights.
func (r *Run) latestState() (fs *fileState, name string, err error) {
	name, err = r.latestName()
	if err != nil {
		return nil, "", err
	}
	fs, err = r.readState(name)
	if err != nil {
		return nil, name, fmt.Errorf("checkpoint %s: %w", r.path(name), err)
	}
	return fs, name, nil
}

// RecordedState returns the recipe state the newest checkpoint recorded (run:save's state),
// its step and its name, reading state.json only (checksum checked), not the weights.
func (r *Run) RecordedState() (state json.RawMessage, step int, checkpoint string, err error) {
	name, err := r.latestName()
	if err != nil {
		return nil, 0, "", err
	}
	fs, err := r.readState(name)
	if err != nil {
		return nil, 0, name, fmt.Errorf("checkpoint %s: %w", r.path(name), err)
	}
	return fs.Recipe, fs.Step, name, nil
}

var nameRE = regexp.MustCompile(`^step-([0-9]{8,})$`)

func stepName(step int) string { return fmt.Sprintf("step-%08d", step) }

// stepOf parses a checkpoint name; ok is false for anything else (temporary directories).
func stepOf(name string) (int, bool) {
	m := nameRE.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

// List returns the names of the checkpoint directories, oldest step first. It does not
// verify them; Load does.
func (r *Run) List() ([]string, error) {
	entries, err := os.ReadDir(r.path())
	if err != nil {
		return nil, err
	}
	type ck struct {
		name string
		step int
	}
	var cks []ck
	for _, e := range entries {
		if s, ok := stepOf(e.Name()); ok && e.IsDir() {
			cks = append(cks, ck{e.Name(), s})
		}
	}
	sort.Slice(cks, func(i, j int) bool { return cks[i].step < cks[j].step })
	names := make([]string, len(cks))
	for i, c := range cks {
		names[i] = c.name
	}
	return names, nil
}

// readPointer reads LATEST or BEST: a checkpoint name and a newline.
func (r *Run) readPointer(file string) (string, error) {
	b, err := os.ReadFile(r.path(file))
	if err != nil {
		return "", err
	}
	name := strings.TrimSpace(string(b))
	if _, ok := stepOf(name); !ok {
		return "", fmt.Errorf("%s: %q is not a checkpoint name", r.path(file), name)
	}
	return name, nil
}

func (r *Run) latestName() (string, error) {
	name, err := r.readPointer("LATEST")
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%s: %w yet (no checkpoints/LATEST)", r.Dir, ErrNoCheckpoint)
	}
	return name, err
}

// LatestName names the newest complete checkpoint, without loading it.
func (r *Run) LatestName() (string, error) { return r.latestName() }

// Best names the best checkpoint by the run's metric, "" if there is none.
func (r *Run) Best() (string, error) {
	name, err := r.readPointer("BEST")
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return name, err
}

// Latest loads and verifies the newest complete checkpoint.
func (r *Run) Latest() (*State, error) {
	name, err := r.latestName()
	if err != nil {
		return nil, err
	}
	return r.Load(name)
}

// Load loads and verifies the checkpoint called name ("step-00000050").
func (r *Run) Load(name string) (*State, error) {
	if _, ok := stepOf(name); !ok {
		return nil, fmt.Errorf("%q is not a checkpoint name (want step-NNNNNNNN)", name)
	}
	return load(r.path(name))
}

// readState reads and decodes a checkpoint's state.json, checking only its own checksum.
func (r *Run) readState(name string) (*fileState, error) {
	return readStateFile(filepath.Join(r.path(name), "state.json"))
}

// readStateFile reads a state.json; its errors start with "state.json:", the caller names the
// checkpoint.
func readStateFile(path string) (*fileState, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errors.New("state.json: missing")
	}
	if err != nil {
		return nil, fmt.Errorf("state.json: %w", err)
	}
	defer f.Close()
	// state.json is small; a huge one is not ours and must not exhaust memory.
	b, err := io.ReadAll(io.LimitReader(f, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("state.json: %w", err)
	}
	fs, err := decodeState(b)
	if err != nil {
		return nil, fmt.Errorf("state.json: %w", err)
	}
	return fs, nil
}
