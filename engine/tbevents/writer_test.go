package tbevents_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/rookscript/rookscript/engine/tbevents"
	"github.com/rookscript/rookscript/internal/tbread"
)

type record struct {
	step    int64
	wall    time.Time
	metrics map[string]float64
}

func metricsLog(steps int, t0 time.Time, scale float64) []record {
	var log []record
	for s := 1; s <= steps; s++ {
		m := map[string]float64{
			"train/loss":        scale * (0.5 - 0.01*float64(s)),
			"train/reward_mean": scale * math.Sqrt(float64(s)) / 3,
			"train/kl":          scale * 1e-7 * float64(s*s),
		}
		if s%2 == 0 {
			m["eval/p_format"] = float64(s) / 10
		}
		log = append(log, record{int64(s), t0.Add(time.Duration(s) * 1500 * time.Millisecond), m})
	}
	return log
}

func writeLog(t *testing.T, w *tbevents.Writer, log []record) {
	t.Helper()
	for _, r := range log {
		for _, tag := range sortedKeys(r.metrics) {
			if err := w.Scalar(tag, r.step, r.wall, r.metrics[tag]); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func sortedKeys(m map[string]float64) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func TestWriterEvents(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC)
	log := metricsLog(6, t0, 1)

	w, err := tbevents.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.SessionStart(1, t0); err != nil {
		t.Fatal(err)
	}
	hp := map[string]any{"lr": 1e-6, "group": 8, "kl_coef": float32(0.005), "model": "rookworld", "greedy": false}
	if err := w.HParams(hp, t0); err != nil {
		t.Fatal(err)
	}
	if err := w.Text("config", 1, t0, "```\nlr = 1e-6\n```"); err != nil {
		t.Fatal(err)
	}
	writeLog(t, w, log)
	samples := []string{"P: 8/8 w - - 0 1 M: …", "A: start+e2e4+e2e4+…", "third"}
	for i, s := range samples {
		if err := w.Text("samples", int64(i+1), log[i].wall, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	names, files, err := tbread.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || !regexp.MustCompile(`^events\.out\.tfevents\.\d{10}\.[^/]+$`).MatchString(names[0]) {
		t.Fatalf("event files %q", names)
	}
	evs := files[0]
	if evs[0].FileVersion != "brain.Event:2" || evs[0].Writer != "rookscript" || len(evs[0].Values) != 0 {
		t.Fatalf("first event %+v", evs[0])
	}
	if evs[1].Session != 1 || evs[1].Step != 1 || math.Abs(evs[1].Wall-seconds(t0)) > 1e-6 {
		t.Fatalf("second event %+v, want SessionLog START at step 1", evs[1])
	}

	// Every scalar of the log, once, at its step and wall time, as float32.
	type key struct {
		tag  string
		step int64
	}
	want := map[key]record{}
	for _, r := range log {
		for tag := range r.metrics {
			want[key{tag, r.step}] = r
		}
	}
	texts := map[string][]string{}
	sawHParams := false
	for _, e := range evs[2:] {
		if len(e.Values) != 1 {
			t.Fatalf("event with %d values", len(e.Values))
		}
		v := e.Values[0]
		if len(v.OtherFields) != 0 {
			t.Fatalf("%q: unexpected Summary.Value fields %v", v.Tag, v.OtherFields)
		}
		switch {
		case v.Simple != nil:
			r, ok := want[key{v.Tag, e.Step}]
			if !ok {
				t.Fatalf("unexpected or repeated scalar %q at step %d", v.Tag, e.Step)
			}
			delete(want, key{v.Tag, e.Step})
			if *v.Simple != float32(r.metrics[v.Tag]) {
				t.Errorf("%q step %d: %v, want %v", v.Tag, e.Step, *v.Simple, float32(r.metrics[v.Tag]))
			}
			if math.Abs(e.Wall-seconds(r.wall)) > 1e-6 {
				t.Errorf("%q step %d: wall %v, want %v", v.Tag, e.Step, e.Wall, seconds(r.wall))
			}
			if v.HasMeta || v.Tensor != nil {
				t.Errorf("%q: a scalar carries metadata or a tensor", v.Tag)
			}
		case v.Tag == "_hparams_/session_start_info":
			sawHParams = true
			checkHParams(t, e, v, hp, t0)
		default:
			tt := v.Tensor
			if tt == nil || tt.DType != 7 || !tt.HasShape || len(tt.Dims) != 0 || len(tt.StringVal) != 1 {
				t.Fatalf("%q: text tensor %+v, want a rank-0 DT_STRING", v.Tag, tt)
			}
			first := len(texts[v.Tag]) == 0
			if v.HasMeta != first || (first && (v.Plugin != "text" || len(v.Content) != 0)) {
				t.Errorf("%q step %d: metadata %v plugin %q content %x; want text plugin metadata on the first value only", v.Tag, e.Step, v.HasMeta, v.Plugin, v.Content)
			}
			texts[v.Tag] = append(texts[v.Tag], tt.StringVal[0])
		}
	}
	if len(want) != 0 {
		t.Errorf("%d scalars missing, e.g. %v", len(want), want)
	}
	if !sawHParams {
		t.Error("no hparams summary")
	}
	if !slices.Equal(texts["samples"], samples) || len(texts["config"]) != 1 {
		t.Errorf("texts %q", texts)
	}
}

func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// checkHParams decodes HParamsPluginData (tensorboard/plugins/hparams/plugin_data.proto):
// version 1, session_start_info 3 {hparams 1: map<string, google.protobuf.Value>,
// start_time_secs 5}; Value: number_value 2, string_value 3, bool_value 4.
func checkHParams(t *testing.T, e tbread.Event, v tbread.Value, hp map[string]any, start time.Time) {
	t.Helper()
	if e.Step != 0 || v.Plugin != "hparams" {
		t.Fatalf("hparams at step %d plugin %q", e.Step, v.Plugin)
	}
	if tt := v.Tensor; tt == nil || tt.DType != 1 || !slices.Equal(tt.Dims, []int64{0}) {
		t.Fatalf("hparams tensor %+v, want NULL_TENSOR (DT_FLOAT, shape [0])", tt)
	}
	got := map[string]any{}
	var startSecs float64
	for _, f := range tbread.MustParse(v.Content) {
		if f.Num == 1 && f.U != 0 {
			t.Fatalf("hparams plugin data version %d", f.U)
		}
		if f.Num != 3 {
			continue
		}
		for _, sf := range tbread.MustParse(f.B) {
			switch sf.Num {
			case 1:
				var name string
				var val any
				for _, ef := range tbread.MustParse(sf.B) {
					switch ef.Num {
					case 1:
						name = string(ef.B)
					case 2:
						for _, vf := range tbread.MustParse(ef.B) {
							switch vf.Num {
							case 2:
								val = math.Float64frombits(vf.U)
							case 3:
								val = string(vf.B)
							case 4:
								val = vf.U != 0
							}
						}
					}
				}
				got[name] = val
			case 5:
				startSecs = math.Float64frombits(sf.U)
			}
		}
	}
	wantHP := map[string]any{"lr": 1e-6, "group": 8.0, "kl_coef": float64(float32(0.005)), "model": "rookworld", "greedy": false}
	if len(got) != len(wantHP) {
		t.Fatalf("hparams %v, want %v", got, wantHP)
	}
	for k, w := range wantHP {
		if got[k] != w {
			t.Errorf("hparam %q = %v (%T), want %v (%T)", k, got[k], got[k], w, w)
		}
	}
	if math.Abs(startSecs-seconds(start)) > 1e-6 {
		t.Errorf("start_time_secs %v", startSecs)
	}
}

// TestResumeOneCurve: a run logs steps 1..6, stops, and resumes from its checkpoint at step
// 3, so it logs 4..8 again with other values. Both TensorBoard readers must show one curve:
// 1..3 from the first session, 4..8 from the second.
func TestResumeOneCurve(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	first := metricsLog(6, t0, 1)
	second := metricsLog(8, t0.Add(time.Hour), -1)[3:]

	w1, err := tbevents.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := w1.SessionStart(1, t0); err != nil {
		t.Fatal(err)
	}
	writeLog(t, w1, first)
	if err := w1.Close(); err != nil {
		t.Fatal(err)
	}
	// Opened within the same second as the first: the name must still sort after it.
	w2, err := tbevents.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := w2.SessionStart(4, second[0].wall); err != nil {
		t.Fatal(err)
	}
	writeLog(t, w2, second)
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}

	names, files, err := tbread.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 || filepath.Base(w1.Path()) != names[0] || filepath.Base(w2.Path()) != names[1] {
		t.Fatalf("files %q; first %s second %s", names, w1.Path(), w2.Path())
	}
	want := map[string][]tbread.Point{}
	for _, r := range append(first[:3:3], second...) {
		for tag, v := range r.metrics {
			want[tag] = append(want[tag], tbread.Point{Step: r.step, Value: float32(v)})
		}
	}
	for name, view := range map[string]map[string][]tbread.Point{"python": scalars(tbread.PythonView(files)), "rustboard": scalars(tbread.RustView(files))} {
		for tag, ps := range want {
			if !slices.Equal(view[tag], ps) {
				t.Errorf("%s reader, %q: %v, want %v", name, tag, view[tag], ps)
			}
		}
	}
	// The purge needs the first session's START: without it the restart's START would be
	// taken as the run's first and purge nothing.
	if files[0][1].Session != 1 {
		t.Fatal("first session wrote no SessionLog START")
	}
}

// TestRollbackInOneFile: a recovery policy rolls back from step 5 to step 3 in the same
// process; the same writer records the new START and the repeated steps.
func TestRollbackInOneFile(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Unix(1_700_000_000, 0)
	w, err := tbevents.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	must(t, w.SessionStart(1, t0))
	for s := int64(1); s <= 5; s++ {
		must(t, w.Scalar("loss", s, t0, float64(s)))
	}
	must(t, w.SessionStart(3, t0))
	for s := int64(3); s <= 4; s++ {
		must(t, w.Scalar("loss", s, t0, -float64(s)))
	}
	must(t, w.Close())
	_, files, err := tbread.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []tbread.Point{{Step: 1, Value: 1}, {Step: 2, Value: 2}, {Step: 3, Value: -3}, {Step: 4, Value: -4}}
	if got := scalars(tbread.PythonView(files))["loss"]; !slices.Equal(got, want) {
		t.Errorf("python reader %v, want %v", got, want)
	}
	if got := scalars(tbread.RustView(files))["loss"]; !slices.Equal(got, want) {
		t.Errorf("rustboard reader %v, want %v", got, want)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestWriterErrors(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	cases := []struct {
		name  string
		run   func(w *tbevents.Writer) error
		check func(error) bool
	}{
		{"before SessionStart", func(w *tbevents.Writer) error {
			return w.Scalar("loss", 1, t0, 1)
		}, func(err error) bool { return errors.Is(err, tbevents.ErrNoSession) }},
		{"repeated step", func(w *tbevents.Writer) error {
			must(t, w.SessionStart(1, t0))
			must(t, w.Scalar("loss", 2, t0, 1))
			return w.Scalar("loss", 2, t0, 1)
		}, stepError("loss", 2, 2)},
		{"step before the session's start", func(w *tbevents.Writer) error {
			must(t, w.SessionStart(10, t0))
			return w.Text("samples", 9, t0, "x")
		}, stepError("samples", 9, 9)},
		{"empty tag", func(w *tbevents.Writer) error {
			must(t, w.SessionStart(1, t0))
			return w.Scalar("", 1, t0, 1)
		}, valueError("")},
		{"hparam of a list", func(w *tbevents.Writer) error {
			must(t, w.SessionStart(1, t0))
			return w.HParams(map[string]any{"betas": []float64{0.9, 0.95}}, t0)
		}, valueError("betas")},
		{"non-finite hparam", func(w *tbevents.Writer) error {
			must(t, w.SessionStart(1, t0))
			return w.HParams(map[string]any{"lr": math.NaN()}, t0)
		}, valueError("lr")},
		{"after Close", func(w *tbevents.Writer) error {
			must(t, w.SessionStart(1, t0))
			must(t, w.Close())
			return w.Scalar("loss", 1, t0, 1)
		}, func(err error) bool { return errors.Is(err, tbevents.ErrClosed) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, err := tbevents.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if err := c.run(w); !c.check(err) {
				t.Fatalf("error %v (%T)", err, err)
			}
		})
	}
}

func stepError(tag string, step, last int64) func(error) bool {
	return func(err error) bool {
		var se *tbevents.StepError
		return errors.As(err, &se) && se.Tag == tag && se.Step == step && se.Last == last
	}
}

func valueError(key string) func(error) bool {
	return func(err error) bool {
		var ve *tbevents.ValueError
		return errors.As(err, &ve) && ve.Key == key
	}
}

// TestFileOrderAfterClockSkew: an event file from a clock that ran ahead must still sort
// before the new one, or TensorBoard would read the new file first.
func TestFileOrderAfterClockSkew(t *testing.T) {
	dir := t.TempDir()
	ahead := filepath.Join(dir, "events.out.tfevents.4000000000.zz-host")
	if err := os.WriteFile(ahead, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := tbevents.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if name := filepath.Base(w.Path()); name <= filepath.Base(ahead) {
		t.Fatalf("new file %s sorts before %s", name, filepath.Base(ahead))
	}
}

// scalars keeps each view's scalar points, as step and value.
func scalars(view map[string][]tbread.Point) map[string][]tbread.Point {
	out := map[string][]tbread.Point{}
	for tag, ps := range view {
		for _, p := range ps {
			if p.Text == "" {
				out[tag] = append(out[tag], tbread.Point{Step: p.Step, Value: p.Value})
			}
		}
	}
	return out
}
