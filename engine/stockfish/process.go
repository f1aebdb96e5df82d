package stockfish

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rookscript/rookscript/engine/chess"
)

// killWait bounds how long a killed engine may take to be reaped. SIGKILL to its process
// group ends it and every child at once, so this is only reached by a process the kernel
// cannot end (uninterruptible I/O); it is then abandoned and reported.
const killWait = 5 * time.Second

// stderrWait is how long a dead engine's last stderr bytes are waited for, so that its own
// message reaches the error. A child that keeps stderr open costs this once.
const stderrWait = 500 * time.Millisecond

// engineProc is one running UCI engine. It is used by one worker at a time;
// kill may be called from anywhere.
//
// The engine runs in a process group of its own, so kill reaches every process it started
// (a wrapper script's children included). Its stdin, stdout and stderr are pipes this
// process owns and closes itself: no wait depends on another process closing a pipe, and
// every write has a deadline.
type engineProc struct {
	path    string
	cmd     *exec.Cmd
	stdin   *os.File // write end of the engine's stdin
	stdout  *os.File // read end of its stdout
	errPipe *os.File // read end of its stderr
	lines   chan string
	stderr  *tailBuffer
	errDone chan struct{} // closed when stderr is drained or closed
	exited  chan struct{} // closed when the process has been reaped
	quit    chan struct{} // closed by kill; unblocks the stdout reader
	waitErr error         // the exit status; valid after exited
	killed  sync.Once
	name    string // from "id name"
	multipv int    // current MultiPV option
}

// startEngine launches the binary (a path FindEngine resolved) and completes the UCI
// handshake within ctx.
func startEngine(ctx context.Context, cfg Config) (*engineProc, error) {
	e, err := spawn(cfg.Path)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*engineProc, error) {
		e.kill()
		return nil, &StartError{Path: cfg.Path, Step: "handshake", Err: err}
	}
	if err := e.send(ctx, "uci"); err != nil {
		return fail(err)
	}
	err = e.waitFor(ctx, func(l string) bool {
		if n, ok := strings.CutPrefix(l, "id name "); ok {
			e.name = strings.TrimSpace(n)
		}
		return l == "uciok"
	})
	if err != nil {
		return fail(err)
	}
	for _, opt := range []string{
		fmt.Sprintf("setoption name Threads value %d", cfg.Threads),
		fmt.Sprintf("setoption name Hash value %d", cfg.HashMB),
		fmt.Sprintf("setoption name MultiPV value %d", cfg.MultiPV),
	} {
		if err := e.send(ctx, opt); err != nil {
			return fail(err)
		}
	}
	e.multipv = cfg.MultiPV
	if err := e.sync(ctx); err != nil {
		return fail(err)
	}
	if e.name == "" {
		e.name = "unknown UCI engine"
	}
	return e, nil
}

// spawn starts the process in its own process group with pipes for its three streams.
func spawn(path string) (*engineProc, error) {
	var pipes [3][2]*os.File // stdin, stdout, stderr: [read end, write end]
	closeAll := func() {
		for _, p := range pipes {
			for _, f := range p {
				if f != nil {
					f.Close()
				}
			}
		}
	}
	for i := range pipes {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll()
			return nil, &StartError{Path: path, Step: "making pipes for", Err: err}
		}
		pipes[i] = [2]*os.File{r, w}
	}
	cmd := exec.Command(path)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pipes[0][0], pipes[1][1], pipes[2][1]
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, &StartError{Path: path, Step: "starting", Err: err}
	}
	// The child holds its own copies; ours would keep its stdin open and hide its exit.
	pipes[0][0].Close()
	pipes[1][1].Close()
	pipes[2][1].Close()
	e := &engineProc{path: path, cmd: cmd, stdin: pipes[0][1], stdout: pipes[1][0], errPipe: pipes[2][0],
		lines: make(chan string, 256), stderr: &tailBuffer{max: 2048},
		errDone: make(chan struct{}), exited: make(chan struct{}), quit: make(chan struct{})}
	go e.read()
	go func() {
		defer close(e.errDone)
		_, _ = io.Copy(e.stderr, e.errPipe)
	}()
	go func() {
		// Every stream is an *os.File, so Wait waits for the process alone.
		e.waitErr = cmd.Wait()
		close(e.exited)
	}()
	return e, nil
}

func (e *engineProc) read() {
	defer close(e.lines)
	sc := bufio.NewScanner(e.stdout)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		select {
		case e.lines <- sc.Text():
		case <-e.quit:
			return
		}
	}
}

func (e *engineProc) pid() int {
	if e.cmd.Process == nil {
		return 0
	}
	return e.cmd.Process.Pid
}

// send writes one command; the write gives up at ctx's deadline, so an engine that stopped
// reading cannot block a worker.
func (e *engineProc) send(ctx context.Context, cmd string) error {
	d, _ := ctx.Deadline() // zero: no deadline, clearing an earlier one
	_ = e.stdin.SetWriteDeadline(d)
	if _, err := io.WriteString(e.stdin, cmd+"\n"); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return &NoAnswerError{Command: cmd, Err: context.DeadlineExceeded}
		}
		return e.deathError(fmt.Sprintf("writing %q: %v", cmd, err))
	}
	return nil
}

// deathError describes a dead engine: its exit status and the end of its stderr.
func (e *engineProc) deathError(what string) error {
	var status string
	select {
	case <-e.exited:
		if e.waitErr != nil {
			status = e.waitErr.Error()
		} else {
			status = "exit status 0"
		}
	case <-time.After(stderrWait):
		status = "still running"
	}
	select {
	case <-e.errDone:
	case <-time.After(stderrWait):
	}
	return &ExitError{Doing: what, Status: status, Stderr: strings.TrimSpace(e.stderr.String())}
}

// waitFor reads lines until done returns true, the engine dies or ctx ends.
func (e *engineProc) waitFor(ctx context.Context, done func(string) bool) error {
	for {
		select {
		case l, ok := <-e.lines:
			if !ok {
				return e.deathError("")
			}
			if done(strings.TrimSpace(l)) {
				return nil
			}
		case <-e.exited:
			return e.deathError("")
		case <-ctx.Done():
			return &NoAnswerError{Stderr: strings.TrimSpace(e.stderr.String()), Err: ctx.Err()}
		}
	}
}

// sync is the isready/readyok round trip.
func (e *engineProc) sync(ctx context.Context) error {
	if err := e.send(ctx, "isready"); err != nil {
		return err
	}
	return e.waitFor(ctx, func(l string) bool { return l == "readyok" })
}

// analyse searches pos to a fixed depth and returns one line per MultiPV rank.
// Every search starts with ucinewgame (cleared hash and history), so the
// result depends on the position, depth and MultiPV only, not on what this
// process searched before: that is what makes rewards deterministic.
func (e *engineProc) analyse(ctx context.Context, pos *chess.Position, depth, multipv int) ([]Line, error) {
	if multipv != e.multipv {
		if err := e.send(ctx, fmt.Sprintf("setoption name MultiPV value %d", multipv)); err != nil {
			return nil, err
		}
		e.multipv = multipv
	}
	if err := e.send(ctx, "ucinewgame"); err != nil {
		return nil, err
	}
	if err := e.sync(ctx); err != nil {
		return nil, err
	}
	fen := pos.FEN()
	if err := e.send(ctx, "position fen "+fen); err != nil {
		return nil, err
	}
	if err := e.send(ctx, fmt.Sprintf("go depth %d", depth)); err != nil {
		return nil, err
	}
	type cand struct {
		info  InfoLine
		exact bool
	}
	latest := map[int]cand{}
	var perr error
	err := e.waitFor(ctx, func(l string) bool {
		if strings.HasPrefix(l, "bestmove") {
			return true
		}
		if !strings.HasPrefix(l, "info ") || !strings.Contains(l, " pv ") {
			return false
		}
		in, err := ParseInfo(l)
		if err != nil {
			perr = err
			return false
		}
		if !in.HasScore || len(in.PV) == 0 {
			return false
		}
		// Keep the latest exact line per rank; a bound line only until an
		// exact one arrives.
		if c, ok := latest[in.MultiPV]; !ok || in.Bound == "" || !c.exact || in.Depth > c.info.Depth {
			latest[in.MultiPV] = cand{in, in.Bound == ""}
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	if perr != nil {
		return nil, fmt.Errorf("protocol error: %w", perr)
	}
	ranks := make([]int, 0, len(latest))
	for k := range latest {
		ranks = append(ranks, k)
	}
	sort.Ints(ranks)
	want := min(multipv, pos.NumLegalMoves())
	if len(ranks) != want || (len(ranks) > 0 && ranks[len(ranks)-1] != want) {
		return nil, fmt.Errorf("protocol error: got multipv ranks %v for %s, want 1..%d", ranks, fen, want)
	}
	out := make([]Line, len(ranks))
	for i, k := range ranks {
		in := latest[k].info
		if !pos.IsLegal(in.PV[0]) {
			return nil, fmt.Errorf("protocol error: engine proposed %q, not legal in %s", in.PV[0], fen)
		}
		out[i] = Line{Move: in.PV[0], Score: in.Score, Depth: in.Depth, PV: in.PV}
	}
	return out, nil
}

// kill stops the engine for good: SIGKILL to its whole process group, then a reap bounded
// by killWait. It returns false when the process could not be reaped in that time (it is
// then abandoned). Our pipe ends are closed either way, which ends the reader goroutines
// even when a process outside the group still holds the other ends.
func (e *engineProc) kill() (reaped bool) {
	reaped = true
	e.killed.Do(func() {
		close(e.quit)
		if pid := e.pid(); pid > 0 {
			_ = syscall.Kill(-pid, syscall.SIGKILL) // the group: pgid = pid (Setpgid)
			_ = e.cmd.Process.Kill()
		}
		_ = e.stdin.Close()
		select {
		case <-e.exited:
		case <-time.After(killWait):
			reaped = false
		}
		_ = e.stdout.Close()
		_ = e.errPipe.Close()
	})
	return reaped
}

// tailBuffer keeps the last max bytes written (the engine's stderr).
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
