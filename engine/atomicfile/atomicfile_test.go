package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestWriteReplacesOrLeavesIntact(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.txt")
	if err := WriteBytes(p, []byte("old")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(p, func(w io.Writer) error {
		w.Write([]byte("half of the new"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v does not wrap the writer's", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Fatalf("a failed write changed the file to %q", b)
	}
	if err := WriteBytes(p, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "new" {
		t.Fatalf("file holds %q", b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

const childTargetEnv = "ROOKSCRIPT_ATOMICFILE_CHILD_TARGET"

// TestMain lets the test binary be a writer that is killed mid-write.
func TestMain(m *testing.M) {
	if path := os.Getenv(childTargetEnv); path != "" {
		writeForever(path)
	}
	os.Exit(m.Run())
}

// writeForever starts writing path, says so, and never finishes: what it wrote is still in
// Write's buffer, so its temporary is empty, as a dataset's is when generation is killed.
func writeForever(path string) {
	err := Write(path, func(w io.Writer) error {
		io.WriteString(w, "P: half a row")
		fmt.Println("writing")
		for { // a sleeping goroutine, not select{}: the runtime ends a process whose goroutines all block forever
			time.Sleep(time.Hour)
		}
	})
	fmt.Fprintln(os.Stderr, "writer child:", err)
	os.Exit(3)
}

// startWriter runs writeForever in a child process until it says it is writing.
func startWriter(t *testing.T, path string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childTargetEnv+"="+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "writing\n" {
		t.Fatalf("writer child said %q; stderr: %s", line, stderr.String())
	}
	return cmd
}

// names lists dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range entries {
		n = append(n, e.Name())
	}
	return n
}

// A writer killed mid-write (SIGKILL: no defer runs) leaves its empty temporary; the next write
// of the same target removes it. While the writer lives, its temporary is left alone.
func TestWriteRemovesWhatAKilledWriterLeft(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "train.txt")
	child := startWriter(t, path)
	left := names(t, dir)
	if len(left) != 1 || !strings.HasPrefix(left[0], ".tmp-train.txt-") {
		t.Fatalf("the writer's temporary is not there: %v", left)
	}
	if fi, err := os.Stat(filepath.Join(dir, left[0])); err != nil || fi.Size() != 0 {
		t.Fatalf("the temporary is not the empty file a killed generation leaves: %v %v", fi, err)
	}

	if err := WriteBytes(path, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); !slices.Contains(got, left[0]) || len(got) != 2 {
		t.Fatalf("a live writer's temporary was touched: %v", got)
	}

	child.Process.Kill()
	child.Wait()
	if err := WriteBytes(path, []byte("two")); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"train.txt"}) {
		t.Errorf("after the writer was killed and the target written again: %v", got)
	}
	if b, _ := os.ReadFile(path); string(b) != "two" {
		t.Errorf("target holds %q", b)
	}
}

// Only the target's own temporaries are swept, and only unlocked ones: another target's (a
// name that extends this one's included), foreign names and links stay.
func TestWriteSweepsOnlyItsTargetsTemporaries(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.txt")
	for _, c := range []struct {
		name  string
		dir   bool
		swept bool
	}{
		{".tmp-f.txt-42", false, true},
		{".tmp-f.txt-43", true, true}, // a killed TempDir of the same target
		{".tmp-f.txt-", false, false},
		{".tmp-f.txt-1-2", false, false}, // a temporary of "f.txt-1"
		{".tmp-f.txt-12x", false, false}, // not os.CreateTemp's
		{".tmp-g.txt-44", false, false},  // another target's
		{"f.txt-45", false, false},       // not a temporary
		{".tmp-f.txt.bak-46", false, false},
	} {
		p := filepath.Join(dir, c.name)
		if c.dir {
			os.Mkdir(p, 0o700)
			os.WriteFile(filepath.Join(p, "x"), []byte("x"), 0o644)
		} else {
			os.WriteFile(p, nil, 0o644)
		}
		t.Cleanup(func() {
			if _, err := os.Lstat(p); os.IsNotExist(err) != c.swept {
				t.Errorf("%s: swept = %v, want %v", c.name, os.IsNotExist(err), c.swept)
			}
		})
	}
	os.Symlink(filepath.Join(dir, ".tmp-g.txt-44"), filepath.Join(dir, ".tmp-f.txt-47"))
	if err := WriteBytes(path, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, ".tmp-f.txt-47")); err != nil {
		t.Errorf("a link was swept: %v", err)
	}
}

// A temporary directory's builder writes into it with Write (the directory is locked, which
// must not block Write's own lock), while another builder of the same target, live, keeps its
// own; a released, unrenamed one is swept by the next.
func TestTempDir(t *testing.T) {
	root := t.TempDir()
	target := filepath.Join(root, "model")
	a, releaseA, err := TempDir(target)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(a), ".tmp-model-") || filepath.Dir(a) != root {
		t.Fatalf("temporary directory %s", a)
	}
	done := make(chan error)
	go func() { done <- WriteBytes(filepath.Join(a, "config.json"), []byte("{}")) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Write into a temporary directory blocked on its builder's lock")
	}
	b, releaseB, err := TempDir(target)
	if err != nil || b == a {
		t.Fatalf("second builder: %s, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(a, "config.json")); err != nil {
		t.Fatalf("a live builder's directory was swept: %v", err)
	}
	releaseA() // as a killed builder: released, never renamed
	releaseB()
	c, releaseC, err := TempDir(target)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseC()
	if got := names(t, root); !slices.Equal(got, []string{filepath.Base(c)}) {
		t.Errorf("after two abandoned builds: %v, want only %s", got, filepath.Base(c))
	}
}
