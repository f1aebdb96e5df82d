// Package disttest runs a test binary's tests as the ranks of an mpirun, for the packages
// whose data-parallel code needs more than one rank to test.
package disttest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Run starts np ranks of this test binary under mpirun, each running the test named child
// (which calls Child first), with env added to theirs, and returns their combined output and
// mpirun's error. As root (CI), mpirun needs --allow-run-as-root; --oversubscribe lets it
// start more ranks than the machine has cores. A job still running after timeout fails the
// test.
func Run(t *testing.T, np int, child string, timeout time.Duration, env ...string) (string, error) {
	t.Helper()
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Fatal("mpirun is not installed: make setup installs Open MPI (openmpi-bin, libopenmpi-dev)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args := []string{"--oversubscribe", "-np", fmt.Sprint(np), "-x", "DIST_CHILD=" + child}
	for _, e := range env {
		args = append(args, "-x", e)
	}
	if os.Geteuid() == 0 {
		args = append([]string{"--allow-run-as-root"}, args...)
	}
	cmd := exec.CommandContext(ctx, "mpirun", append(args, os.Args[0], "-test.run", "^"+child+"$", "-test.v")...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("mpirun -np %d %s did not end within %s:\n%s", np, child, timeout, out)
	}
	return string(out), err
}

// Child skips the test unless Run started this process to run it as a rank.
func Child(t *testing.T) {
	if os.Getenv("DIST_CHILD") != t.Name() {
		t.Skip("a rank of a multi-rank test (its parent runs it under mpirun)")
	}
}
