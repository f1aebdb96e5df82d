package main

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestFeaturesKilledAndResumed: the main job with each of the RL features on — entropy-selected
// tokens, the cispo and sapo losses, soft overlong punishment, dynamic sampling — killed
// (SIGKILL) after step 3 of 5 and resumed ends with the weights of a run never killed, bit for
// bit (DESIGN §6.7), and every step starts at ratio 1 (§6.1: rook.grpo.step raises otherwise).
func TestFeaturesKilledAndResumed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		settings []string
	}{
		{"top_entropy_quantile", []string{"top_entropy_quantile=0.3", "entropy_coef=0.01"}},
		{"cispo", []string{"loss_type=cispo", "epsilon_high=2"}},
		{"sapo", []string{"loss_type=sapo"}},
		{"soft_overlong", []string{"reward.soft_overlong.soft_punish_cache=4"}},
		{"dynamic_sampling", []string{"dynamic_sampling=true", "max_draws=2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tmp := t.TempDir()
			run := func(dir string) []string {
				return tinyGRPO(filepath.Join(tmp, dir), append([]string{"steps=5", "save_every=1"}, c.settings...)...)
			}
			code, out, errOut := rookscript(t, tmp, nil, run("straight")...)
			wantExit(t, "straight run", code, 0, out, errOut)

			killed := start(t, tmp, nil, run("killed")...)
			killed.waitFor(t, "step 3/5")
			killed.signal(t, syscall.SIGKILL)
			killed.wait()
			code, out, errOut = rookscript(t, tmp, nil, grpoRecipe, "resume="+filepath.Join(tmp, "killed"))
			wantExit(t, "resume after SIGKILL", code, 0, out, errOut)
			wantContains(t, "stdout", out, "resumed "+filepath.Join(tmp, "killed"))

			for _, f := range []string{"model/model.safetensors", "optimizer.safetensors"} {
				a, errA := os.ReadFile(filepath.Join(tmp, "straight", "checkpoints", "step-00000005", f))
				b, errB := os.ReadFile(filepath.Join(tmp, "killed", "checkpoints", "step-00000005", f))
				if errA != nil || errB != nil {
					t.Fatalf("%s: %v %v", f, errA, errB)
				}
				if !bytes.Equal(a, b) {
					t.Errorf("%s after step 5: the killed and resumed run differs from the straight one", f)
				}
			}
		})
	}
}
