package stockfish

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rookscript/rookscript/engine/chess"
)

// Fault injection: fake engines written as shell scripts that speak just enough UCI for
// the handshake and then fail in one way each. None of these tests needs Stockfish.

// fakeEngine writes a script that answers uci and isready and runs onGo for "go".
// The scripts run under /bin/sh; $PIDFILE in onGo names a file for a child's pid.
func fakeEngine(t *testing.T, onUCI, onGo string) (path, pidfile string) {
	t.Helper()
	dir := t.TempDir()
	pidfile = filepath.Join(dir, "child.pid")
	if onUCI == "" {
		onUCI = `echo "id name Fake Engine"; echo uciok`
	}
	script := fmt.Sprintf(`#!/bin/sh
PIDFILE=%q
while read -r line; do
  case "$line" in
    uci) %s ;;
    isready) echo readyok ;;
    go*) %s ;;
  esac
done
`, pidfile, onUCI, onGo)
	return writeExecutable(t, filepath.Join(dir, "engine.sh"), script), pidfile
}

// faultConfig runs one worker of the fake engine with a short search timeout.
func faultConfig(path string, retries int) Config {
	c := DefaultConfig()
	c.Path, c.Timeout, c.Retries = path, 0.3, retries
	return c
}

// within fails the test when f has not returned after limit: the faults below used to block
// forever, and a test must report that rather than hang. limit is far above the bounds the
// pool enforces, so it measures liveness, not speed.
func within(t *testing.T, limit time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("%s did not return within %s: a dead engine blocked it", what, limit)
	}
}

// childPID reads the pid a fake engine's child wrote.
func childPID(t *testing.T, pidfile string) int {
	t.Helper()
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatalf("the fake engine's child never started: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// alive reports whether pid runs (a zombie, dead but not yet reaped by its new parent,
// counts as gone).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// waitGone waits until pid is no longer running; it fails after limit.
func waitGone(t *testing.T, pid int, limit time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !alive(pid) {
			return
		}
	}
	t.Errorf("process %d still runs", pid)
}

// A wrapper script whose child keeps the engine's pipes open: the hung search is killed,
// retried and given up on in bounded time, the child dies with the script (the whole
// process group is killed), and the time lost is reported.
func TestHungEngineWithChildHoldingThePipe(t *testing.T) {
	path, pidfile := fakeEngine(t, "", `echo "fake: searching forever" >&2; sleep 120 & echo $! > "$PIDFILE"; wait`)
	cfg := faultConfig(path, 1)
	p, err := NewPool(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var aerr error
	within(t, 60*time.Second, "Analyse", func() { _, aerr = p.Analyse(context.Background(), chess.StartFEN) })
	var g *GiveUpError
	var na *NoAnswerError
	if !errors.As(aerr, &g) || g.Attempts != 2 || g.Lost <= 0 || g.FEN != chess.StartFEN {
		t.Fatalf("err = %v, want a *GiveUpError after 2 attempts", aerr)
	}
	if !errors.As(aerr, &na) || na.Stderr != "fake: searching forever" {
		t.Errorf("err = %v, want the engine's stderr in a *NoAnswerError", aerr)
	}
	waitGone(t, childPID(t, pidfile), 10*time.Second)
	s := p.Stats()
	if s.Restarts != 2 || s.Failures != 1 || s.Abandoned != 0 {
		t.Errorf("stats %+v, want 2 restarts, 1 failure, none abandoned", s)
	}
	if s.LostSeconds < 2*cfg.Timeout || s.LostSeconds > cfg.MaxLoss().Seconds() {
		t.Errorf("lost_seconds = %v, want at least the two timeouts and at most the bound %v", s.LostSeconds, cfg.MaxLoss())
	}
	within(t, 30*time.Second, "Close", func() { p.Close() })
}

// A child that escapes the process group (its own session) and keeps the pipes open cannot
// be killed with the engine, but it no longer blocks the pool either.
func TestHungEngineWithEscapedChild(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid (util-linux) is not on PATH: the fake engine cannot start a child in a session of its own")
	}
	path, pidfile := fakeEngine(t, "", `setsid sh -c 'echo $$ > "$0"; exec sleep 120' "$PIDFILE" & sleep 120`)
	p, err := NewPool(context.Background(), faultConfig(path, 0))
	if err != nil {
		t.Fatal(err)
	}
	var aerr error
	within(t, 60*time.Second, "Analyse", func() { _, aerr = p.Analyse(context.Background(), chess.StartFEN) })
	if g := (*GiveUpError)(nil); !errors.As(aerr, &g) || g.Attempts != 1 {
		t.Errorf("err = %v, want a give-up after 1 attempt", aerr)
	}
	within(t, 30*time.Second, "Close", func() { p.Close() })
	pid := childPID(t, pidfile)
	if err := exec.Command("kill", "-9", strconv.Itoa(pid)).Run(); err != nil {
		t.Logf("killing the escaped child %d: %v", pid, err)
	}
}

// An engine that dies mid-search: the error carries its exit status and its own stderr.
func TestDyingEngineShowsItsStderr(t *testing.T) {
	path, _ := fakeEngine(t, "", `echo "fake: NNUE file nn-0000.nnue not found" >&2; exit 3`)
	p, err := NewPool(context.Background(), faultConfig(path, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var aerr error
	within(t, 60*time.Second, "Analyse", func() { _, aerr = p.Analyse(context.Background(), chess.StartFEN) })
	var g *GiveUpError
	var ee *ExitError
	if !errors.As(aerr, &g) || g.Attempts != 2 || !errors.As(aerr, &ee) || ee.Status != "exit status 3" || ee.Stderr != "fake: NNUE file nn-0000.nnue not found" {
		t.Errorf("err = %v, want a *GiveUpError after 2 attempts of an *ExitError with status and stderr", aerr)
	}
	if s := p.Stats(); s.Restarts != 2 || s.LostSeconds <= 0 {
		t.Errorf("stats %+v, want 2 restarts and the time lost", s)
	}
}

// An engine that dies during the handshake: NewPool's error carries its stderr and status.
func TestEngineDyingAtStartShowsItsStderr(t *testing.T) {
	path, _ := fakeEngine(t, `echo "fake: illegal instruction (needs AVX2)" >&2; exit 4`, "")
	var err error
	within(t, 60*time.Second, "NewPool", func() { _, err = NewPool(context.Background(), faultConfig(path, 0)) })
	var se *StartError
	var ee *ExitError
	if !errors.As(err, &se) || se.Step != "handshake" || se.Path != path ||
		!errors.As(err, &ee) || ee.Status != "exit status 4" || ee.Stderr != "fake: illegal instruction (needs AVX2)" {
		t.Errorf("err = %v, want a handshake *StartError of an *ExitError with status and stderr", err)
	}
}

// An engine that never completes the handshake while a child holds its pipes: NewPool
// gives up at its context's deadline instead of blocking in the kill.
func TestEngineHangingAtStart(t *testing.T) {
	path, pidfile := fakeEngine(t, `sleep 120 & echo $! > "$PIDFILE"; wait`, "")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var err error
	within(t, 60*time.Second, "NewPool", func() { _, err = NewPool(ctx, faultConfig(path, 0)) })
	var na *NoAnswerError
	if !errors.As(err, &na) || na.Command != "" || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want a handshake timeout (*NoAnswerError)", err)
	}
	waitGone(t, childPID(t, pidfile), 10*time.Second)
}

// position_timeout bounds the time a hung engine costs one position, all attempts together:
// it cuts the retries short, and the search it falls in. Without it, (retries+1) searches of
// timeout each are tried, as before it existed.
func TestPositionTimeout(t *testing.T) {
	for _, c := range []struct {
		name                     string
		timeout, positionTimeout float64
		retries                  int
		attempts                 int  // 0: fewer than retries+1
		spent                    bool // the position_timeout ended the attempts
	}{
		// Unbounded, 101 attempts would take over 30 s.
		{"retries cut short", 0.3, 1, 100, 0, true},
		{"the second search cut short", 1, 1.5, 3, 2, true},
		{"no position bound", 0.3, 0, 1, 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			path, _ := fakeEngine(t, "", `sleep 120 & wait`)
			cfg := faultConfig(path, c.retries)
			cfg.Timeout, cfg.PositionTimeout = c.timeout, c.positionTimeout
			p, err := NewPool(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			start := time.Now()
			var aerr error
			within(t, 60*time.Second, "Analyse", func() { _, aerr = p.Analyse(context.Background(), chess.StartFEN) })
			took := time.Since(start)
			var g *GiveUpError
			if !errors.As(aerr, &g) || (c.attempts > 0 && g.Attempts != c.attempts) || (c.attempts == 0 && g.Attempts >= c.retries+1) ||
				(g.PositionTimeout != 0) != c.spent || (c.spent && g.PositionTimeout != c.positionTimeout) {
				t.Fatalf("err = %v, want a *GiveUpError after %d attempts, position_timeout spent %v", aerr, c.attempts, c.spent)
			}
			// At least the whole allowance is used; at most the bound, far below the unbounded
			// retries (the fake engine dies at once when killed, so MaxLoss's kill waits are slack).
			least := time.Duration(float64(c.retries+1) * c.timeout * float64(time.Second))
			if c.positionTimeout > 0 {
				least = time.Duration(c.positionTimeout * float64(time.Second))
			}
			if took < least || took > cfg.MaxLoss() || (c.positionTimeout > 0 && took > least+5*time.Second) {
				t.Errorf("gave up after %s, want at least %s and at most %s", took, least, min(cfg.MaxLoss(), least+5*time.Second))
			}
			if s := p.Stats(); s.LostSeconds > cfg.MaxLoss().Seconds() {
				t.Errorf("lost_seconds = %v, above the bound %s", s.LostSeconds, cfg.MaxLoss())
			}
		})
	}
}

// MaxLoss is the per-attempt bound times the attempts, or the position's bound and one
// attempt's cleanup, whichever is less.
func TestMaxLoss(t *testing.T) {
	cleanup := 2*killWait + 4*stderrWait
	for _, c := range []struct {
		timeout, positionTimeout float64
		retries                  int
		want                     time.Duration
	}{
		{30, 0, 2, 3 * (30*time.Second + 30*time.Second + cleanup)},
		{0.3, 0, 0, 10*time.Second + 300*time.Millisecond + cleanup}, // start-up gets at least 10 s
		{30, 45, 2, 45*time.Second + cleanup},
		{30, 1000, 2, 3 * (60*time.Second + cleanup)},
	} {
		cfg := DefaultConfig()
		cfg.Timeout, cfg.PositionTimeout, cfg.Retries = c.timeout, c.positionTimeout, c.retries
		if got := cfg.MaxLoss(); got != c.want {
			t.Errorf("timeout %v, position_timeout %v, retries %d: MaxLoss %s, want %s", c.timeout, c.positionTimeout, c.retries, got, c.want)
		}
	}
}
