//go:build unix

package checkpoint

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const lockDirEnv = "ROOKSCRIPT_CHECKPOINT_LOCK_DIR"

// lockChild opens a run directory for writing, says so, and holds it until it is killed.
func lockChild(dir string) {
	if _, err := Create(dir, Options{KeepLast: DefaultKeepLast, Resume: true}); err != nil {
		fmt.Fprintln(os.Stderr, "lock child:", err)
		os.Exit(3)
	}
	fmt.Println("locked")
	select {}
}

// TestSecondWriterRefused: while a process writes a run directory, a second writer (another
// process, or another Create/Open in the same one) is refused with the holder's pid; readers
// are not; the lock goes when the holder closes the run or dies, even by SIGKILL.
func TestSecondWriterRefused(t *testing.T) {
	id := smallIdentity(t)
	dir := filepath.Join(t.TempDir(), "run")

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockDirEnv+"="+dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "locked\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("lock child said %q; stderr: %s", line, stderr.String())
	}
	var locked *LockedError
	for _, open := range []func() (*Run, error){
		func() (*Run, error) { return Create(dir, Options{KeepLast: DefaultKeepLast, Resume: true}) },
		func() (*Run, error) { return Create(dir, Options{KeepLast: DefaultKeepLast}) },
		func() (*Run, error) { return Open(dir) },
	} {
		_, err := open()
		if !errors.As(err, &locked) || locked.PID != cmd.Process.Pid {
			t.Fatalf("second writer: %v, want a LockedError naming pid %d", err, cmd.Process.Pid)
		}
		wantErr(t, err, dir, fmt.Sprintf("process %d", cmd.Process.Pid), LockFile)
	}
	if _, err := OpenReadOnly(dir); err != nil {
		t.Fatalf("a reader needs no lock: %v", err)
	}

	cmd.Process.Kill() // SIGKILL: no chance to clean up; the kernel drops the flock
	cmd.Wait()
	run, err := Create(dir, Options{KeepLast: DefaultKeepLast, Resume: true})
	if err != nil {
		t.Fatalf("after the holder died: %v", err)
	}
	mustSave(t, run, plainState(t, 1, id, nil))

	// In the same process: a run still open holds the directory.
	_, err = Open(dir)
	if !errors.As(err, &locked) || locked.PID != os.Getpid() {
		t.Fatalf("second writer in the same process: %v", err)
	}
	wantErr(t, err, "this process")

	// A reader reads, and cannot write.
	ro, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := ro.Latest(); err != nil || st.Step != 1 {
		t.Fatalf("read-only Latest: %v", err)
	}
	for what, err := range map[string]error{
		"Save":          func() error { _, err := ro.Save(plainState(t, 2, id, nil)); return err }(),
		"AppendMetrics": ro.AppendMetrics(2, nil),
		"WriteConfig":   ro.WriteConfig(map[string]any{}),
		"RewindMetrics": func() error { _, err := ro.RewindMetrics(&State{MetricsBytes: -1}); return err }(),
	} {
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("read-only %s: %v, want ErrReadOnly", what, err)
		}
	}

	if err := run.Close(); err != nil {
		t.Fatal(err)
	}
	if err := run.AppendMetrics(2, nil); !errors.Is(err, ErrReadOnly) {
		t.Errorf("AppendMetrics after Close: %v", err)
	}
	run, err = Open(dir)
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	run.Close()
}
