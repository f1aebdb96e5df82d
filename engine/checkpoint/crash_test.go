//go:build unix

package checkpoint

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/gpt2/gpt2test"
	"github.com/rookscript/rookscript/engine/optim"
)

// The crash test re-executes the test binary as a process that saves checkpoints in a loop
// (see TestMain) and kills it with SIGKILL.
const (
	crashDirEnv   = "ROOKSCRIPT_CHECKPOINT_CRASH_DIR"
	crashRefEnv   = "ROOKSCRIPT_CHECKPOINT_CRASH_REF"
	crashStageEnv = "ROOKSCRIPT_CHECKPOINT_CRASH_STAGE"
)

// crashConfig is larger than tinyConfig so that a save takes long enough to be hit mid-way.
var crashConfig = func() gpt2.Config {
	c := gpt2test.Tiny()
	c.NumHeads, c.Channels = 4, 64
	return c
}()

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		crashChild(dir, os.Getenv(crashRefEnv), os.Getenv(crashStageEnv))
	}
	if dir := os.Getenv(lockDirEnv); dir != "" {
		lockChild(dir)
	}
	os.Exit(m.Run())
}

// crashState is the checkpoint content of step: a pure function of step, so whichever
// checkpoint survives can be checked element by element. Even steps carry a synced reference.
func crashState(id Identity, step int) *State {
	p := gpt2.RandomParams(crashConfig, uint64(step))
	m, v := make([]float32, len(p)), make([]float32, len(p))
	for i := range p {
		m[i], v[i] = p[i]*0.5, p[i]*p[i]
	}
	st := &State{Step: step, Model: crashConfig, Params: p, Reference: id,
		Optimizer: OptimizerState{Config: optim.DefaultAdamW(), Steps: step, M: m, V: v},
		Metrics:   map[string]float64{"score": math.Sin(float64(step))},
		Cursor:    []byte(strconv.Itoa(step))}
	if err := st.SetRNG("seed", uint64(step)*0x9e3779b97f4a7c15); err != nil {
		panic(err)
	}
	if step%2 == 0 {
		st.ReferenceParams = gpt2.RandomParams(crashConfig, 1000+uint64(step))
		st.Reference.Syncs = []Sync{{Step: step, Hash: gpt2.ParamsHash(crashConfig, st.ReferenceParams), Time: time.Unix(0, 0).UTC()}}
	}
	return st
}

// crashChild saves checkpoints until it is killed, announcing each save on stdout. With a
// stage it arms a hook after its first save that SIGKILLs itself when Save reaches that stage;
// without one, every third save replaces the checkpoint just written.
func crashChild(dir, refDir, stage string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(3)
	}
	run, err := Create(dir, Options{KeepLast: 2, BestMetric: "score", BestMode: "max", Resume: true})
	if err != nil {
		fail(err)
	}
	id, _, _, err := NewReference(refDir)
	if err != nil {
		fail(err)
	}
	step := 0
	if st, err := run.Latest(); err == nil {
		step = st.Step
	} else if !errors.Is(err, ErrNoCheckpoint) {
		fail(err)
	}
	replaceOnly := stage == "repointed" || stage == "aside" // stages only a replacement reaches
	for i := 0; ; i++ {
		replace := i > 0 && (replaceOnly || (stage == "" && i%3 == 2))
		if !replace {
			step++
		}
		fmt.Printf("begin %d %v\n", step, replace)
		if _, err := run.Save(crashState(id, step)); err != nil {
			fail(err)
		}
		fmt.Printf("saved %d\n", step)
		if i == 0 && stage != "" {
			saveHook = func(s string) {
				if s == stage {
					syscall.Kill(os.Getpid(), syscall.SIGKILL)
					select {}
				}
			}
		}
	}
}

// crashTrial runs one child until it is killed: after kill (a delay following its first
// save) by the parent, or by itself at stage. It returns the last step the child reported
// saved and whether a replacement save was in progress when it died.
func crashTrial(t *testing.T, dir, refDir, stage string, kill time.Duration) (saved int, replacing bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashRefEnv+"="+refDir, crashStageEnv+"="+stage)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(20 * time.Second)
	var killAt <-chan time.Time
	for lines != nil {
		select {
		case ln, ok := <-lines:
			if !ok {
				lines = nil
				break
			}
			f := strings.Fields(ln)
			n, _ := strconv.Atoi(f[1])
			switch f[0] {
			case "begin":
				replacing = f[2] == "true"
			case "saved":
				saved, replacing = n, false
				if stage == "" && killAt == nil {
					killAt = time.After(kill)
				}
			}
		case <-killAt:
			cmd.Process.Signal(syscall.SIGKILL)
			killAt = nil
		case <-timeout:
			cmd.Process.Kill()
			t.Fatalf("stage %q: child still running after 20s (stage never reached?)", stage)
		}
	}
	err = cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die by SIGKILL: %v\n%s", err, stderr.String())
	}
	if saved == 0 {
		t.Fatalf("child was killed before its first save completed\n%s", stderr.String())
	}
	return saved, replacing
}

// checkAfterCrash: Latest loads and verifies, holds exactly what was saved for its step, is
// not older than the last completed save (unless a replacement of it was under way), and
// every checkpoint directory and BEST are loadable too.
func checkAfterCrash(t *testing.T, dir string, id Identity, saved int, replacing bool, what string) int {
	t.Helper()
	run, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	st, err := run.Latest()
	if err != nil {
		t.Fatalf("%s: Latest after the crash: %v", what, err)
	}
	if st.Step < saved && !replacing {
		t.Fatalf("%s: LATEST is step %d, but step %d had been saved", what, st.Step, saved)
	}
	want := crashState(id, st.Step)
	var seed uint64
	if err := st.GetRNG("seed", &seed); err != nil {
		t.Fatal(err)
	}
	if !bitsEqual(st.Params, want.Params) || !bitsEqual(st.Optimizer.M, want.Optimizer.M) || !bitsEqual(st.Optimizer.V, want.Optimizer.V) ||
		st.Optimizer.Steps != st.Step || string(st.Cursor) != strconv.Itoa(st.Step) || seed != uint64(st.Step)*0x9e3779b97f4a7c15 ||
		!bitsEqual(st.ReferenceParams, want.ReferenceParams) {
		t.Fatalf("%s: checkpoint %s does not hold what step %d saved", what, st.Name, st.Step)
	}
	names, err := run.List()
	if err != nil {
		t.Fatal(err)
	}
	best, err := run.Best()
	if err != nil {
		t.Fatalf("%s: BEST: %v", what, err)
	}
	for _, n := range append(names, best) {
		if n == "" {
			continue
		}
		if _, err := run.Load(n); err != nil {
			t.Fatalf("%s: checkpoint %s (of %v, best %q) does not load: %v", what, n, names, best, err)
		}
	}
	return st.Step
}

// TestCrashDuringSave is issue 6 item 4(c): a process saving checkpoints, SIGKILLed at every
// stage of a save and at 8 random moments, always leaves a LATEST that loads and verifies.
func TestCrashDuringSave(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	refDir := writeModel(t, crashConfig, 77)
	id, _, _, err := NewReference(refDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	stages := []string{"tmp", "model", "optimizer", "reference", "state", "repointed", "aside", "renamed", "latest", "best", "pruned"}
	for _, stage := range stages {
		saved, replacing := crashTrial(t, dir, refDir, stage, 0)
		checkAfterCrash(t, dir, id, saved, replacing, "killed at stage "+stage)
	}
	r := rand.New(rand.NewPCG(2024, 6))
	start := time.Now()
	steps := 0
	for trial := range 8 {
		delay := time.Duration(r.IntN(40_000)) * time.Microsecond
		saved, replacing := crashTrial(t, dir, refDir, "", delay)
		steps = checkAfterCrash(t, dir, id, saved, replacing, fmt.Sprintf("random trial %d (killed %v after the first save)", trial, delay))
	}
	t.Logf("8 random kills in %v; latest step %d", time.Since(start).Round(time.Millisecond), steps)

	// The leftovers of killed saves are ignored by List and removed by the next save.
	run, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	mustSave(t, run, crashState(id, steps+1))
	entries, err := os.ReadDir(filepath.Join(dir, "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("leftover %s after a clean save", e.Name())
		}
	}
}
