package luabind

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	lua "github.com/yuin/gopher-lua"
)

// progress reports a run's steps: on a terminal one line redrawn in place (step i/N, ETA,
// tokens/s, reward, KL), elsewhere a plain line per step; nothing with --quiet.
type progress struct {
	label    string // what is progressing, before the step count ("" for a run's steps)
	counts   bool   // what progresses are counted things (tokens, answers, rows), not steps
	out      io.Writer
	quiet    bool
	tty      bool
	total    int
	first    int // step the process started from
	start    time.Time
	drawn    bool
	lastLine string
	printed  time.Time // when the last plain line was printed (labelled loops are throttled)
}

func newProgress(e *Env, total, from int) *progress {
	return &progress{out: e.out, quiet: e.opts.Quiet, tty: isTerminal(e.out), total: total, first: from, start: time.Now()}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// update draws step's line from its metrics; why, when not "", is why the step had no reward
// signal.
func (p *progress) update(step int, m map[string]float64, why string) {
	if p.quiet {
		return
	}
	var b strings.Builder
	if p.label != "" {
		b.WriteString(p.label + ": ")
	}
	word := "step "
	if p.counts {
		word = ""
	}
	if p.total > 0 {
		fmt.Fprintf(&b, "%s%d/%d", word, step, p.total)
	} else {
		fmt.Fprintf(&b, "%s%d", word, step)
	}
	if done := step - p.first; done > 0 && p.total > 0 {
		per := time.Since(p.start) / time.Duration(done)
		left := time.Duration(max(0, p.total-step)) * per
		fmt.Fprintf(&b, "  ETA %s", left.Round(time.Second))
	}
	if v, ok := m["tokens_per_sec"]; ok && v > 0 {
		fmt.Fprintf(&b, "  %s tok/s", strings.TrimSpace(humanize.SIWithDigits(v, 1, "")))
	}
	for _, k := range []string{"reward", "kl", "loss", "entropy", "grad_norm"} {
		if v, ok := m[k]; ok && !math.IsNaN(v) {
			fmt.Fprintf(&b, "  %s %.4g", k, v)
		}
	}
	if v, ok := m["finite"]; ok && v == 0 {
		b.WriteString("  NON-FINITE (update skipped)")
	}
	if why != "" {
		b.WriteString("  NO SIGNAL: " + why)
	}
	line := b.String()
	if p.tty {
		fmt.Fprintf(p.out, "\r\033[K%s", line)
		p.drawn, p.lastLine = true, line
		return
	}
	// Off a terminal, a labelled loop (hundreds of fast steps) prints a line every 10 s and
	// its last step; a run's steps are each worth a line.
	if p.label != "" && step != p.total && time.Since(p.printed) < 10*time.Second {
		return
	}
	p.printed = time.Now()
	fmt.Fprintln(p.out, line)
}

// note prints a message on its own line, keeping the progress line below it.
func (p *progress) note(msg string) {
	if p.quiet {
		return
	}
	if p.tty && p.drawn {
		fmt.Fprintf(p.out, "\r\033[K%s\n%s", msg, p.lastLine)
		return
	}
	fmt.Fprintln(p.out, msg)
}

// finish ends the progress line so that what follows starts on a fresh line.
func (p *progress) finish() {
	if p.tty && p.drawn {
		fmt.Fprintln(p.out)
		p.drawn = false
	}
}

// phaseQuiet is how long a phase runs before it shows progress: a short one prints nothing.
const phaseQuiet = 3 * time.Second

// phase is the progress of one long engine call (decoding, scoring, generating rows), told
// from whatever goroutine does the work.
type phase struct {
	mu    sync.Mutex
	p     *progress
	shown bool
}

// startPhase starts a labelled progress line of total steps; it shows once the phase has run
// for phaseQuiet.
func (e *Env) startPhase(label string, total int) *phase {
	p := newProgress(e, total, 0)
	p.label, p.counts = label, true
	return &phase{p: p}
}

func (ph *phase) update(done, total int) {
	ph.mu.Lock()
	defer ph.mu.Unlock()
	if !ph.shown && time.Since(ph.p.start) < phaseQuiet {
		return
	}
	ph.shown = true
	ph.p.total = total
	ph.p.update(done, nil, "")
}

// done replaces the phase's line, if it showed one, with how long the phase took (a phase
// may end before its total: decoding stops when every answer has).
func (ph *phase) done() {
	ph.mu.Lock()
	defer ph.mu.Unlock()
	p := ph.p
	if !ph.shown || p.quiet {
		return
	}
	msg := fmt.Sprintf("%s: done in %s", p.label, time.Since(p.start).Round(100*time.Millisecond))
	if p.tty {
		fmt.Fprintf(p.out, "\r\033[K%s\n", msg)
		p.drawn = false
		return
	}
	fmt.Fprintln(p.out, msg)
}

const progressType = "rook.progress"

// rook.progress{total=, label=} → a progress line of its own, for loops that are not a run
// (a default-model build, an evaluation sweep): p:update(step, metrics), p:done().
func (e *Env) luaProgress(L *lua.LState) int {
	var o struct {
		Total int    `json:"total"`
		Label string `json:"label"`
	}
	options(L, 1, "rook.progress", &o)
	p := newProgress(e, o.Total, 0)
	p.label = o.Label
	e.progress = p
	L.Push(newUserData(L, progressType, p))
	return 1
}

var progressMethods = map[string]lua.LGFunction{
	"update": func(L *lua.LState) int {
		p := check[*progress](L, 1, progressType)
		m := map[string]float64{}
		if L.GetTop() >= 3 {
			m = metricsArg(L, 3)
		}
		p.update(L.CheckInt(2), m, "")
		return 0
	},
	"done": func(L *lua.LState) int {
		check[*progress](L, 1, progressType).finish()
		return 0
	},
}
