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

// DefaultKeepLast is how many of the newest checkpoints Options.KeepLast 0 keeps.
const DefaultKeepLast = 3

// Options configure a run directory's retention.
type Options struct {
	// KeepLast is how many of the newest checkpoints (by step) to keep besides the LATEST and
	// BEST ones; 0 means DefaultKeepLast, a negative value keeps all.
	KeepLast int
	// BestMetric names the State.Metrics entry that picks the best checkpoint ("" keeps
	// none); BestMode is "min" or "max". A non-finite value never becomes best.
	BestMetric string
	BestMode   string
	// Resume lets Create open a directory that already holds checkpoints.
	Resume bool
}

func (o Options) normalize() (Options, error) {
	if o.KeepLast == 0 {
		o.KeepLast = DefaultKeepLast
	}
	switch {
	case o.BestMetric == "" && o.BestMode != "":
		return o, fmt.Errorf("checkpoint options: best mode %q without a best metric", o.BestMode)
	case o.BestMetric != "" && o.BestMode != "min" && o.BestMode != "max":
		return o, fmt.Errorf("checkpoint options: best metric %q needs mode \"min\" or \"max\", got %q", o.BestMetric, o.BestMode)
	}
	return o, nil
}

// Run is a run directory. It is not safe for concurrent use, and one process writes a run
// directory at a time.
type Run struct {
	Dir    string
	opts   Options
	config json.RawMessage // the last WriteConfig, recorded in checkpoints
}

// Create opens dir for a new run, creating it if needed. A directory that already holds
// checkpoints is refused unless opts.Resume is set, so a new run cannot prune or shadow an
// old one by accident.
func Create(dir string, opts Options) (*Run, error) {
	opts, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "checkpoints"), 0o755); err != nil {
		return nil, err
	}
	r := &Run{Dir: dir, opts: opts}
	if !opts.Resume {
		names, err := r.List()
		if err != nil {
			return nil, err
		}
		if _, lerr := os.Stat(r.path("LATEST")); len(names) > 0 || lerr == nil {
			return nil, fmt.Errorf("%s already holds checkpoints (%s): resume it or choose another directory", dir, strings.Join(names, ", "))
		}
	}
	if err := r.endTornMetricsLine(); err != nil {
		return nil, err
	}
	return r, nil
}

// Open opens an existing run directory for resume, with the retention options its newest
// checkpoint recorded (DefaultKeepLast and no best metric if it has none).
func Open(dir string) (*Run, error) {
	if fi, err := os.Stat(filepath.Join(dir, "checkpoints")); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a run directory (no checkpoints/ in it)", dir)
	}
	r := &Run{Dir: dir, opts: Options{KeepLast: DefaultKeepLast, Resume: true}}
	// A LATEST that cannot be read is Latest's error to report, not Open's.
	if name, err := r.latestName(); err == nil {
		if fs, err := r.readState(name); err == nil {
			o := Options{KeepLast: fs.Retention.KeepLast, BestMetric: fs.Retention.BestMetric, BestMode: fs.Retention.BestMode, Resume: true}
			if o, err := o.normalize(); err == nil {
				r.opts = o
			}
		}
	}
	if err := r.endTornMetricsLine(); err != nil {
		return nil, err
	}
	return r, nil
}

// Options returns the run's retention options.
func (r *Run) Options() Options { return r.opts }

func (r *Run) path(elem ...string) string {
	return filepath.Join(append([]string{r.Dir, "checkpoints"}, elem...)...)
}

// WriteRecipe stores a copy of the recipe source as recipe.lua.
func (r *Run) WriteRecipe(src []byte) error {
	return atomicfile.WriteBytes(filepath.Join(r.Dir, "recipe.lua"), src)
}

// WriteConfig stores the resolved config as config.json; later checkpoints record it too.
func (r *Run) WriteConfig(cfg any) error {
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
