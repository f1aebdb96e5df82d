package luabind

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rookscript/rookscript/engine/checkpoint"
	"github.com/rookscript/rookscript/engine/tbevents"
)

// tensorboardDir is where a run writes its TensorBoard event files, inside its directory.
const tensorboardDir = "tb"

// tensorboard writes a run's TensorBoard event file (engine/tbevents): one new file for each
// process that opens the run, in run_dir/tb. What goes in is what the run writes elsewhere,
// under the same names: every value of metrics.jsonl as a scalar, at its step and its time;
// each step's completions of samples.jsonl as one text ("samples"); the resolved config as
// text ("config") and, for a new run, as hparams.
//
// A session is the steps that one history of weights logs: a new run's starts at its step,
// a resume's and a rollback's at the step after the checkpoint (whose steps metrics.jsonl
// keeps). TensorBoard drops the values an earlier session wrote from that step on, as
// metrics.jsonl moves them to metrics-discarded.jsonl, so both show the same curve.
type tensorboard struct {
	w        *tbevents.Writer
	config   string // config.json as the run recorded it; "" when there is none
	configAt int64  // the step of the config text; -1 before one is written
	refused  map[string]bool
}

// openTensorboard opens a new event file in run dir and starts its session at start. config
// is the run's config.json ("" for none); hparams says whether it also goes in as hparams
// (TensorBoard shows a run's first hparams, so only a new run writes them).
func openTensorboard(runDir string, start int, config []byte, hparams bool) (*tensorboard, error) {
	w, err := tbevents.Open(filepath.Join(runDir, tensorboardDir))
	if err != nil {
		return nil, err
	}
	tb := &tensorboard{w: w, config: strings.TrimSpace(string(config)), configAt: -1, refused: map[string]bool{}}
	now := time.Now()
	if err := tb.session(start, now); err != nil {
		w.Close()
		return nil, err
	}
	if hparams && tb.config != "" {
		hp, err := flatHParams([]byte(tb.config))
		if err == nil {
			err = w.HParams(hp, now)
		}
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("tensorboard: config as hparams: %w", err)
		}
	}
	return tb, nil
}

// session starts a session at step start (see tensorboard) and writes the config with it,
// unless the config text of an earlier session is still before start.
func (tb *tensorboard) session(start int, now time.Time) error {
	if err := tb.w.SessionStart(int64(start), now); err != nil {
		return err
	}
	if tb.config != "" && (tb.configAt < 0 || tb.configAt >= int64(start)) {
		if err := tb.w.Text("config", int64(start), now, codeBlock(tb.config)); err != nil {
			return err
		}
		tb.configAt = int64(start)
	}
	return tb.w.Flush()
}

// log writes a metrics record and the step's samples, at t (the record's time in
// metrics.jsonl), and flushes. A value TensorBoard cannot hold beside the session's others
// (a tag logged again at a step it has, or before the session's start) is not written: it is
// returned in refused, once per tag, for the run to warn about.
func (tb *tensorboard) log(step int, t time.Time, m map[string]float64, samples []checkpoint.Sample) (refused []string, err error) {
	write := func(tag string, fn func() error) error {
		err := fn()
		var se *tbevents.StepError
		if errors.As(err, &se) {
			if !tb.refused[tag] {
				tb.refused[tag] = true
				refused = append(refused, se.Error())
			}
			return nil
		}
		return err
	}
	for _, tag := range slices.Sorted(maps.Keys(m)) {
		if err := write(tag, func() error { return tb.w.Scalar(tag, int64(step), t, m[tag]) }); err != nil {
			return refused, err
		}
	}
	if len(samples) > 0 {
		var parts []string
		for _, s := range samples {
			parts = append(parts, s.String())
		}
		text := codeBlock(validUTF8(strings.Join(parts, "\n\n")))
		if err := write("samples", func() error { return tb.w.Text("samples", int64(step), t, text) }); err != nil {
			return refused, err
		}
	}
	return refused, tb.w.Flush()
}

func (tb *tensorboard) Close() error { return tb.w.Close() }

// codeBlock is text as a Markdown code block (indented by four spaces), so that the text
// plugin shows it verbatim: FENs, padding and JSON included.
func codeBlock(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = "    " + l
		}
	}
	return strings.Join(lines, "\n")
}

// validUTF8 replaces each byte of s that is not UTF-8 (a completion can stop inside a
// character) with U+FFFD, as samples.jsonl's JSON does: TensorBoard's text plugin decodes
// UTF-8.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// flatHParams turns a config (JSON) into hparams: nested keys dotted (grpo.beta), strings,
// booleans and numbers as they are, lists as their JSON text; nulls are left out.
func flatHParams(config []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(config))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	out := map[string]any{}
	var walk func(prefix string, v any) error
	walk = func(prefix string, v any) error {
		switch x := v.(type) {
		case map[string]any:
			for k, y := range x {
				name := k
				if prefix != "" {
					name = prefix + "." + k
				}
				if err := walk(name, y); err != nil {
					return err
				}
			}
		case json.Number:
			f, err := x.Float64()
			if err != nil {
				return fmt.Errorf("%s: %w", prefix, err)
			}
			out[prefix] = f
		case string, bool:
			out[prefix] = x
		case nil:
		default:
			b, err := json.Marshal(x)
			if err != nil {
				return fmt.Errorf("%s: %w", prefix, err)
			}
			out[prefix] = string(b)
		}
		return nil
	}
	if err := walk("", v); err != nil {
		return nil, err
	}
	return out, nil
}

// readRunConfig is the config.json the run recorded, or nil.
func readRunConfig(runDir string) []byte {
	b, err := os.ReadFile(filepath.Join(runDir, "config.json"))
	if err != nil {
		return nil
	}
	return b
}

// tensorboardLog writes a run:log record to the run's TensorBoard file: the metrics, and the
// step's samples when b is the step's batch (the completions logSamples writes).
func (r *run) tensorboardLog(step int, t time.Time, m map[string]float64, b *batch) error {
	if r.tb == nil {
		return nil
	}
	var ss []checkpoint.Sample
	if b != nil && r.samples > 0 {
		for _, i := range pickSamples(len(b.b.Completions), r.samples) {
			ss = append(ss, sampleOf(step, b, i))
		}
	}
	refused, err := r.tb.log(step, t, m, ss)
	for _, why := range refused {
		r.progress.note("warning: " + why + "; not written to TensorBoard (metrics.jsonl has it)")
	}
	return err
}
