package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sampleLines returns the samples.jsonl lines of steps 1..n, two completions a step: a P:
// one with every field, and an A: one with no components and no advantage.
func sampleLines(n int) []string {
	var ls []string
	for s := 1; s <= n; s++ {
		ls = append(ls,
			fmt.Sprintf(`{"step":%d,"index":%d,"group":3,"task":"P","prompt":"P: 4k3/8/8/8/8/8/8/4K3 w - - 0 1      ","completion":"M: e2e4 d2d4  E: 0.3 0.1  B: e2e4","tokens":31,"truncated":true,"reward":-0.3,"components":{"legal":1,"format":0},"advantage":1.21}`, s, 10+s),
			fmt.Sprintf(`{"step":%d,"index":%d,"group":4,"task":"A","prompt":"A: 4k3/8/8/8/8/8/8/4K3 w - - 0 1+e1e2+e1e2+","completion":"4k3/8/8/8/8/8/8/8 b\n - -","tokens":12,"truncated":false,"reward":0.5}`, s, 20+s))
	}
	return ls
}

func TestSamples(t *testing.T) {
	// The P: sample of step 12 as the brief shows it, then its A: sample.
	step12 := "step 12 · completion 22 (group 3, P) · reward -0.300 (format 0, legal 1) · advantage +1.21 · 31 tokens, TRUNCATED\n" +
		"  prompt      P: 4k3/8/8/8/8/8/8/4K3 w - - 0 1\n" +
		"  completion  M: e2e4 d2d4  E: 0.3 0.1  B: e2e4\n" +
		"\n" +
		"step 12 · completion 32 (group 4, A) · reward 0.500 · 12 tokens\n" +
		"  prompt      A: 4k3/8/8/8/8/8/8/4K3 w - - 0 1+e1e2+e1e2+\n" +
		`  completion  4k3/8/8/8/8/8/8/8 b\n - -` + "\n"
	tests := []struct {
		name   string
		lines  []string // samples.jsonl of RUN; nil for none
		args   []string // after "samples"; RUN is the run directory
		code   int
		stdout string   // exactly, when code is 0
		steps  []int    // or: the steps whose samples stdout shows, in order
		stderr []string // substrings; RUN is the run directory
	}{
		{name: "default: the last step", lines: sampleLines(12), args: []string{"RUN"}, stdout: step12},
		{name: "--step N", lines: sampleLines(12), args: []string{"RUN", "--step", "5"}, steps: []int{5}},
		{name: "--step=N before the directory", lines: sampleLines(12), args: []string{"--step=12", "RUN"}, stdout: step12},
		{name: "--last K", lines: sampleLines(12), args: []string{"RUN", "--last", "3"}, steps: []int{10, 11, 12}},
		{name: "--last beyond the run: every step", lines: sampleLines(2), args: []string{"RUN", "--last=9"}, steps: []int{1, 2}},
		{name: "a step with no samples", lines: append(sampleLines(3), sampleLines(9)[12:]...), args: []string{"RUN", "--step", "5"}, code: 2,
			stderr: []string{"RUN/samples.jsonl has no samples of step 5 (it has steps 1–3, 7–9)"}},
		{name: "malformed line: file and line", lines: append(sampleLines(2)[:3:3], `{"step":2,"reward":"high"}`), args: []string{"RUN"}, code: 1,
			stderr: []string{"RUN/samples.jsonl:4:"}},
		{name: "no samples.jsonl", args: []string{"RUN"}, code: 2,
			stderr: []string{"RUN/samples.jsonl does not exist"}},
		{name: "empty samples.jsonl", lines: []string{}, args: []string{"RUN"}, code: 2,
			stderr: []string{"RUN/samples.jsonl holds no samples yet"}},
		{name: "missing run directory", args: []string{"RUN/nope"}, code: 2,
			stderr: []string{"run directory RUN/nope does not exist"}},
		{name: "no run directory", args: []string{"--last", "2"}, code: 2, stderr: []string{"no run directory given", "Usage:"}},
		{name: "two run directories", lines: sampleLines(1), args: []string{"RUN", "RUN"}, code: 2, stderr: []string{"one run directory"}},
		{name: "--step and --last", lines: sampleLines(1), args: []string{"RUN", "--step", "1", "--last", "2"}, code: 2, stderr: []string{"give one of them"}},
		{name: "--last 0", lines: sampleLines(1), args: []string{"RUN", "--last", "0"}, code: 2, stderr: []string{"integer ≥ 1"}},
		{name: "--step not a number", lines: sampleLines(1), args: []string{"RUN", "--step", "x"}, code: 2, stderr: []string{"want a step number"}},
		{name: "--step without a value", lines: sampleLines(1), args: []string{"RUN", "--step"}, code: 2, stderr: []string{"--step needs a number"}},
		{name: "unknown flag", lines: sampleLines(1), args: []string{"RUN", "--all"}, code: 2, stderr: []string{"unknown flag --all"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.lines != nil {
				text := strings.Join(tc.lines, "\n")
				if len(tc.lines) > 0 {
					text += "\n"
				}
				mustWrite(t, filepath.Join(dir, "samples.jsonl"), text)
			}
			args := []string{"samples"}
			for _, a := range tc.args {
				args = append(args, strings.ReplaceAll(a, "RUN", dir))
			}
			var stdout, stderr bytes.Buffer
			code := run(args, &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr.String())
			}
			for _, s := range tc.stderr {
				if s = strings.ReplaceAll(s, "RUN", dir); !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr does not mention %q:\n%s", s, stderr.String())
				}
			}
			if tc.code != 0 {
				if stdout.Len() > 0 {
					t.Errorf("stdout %q on failure", stdout.String())
				}
				return
			}
			if stderr.Len() > 0 {
				t.Errorf("unexpected stderr:\n%s", stderr.String())
			}
			if tc.stdout != "" && stdout.String() != tc.stdout {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout.String(), tc.stdout)
			}
			if tc.steps != nil {
				var got []string
				for _, ln := range strings.Split(stdout.String(), "\n") {
					if strings.HasPrefix(ln, "step ") {
						got = append(got, strings.SplitN(ln, " · ", 2)[0])
					}
				}
				var want []string
				for _, s := range tc.steps {
					want = append(want, fmt.Sprintf("step %d", s), fmt.Sprintf("step %d", s))
				}
				if strings.Join(got, ",") != strings.Join(want, ",") {
					t.Errorf("headers %v, want %v:\n%s", got, want, stdout.String())
				}
			}
		})
	}
}
