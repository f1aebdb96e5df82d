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

	"github.com/rookscript/rookscript/engine/chess"
)

// errEngineExited marks a dead engine process (crash or kill).
var errEngineExited = errors.New("engine process exited")

// engineProc is one running UCI engine. It is used by one worker at a time;
// kill may be called from anywhere.
type engineProc struct {
	path    string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan string
	quit    chan struct{} // closed by kill; unblocks the reader
	killed  sync.Once
	stderr  *tailBuffer
	name    string // from "id name"
	multipv int    // current MultiPV option
}

// startEngine launches the binary and completes the UCI handshake within ctx.
func startEngine(ctx context.Context, cfg Config) (*engineProc, error) {
	if st, err := os.Stat(cfg.Path); err != nil {
		return nil, fmt.Errorf("stockfish: engine binary %q: %w", cfg.Path, err)
	} else if st.IsDir() {
		return nil, fmt.Errorf("stockfish: engine binary %q is a directory", cfg.Path)
	}
	cmd := exec.Command(cfg.Path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("stockfish: %s: %w", cfg.Path, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("stockfish: %s: %w", cfg.Path, err)
	}
	e := &engineProc{path: cfg.Path, cmd: cmd, stdin: stdin, lines: make(chan string, 256),
		quit: make(chan struct{}), stderr: &tailBuffer{max: 2048}}
	cmd.Stderr = e.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("stockfish: starting %q: %w", cfg.Path, err)
	}
	go e.read(stdout)
	fail := func(err error) (*engineProc, error) {
		e.kill()
		return nil, fmt.Errorf("stockfish: %q handshake: %w", cfg.Path, err)
	}
	if err := e.send("uci"); err != nil {
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
		if err := e.send(opt); err != nil {
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

func (e *engineProc) read(r io.Reader) {
	defer close(e.lines)
	sc := bufio.NewScanner(r)
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

func (e *engineProc) send(cmd string) error {
	if _, err := io.WriteString(e.stdin, cmd+"\n"); err != nil {
		return fmt.Errorf("%w: writing %q: %v", errEngineExited, cmd, err)
	}
	return nil
}

// waitFor reads lines until done returns true, the engine dies or ctx ends.
func (e *engineProc) waitFor(ctx context.Context, done func(string) bool) error {
	for {
		select {
		case l, ok := <-e.lines:
			if !ok {
				msg := strings.TrimSpace(e.stderr.String())
				if msg != "" {
					return fmt.Errorf("%w (stderr: %s)", errEngineExited, msg)
				}
				return errEngineExited
			}
			if done(strings.TrimSpace(l)) {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("engine did not answer: %w", ctx.Err())
		}
	}
}

// sync is the isready/readyok round trip.
func (e *engineProc) sync(ctx context.Context) error {
	if err := e.send("isready"); err != nil {
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
		if err := e.send(fmt.Sprintf("setoption name MultiPV value %d", multipv)); err != nil {
			return nil, err
		}
		e.multipv = multipv
	}
	if err := e.send("ucinewgame"); err != nil {
		return nil, err
	}
	if err := e.sync(ctx); err != nil {
		return nil, err
	}
	fen := pos.FEN()
	if err := e.send("position fen " + fen); err != nil {
		return nil, err
	}
	if err := e.send(fmt.Sprintf("go depth %d", depth)); err != nil {
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

// kill stops the process for good (SIGKILL) and reaps it.
func (e *engineProc) kill() {
	e.killed.Do(func() {
		close(e.quit)
		_ = e.stdin.Close()
		if e.cmd.Process != nil {
			_ = e.cmd.Process.Kill()
		}
		_ = e.cmd.Wait()
	})
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
