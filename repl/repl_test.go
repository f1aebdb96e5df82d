//go:build linux

package repl

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/rookscript/rookscript/luabind"
)

// The REPL is tested as a user meets it: in a child process whose terminal is a pseudo-
// terminal, typing keys (tab, Ctrl-C, Ctrl-D) and reading the screen.

func TestMain(m *testing.M) {
	if os.Getenv("ROOKSCRIPT_REPL_CHILD") == "1" {
		env, err := luabind.New(luabind.Options{Quiet: true})
		if err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
		if err := Run(Config{Env: env}); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// openPTY returns the master side and the path of the slave side of a new pseudo-terminal.
func openPTY(t *testing.T) (*os.File, string) {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals on this machine: %v", err)
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatal(e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatal(e)
	}
	// A real terminal has a size; liner treats a 0-column one as no terminal at all.
	size := [4]uint16{24, 80, 0, 0}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCSWINSZ, uintptr(unsafe.Pointer(&size))); e != 0 {
		t.Fatal(e)
	}
	return master, fmt.Sprintf("/dev/pts/%d", n)
}

// screen collects everything the child writes.
type screen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitFor waits until the screen holds want after position from, and returns the position
// just past it.
func (s *screen) waitFor(t *testing.T, from int, want string) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		out := s.String()
		if from <= len(out) {
			if i := strings.Index(out[from:], want); i >= 0 {
				return from + i + len(want)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %q; screen so far:\n%q", want, s.String())
	return 0
}

func TestREPLInATerminal(t *testing.T) {
	master, slavePath := openPTY(t)
	defer master.Close()
	slave, err := os.OpenFile(slavePath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "ROOKSCRIPT_REPL_CHILD=1", "TERM=xterm", "ROOKSCRIPT_HISTORY=")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	var scr screen
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			scr.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	typeKeys := func(s string) {
		if _, err := master.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	pos := scr.waitFor(t, 0, "rook> ")

	// Tab completion of module names and of methods.
	typeKeys("rook.grp\t")
	pos = scr.waitFor(t, pos, "rook.grpo")
	typeKeys(".defaults().epsilon\r")
	pos = scr.waitFor(t, pos, "0.2")

	// Multi-line input continues while the chunk is open.
	typeKeys("function triple(x)\r")
	pos = scr.waitFor(t, pos, "...")
	typeKeys("  return 3 * x\rend\r")
	pos = scr.waitFor(t, pos, "rook> ")
	typeKeys("triple(14)\r")
	pos = scr.waitFor(t, pos, "42")

	// Ctrl-C cancels a running call and the session goes on.
	typeKeys("while true do end\r")
	time.Sleep(300 * time.Millisecond)
	typeKeys("\x03")
	pos = scr.waitFor(t, pos, "interrupted")
	typeKeys("triple(2)\r")
	pos = scr.waitFor(t, pos, "6")

	// Ctrl-D at an empty prompt exits cleanly.
	typeKeys("\x04")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("REPL exited with %v; screen:\n%s", err, scr.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("REPL did not exit on Ctrl-D")
	}
}

func TestCompletion(t *testing.T) {
	env, err := luabind.New(luabind.Options{Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if _, _, err := env.Eval(t.Context(), `rook = require("rook"); m = rook.load("random:tiny")`); err != nil {
		t.Fatal(err)
	}
	for line, want := range map[string]string{
		"rook.lo":          "rook.load",
		"x = rook.grpo.st": "x = rook.grpo.step",
		"m:roll":           "m:rollout",
		"print(m:gen":      "print(m:generate",
	} {
		got := env.Complete(line)
		if len(got) == 0 || got[0] != want {
			t.Errorf("Complete(%q) = %v, want %q first", line, got, want)
		}
	}
}
