package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/rookscript/rookscript/engine/device"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/grpo"
	"github.com/rookscript/rookscript/engine/rollout"
	"github.com/rookscript/rookscript/engine/rookworld"
	"github.com/rookscript/rookscript/internal/procmem"
)

// The mem section: the peak memory of a GRPO step against its analytic size (grpo.Plan's
// footprint). Each case runs in a child process (rookbench -mem-case), so that nothing the
// parent holds counts: it sets up, returns what setup left to the system, resets its peak
// (VmHWM) and runs its steps.

type memResult struct {
	Peak      int64          `json:"peak_bytes"` // VmHWM over the steps
	Footprint gpt2.Footprint `json:"footprint"`
	Shape     string         `json:"shape"`
}

// The main job's shapes (recipes/grpo_stable.lua; RookWorld prompts run 40 to 110 tokens).
const (
	mainPrompts, mainGroup, mainPromptLen, mainNew, mainEvalSize = 8, 8, 96, 72, 256
	smallSpec                                                    = "random:small@seed=1"
)

var memCases = []struct{ key, name string }{
	{"grpo_default", "GRPO step of the main job on the default model's architecture"},
	{"grpo_124m", "GRPO step of GPT-2 124M (the grpo section's shapes)"},
}

// runMemCase runs a case in this process and prints its result as JSON.
func runMemCase(name string, threads int) error {
	var r memResult
	var err error
	switch name {
	case "grpo_default": // at the micro-batch the main recipe plans here: its bounds, half the RAM
		var ram int64
		if ram, err = procmem.RAM(); err == nil {
			p := grpo.Plan{Model: gpt2.RandomConfigs["small"], Budget: ram / 2, Prompts: mainPrompts, Group: mainGroup,
				PromptLen: rookworld.MaxPromptTokens, NewTokens: mainNew, Minibatches: 1, Reference: true,
				EvalSlots: mainEvalSize, EvalNewTokens: rookworld.MaxAnswerTokens}
			micro, _, _ := p.MicroBatch()
			r, err = grpoMem(smallSpec, threads, mainPrompts, mainGroup, mainPromptLen, mainNew, micro, 2)
		}
	case "grpo_124m":
		r, err = grpoMem(modelSpec, threads, genPrompts, genGroup, genPromptLen, genNew, 16, 1)
	default:
		err = fmt.Errorf("-mem-case: no case %q", name)
	}
	return cmp.Or(err, json.NewEncoder(os.Stdout).Encode(r))
}

// cpuModel is a model of spec on a CPU backend of its own.
func cpuModel(spec string, threads int) (*gpt2.Model, error) {
	be, err := device.Open("cpu", device.Options{Threads: threads})
	if err != nil {
		return nil, err
	}
	return newModel(be, spec)
}

// grpoMem sets up a GRPO run, ends setup (memory returned, the peak reset) and takes steps
// steps, its peak read after them.
func grpoMem(spec string, threads, prompts, group, promptLen, newTokens, micro, steps int) (
	memResult, error) {
	var r memResult
	policy, err := cpuModel(spec, threads)
	if err != nil {
		return r, err
	}
	step, err := grpoStepper(policy, 1e-6, randomPrompts(prompts, promptLen, policy.Config.VocabSize, 5),
		group, newTokens, micro, nil)
	runtime.GC()
	debug.FreeOSMemory()
	err = cmp.Or(err, procmem.ResetPeak())
	longest := 0
	for i := 0; i < steps && err == nil; i++ {
		_, _, err = step(i, func(b *rollout.Batch) {
			for _, c := range b.Completions {
				longest = max(longest, len(c.Tokens))
			}
		})
	}
	if err == nil {
		r.Peak, err = procmem.Peak()
	}
	r.Footprint = grpo.Plan{Model: policy.Config, Prompts: prompts, Group: group, PromptLen: promptLen,
		NewTokens: longest, Minibatches: 1, Reference: true, EvalSlots: prompts * group, EvalNewTokens: newTokens,
	}.Footprint(micro)
	r.Shape = fmt.Sprintf("%s, %d prompts × group %d, %d-token prompts, ≤%d new tokens (longest %d), "+
		"micro-batches of %d, β > 0", spec, prompts, group, promptLen, newTokens, longest, micro)
	return r, err
}

// runMem runs each case in a child process and adds its rows.
func (b *bench) runMem() {
	progress("== peak memory against the analytic size, each case in a child process")
	group := "Peak resident memory against the analytic size (target: within 1.3x)"
	mb := func(v int64) series { return measured([]float64{float64(v) / 1e6}) }
	self, _ := os.Executable()
	for _, c := range memCases {
		var r memResult
		out, err := runChild(exec.Command(self, "-mem-case", c.key, "-threads", strconv.Itoa(b.threads)))
		if err = cmp.Or(err, json.Unmarshal(out, &r)); err != nil {
			b.add(valueRow(group, "mem."+c.key+"_peak", c.name, "MB", b.failure("mem "+c.key, err)))
			continue
		}
		row := valueRow(group, "mem."+c.key+"_peak", c.name+": peak RSS over the steps", "MB", mb(r.Peak))
		row.Note = r.Shape
		b.add(row)
		row = ratioRow(group, "mem."+c.key+"_ratio", "  peak / analytic size", "", mb(r.Peak),
			mb(r.Footprint.Total()), false)
		row.Note = fmt.Sprintf("analytic %.0f MB: %s", float64(r.Footprint.Total())/1e6, r.Footprint)
		b.add(row)
	}
}

// runChild runs cmd for its stdout; its error ends with the end of its stderr.
func runChild(cmd *exec.Cmd) ([]byte, error) {
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("%s: %w: %s", filepath.Base(cmd.Path), err, lastLines(errb.String(), 3))
	}
	return out, err
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], " | ")
}
