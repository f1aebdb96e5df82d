package main

import (
	"path/filepath"
	"regexp"
	"testing"
)

// TestPrimitivesKilledBetweenPassAndStep: a recipe of primitives killed (SIGKILL) after
// forward_backward and before opt:step, then resumed, ends with the weights of a run never
// killed, bit for bit: the accumulated gradient is not state, the last checkpoint is.
func TestPrimitivesKilledBetweenPassAndStep(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	recipe, err := filepath.Abs("testdata/primitives_kill.lua")
	if err != nil {
		t.Fatal(err)
	}
	hash := regexp.MustCompile(`policy ([0-9a-f]{64})`)
	code, out, errOut := rookscript(t, tmp, nil, recipe, "run_dir="+filepath.Join(tmp, "straight"))
	wantExit(t, "straight run", code, 0, out, errOut)
	want := hash.FindStringSubmatch(out)
	if want == nil {
		t.Fatalf("no policy hash in:\n%s", out)
	}
	killed := filepath.Join(tmp, "killed")
	code, out, errOut = rookscript(t, tmp, nil, recipe, "run_dir="+killed, "kill_at=3")
	if code == 0 || hash.MatchString(out) {
		t.Fatalf("the run was not killed at step 3: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = rookscript(t, tmp, nil, recipe, "resume="+killed, "kill_at=0")
	wantExit(t, "resume", code, 0, out, errOut)
	wantContains(t, "stdout", out, "at step 2")
	if got := hash.FindStringSubmatch(out); got == nil || got[1] != want[1] {
		t.Fatalf("resumed after a kill between forward_backward and opt:step: %v, want the straight run's %s\n%s", got, want[1], out)
	}
}
