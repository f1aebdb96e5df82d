package tbevents

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// FilePrefix starts the name of every event file; TensorBoard reads files whose name holds
// "tfevents".
const FilePrefix = "events.out.tfevents."

// ErrNoSession is returned for a summary written before SessionStart.
var ErrNoSession = errors.New("tbevents: summary before SessionStart")

// ErrClosed is returned by a Writer after Close.
var ErrClosed = errors.New("tbevents: writer is closed")

// StepError is a summary that would not move its tag forward: TensorBoard keeps one value per
// tag and step, so a second value at a step, or one before the session's start, would replace
// or hide another without a trace.
type StepError struct {
	Tag   string
	Step  int64
	Last  int64 // the tag's last step in this session; Start-1 when it has none
	Start int64 // the step of the latest SessionStart
}

func (e *StepError) Error() string {
	if e.Step < e.Start {
		return fmt.Sprintf("tbevents: %q at step %d is before the session's start step %d", e.Tag, e.Step, e.Start)
	}
	return fmt.Sprintf("tbevents: %q at step %d after step %d: a tag's steps must increase within a session (call SessionStart to roll back)", e.Tag, e.Step, e.Last)
}

// ValueError is an argument TensorBoard cannot record.
type ValueError struct {
	Tag    string
	Key    string // the hparam's name, for HParams
	Reason string
}

func (e *ValueError) Error() string {
	if e.Key != "" {
		return fmt.Sprintf("tbevents: %q hparam %q: %s", e.Tag, e.Key, e.Reason)
	}
	return fmt.Sprintf("tbevents: %q: %s", e.Tag, e.Reason)
}

// Writer writes one event file. See the package doc for the order of calls.
type Writer struct {
	path string
	f    *os.File
	w    *bufio.Writer
	buf  []byte

	started   bool
	start     int64
	last      map[string]int64 // each tag's last step since the latest SessionStart
	described map[string]bool  // tags whose metadata this file carries
	err       error            // sticky: the first failed write, or ErrClosed
}

// Open creates dir if needed and a new event file in it, named to sort after every event file
// already there, and writes the file_version event.
func Open(dir string) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tbevents: %w", err)
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	host = strings.NewReplacer("/", "_", string(filepath.Separator), "_").Replace(host)

	now := time.Now()
	secs := now.Unix()
	latest, err := latestEventFile(dir)
	if err != nil {
		return nil, err
	}
	// After a clock that went back, or a restart within the same second, the seconds move
	// past the latest file's.
	if digits, _, ok := strings.Cut(strings.TrimPrefix(latest, FilePrefix), "."); ok {
		if last, err := strconv.ParseInt(digits, 10, 64); err == nil && last > secs {
			secs = last
		}
	}
	var f *os.File
	var name string
	for tries := 0; ; tries++ {
		name = fmt.Sprintf("%s%010d.%s", FilePrefix, secs, host)
		if name > latest {
			f, err = os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err == nil {
				break
			}
			if !errors.Is(err, os.ErrExist) || tries > 100 {
				return nil, fmt.Errorf("tbevents: %w", err)
			}
			latest = name
		}
		secs++
	}
	w := &Writer{
		path:      filepath.Join(dir, name),
		f:         f,
		w:         bufio.NewWriterSize(f, 64<<10),
		last:      map[string]int64{},
		described: map[string]bool{},
	}
	if err := w.write(fileVersionEvent(now)); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// latestEventFile is the greatest event file name in dir, or "".
func latestEventFile(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("tbevents: %w", err)
	}
	latest := ""
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), FilePrefix) && e.Name() > latest {
			latest = e.Name()
		}
	}
	return latest, nil
}

// Path is the event file's path.
func (w *Writer) Path() string { return w.path }

// SessionStart writes a SessionLog START at step: the first step this session writes. Call it
// when a session begins, fresh or resumed, and again on a rollback; TensorBoard then drops
// the values of earlier sessions at steps >= step (see the package doc).
func (w *Writer) SessionStart(step int64, wall time.Time) error {
	if err := w.write(sessionStartEvent(step, wall)); err != nil {
		return err
	}
	w.started = true
	w.start = step
	clear(w.last)
	return nil
}

// Scalar writes v at step under tag, as a float32 simple_value. A NaN or infinity is written
// as it is: TensorBoard shows it, and the metrics log reports it too.
func (w *Writer) Scalar(tag string, step int64, wall time.Time, v float64) error {
	if err := w.advance(tag, step); err != nil {
		return err
	}
	return w.write(summaryEvent(step, wall, scalarValue(tag, v)))
}

// Text writes text (Markdown) at step under tag, for the text plugin.
func (w *Writer) Text(tag string, step int64, wall time.Time, text string) error {
	if err := w.advance(tag, step); err != nil {
		return err
	}
	first := !w.described[tag]
	if err := w.write(summaryEvent(step, wall, textValue(tag, text, first))); err != nil {
		return err
	}
	w.described[tag] = true
	return nil
}

// HParams writes the session's hyperparameters for the hparams plugin, at step 0 as
// TensorBoard's own hparams summary does. Values are strings, bools or numbers (any Go
// integer or float type); a slice or map is the caller's to flatten or format. TensorBoard
// shows the first hparams it reads for a run.
func (w *Writer) HParams(hp map[string]any, wall time.Time) error {
	if err := w.usable(hparamsTag); err != nil {
		return err
	}
	vals := make(map[string]hparam, len(hp))
	for k, v := range hp {
		h, ok := toHParam(v)
		if !ok {
			return &ValueError{Tag: hparamsTag, Key: k, Reason: fmt.Sprintf("a %T is not a string, bool or number", v)}
		}
		if h.kind == hparamNumber && (math.IsNaN(h.f) || math.IsInf(h.f, 0)) {
			return &ValueError{Tag: hparamsTag, Key: k, Reason: fmt.Sprintf("%v is not a finite number", h.f)}
		}
		vals[k] = h
	}
	return w.write(summaryEvent(0, wall, hparamsValue(vals, wall)))
}

// Flush hands buffered events to the operating system, where a reader sees them.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if err := w.w.Flush(); err != nil {
		w.err = fmt.Errorf("tbevents: %s: %w", w.path, err)
	}
	return w.err
}

// Close flushes, syncs and closes the file. Later calls return ErrClosed.
func (w *Writer) Close() error {
	if errors.Is(w.err, ErrClosed) {
		return ErrClosed
	}
	err := w.Flush()
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.err = ErrClosed
	if err != nil {
		return fmt.Errorf("tbevents: %s: %w", w.path, err)
	}
	return nil
}

func (w *Writer) usable(tag string) error {
	if w.err != nil {
		return w.err
	}
	if tag == "" {
		return &ValueError{Reason: "empty tag"}
	}
	if !w.started {
		return fmt.Errorf("%w (tag %q)", ErrNoSession, tag)
	}
	return nil
}

// advance checks that step moves tag forward in this session and records it.
func (w *Writer) advance(tag string, step int64) error {
	if err := w.usable(tag); err != nil {
		return err
	}
	last, seen := w.last[tag]
	if !seen {
		last = w.start - 1
	}
	if step <= last {
		return &StepError{Tag: tag, Step: step, Last: last, Start: w.start}
	}
	w.last[tag] = step
	return nil
}

func (w *Writer) write(event []byte) error {
	if w.err != nil {
		return w.err
	}
	w.buf = appendRecord(w.buf[:0], event)
	if _, err := w.w.Write(w.buf); err != nil {
		w.err = fmt.Errorf("tbevents: %s: %w", w.path, err)
	}
	return w.err
}

type hparamKind int

const (
	hparamString hparamKind = iota
	hparamBool
	hparamNumber
)

type hparam struct {
	kind hparamKind
	s    string
	b    bool
	f    float64
}

func toHParam(v any) (hparam, bool) {
	switch x := v.(type) {
	case string:
		return hparam{kind: hparamString, s: x}, true
	case bool:
		return hparam{kind: hparamBool, b: x}, true
	case float64:
		return hparam{kind: hparamNumber, f: x}, true
	case float32:
		return hparam{kind: hparamNumber, f: float64(x)}, true
	case int:
		return hparam{kind: hparamNumber, f: float64(x)}, true
	case int8:
		return hparam{kind: hparamNumber, f: float64(x)}, true
	case int16:
		return hparam{kind: hparamNumber, f: float64(x)}, true
	case int32:
		return hparam{kind: hparamNumber, f: float64(x)}, true
	case int64:
		return hparam{kind: hparamNumber, f: float64(x)}, true
	case uint:
		return hparam{kind: hparamNumber, f: float64(x)}, true
	case uint8:
		return hparam{kind: hparamNumber, f: float64(x)}, true
	case uint16:
		return hparam{kind: hparamNumber, f: float64(x)}, true
	case uint32:
		return hparam{kind: hparamNumber, f: float64(x)}, true
	case uint64:
		return hparam{kind: hparamNumber, f: float64(x)}, true
	}
	return hparam{}, false
}
