package luabind

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/rookscript/rookscript/engine/checkpoint"
	"github.com/rookscript/rookscript/internal/procmem"
)

// What a researcher looks at while a run learns: a few completions of every step
// (samples.jsonl, as TRL's log_completions), a step without reward signal said as such, and
// a summary when the run ends.

// DefaultSamples is how many completions of each step a run writes to samples.jsonl.
const DefaultSamples = 4

// noSignalWarnAfter is how many steps in a row without reward signal give a warning.
const noSignalWarnAfter = 3

// pickSamples chooses k of n completions spread evenly over the batch, so that different
// groups (prompts) and places in a group are seen.
func pickSamples(n, k int) []int {
	k = min(k, n)
	out := make([]int, k)
	for j := range k {
		out[j] = j * n / k
	}
	return out
}

// logSamples writes the run's samples of step's batch and prints one every printEvery steps.
func (r *run) logSamples(step int, b *batch) error {
	if r.samples == 0 || len(b.b.Completions) == 0 {
		return nil
	}
	var ss []checkpoint.Sample
	for _, i := range pickSamples(len(b.b.Completions), r.samples) {
		ss = append(ss, sampleOf(step, b, i))
	}
	if r.env.main() { // rank 0's share, in a data-parallel run
		if err := r.r.AppendSamples(ss); err != nil {
			return err
		}
	}
	if r.printEvery > 0 && step%r.printEvery == 0 {
		r.progress.note("sample of " + ss[0].String())
	}
	r.summary.samples = true
	return nil
}

// sampleOf is completion i (0-based) of b as step logged it.
func sampleOf(step int, b *batch, i int) checkpoint.Sample {
	c := b.b.Completions[i]
	prompt := b.items[c.Prompt].prompt
	s := checkpoint.Sample{Step: step, Index: i + 1, Group: c.Prompt + 1, Prompt: prompt, Completion: c.Text,
		Tokens: len(c.Tokens), Truncated: c.Truncated, Stop: c.Stop}
	if task, _, ok := strings.Cut(prompt, ":"); ok && (task == "P" || task == "A") {
		s.Task = task
	}
	if b.b.Rewards != nil {
		s.Reward = &b.b.Rewards[i]
		for name, v := range b.b.Components {
			if i < len(v) && !math.IsNaN(v[i]) {
				if s.Components == nil {
					s.Components = map[string]float64{}
				}
				s.Components[name] = v[i]
			}
		}
	}
	if i < len(b.b.Advantages) {
		s.Advantage = &b.b.Advantages[i]
	}
	return s
}

// warnNoSignal counts steps in a row without reward signal and warns at noSignalWarnAfter of
// them, and every as many after.
func (r *run) warnNoSignal(why string) {
	if why == "" {
		r.noSignal = 0
		return
	}
	r.noSignal++
	if r.noSignal%noSignalWarnAfter == 0 && !r.env.opts.Quiet {
		r.progress.note(fmt.Sprintf("WARNING: %d steps in a row without reward signal (%s): the policy learns nothing from its rewards; "+
			"look at samples.jsonl (rookscript samples %s), and at max_new_tokens, the reward and the temperature", r.noSignal, why, r.r.Dir))
	}
}

// runSummary is what a run did in this process, for the summary it prints when it ends.
type runSummary struct {
	began         time.Time
	from, to      int // steps: the one the process started from, the last logged
	tokens        float64
	noSignalSteps int
	signal        signalSummary
	samples       bool
}

func (s *runSummary) start(step int) { s.began, s.from, s.to = time.Now(), step, step }

func (s *runSummary) logged(step int, m map[string]float64) {
	s.to = max(s.to, step)
	if tps, t := m["tokens_per_sec"], m["time/total"]; tps > 0 && t > 0 {
		s.tokens += tps * t
	}
	if m["no_reward_signal"] == 1 {
		s.noSignalSteps++
	}
	s.signal.add(m)
}

// printSummary prints what the run did and where its outputs are: wall time, steps,
// throughput, peak memory, checkpoints, metrics, samples and how to plot them. It is printed
// however the run ends (done, stopped, interrupted, an error), when the run closes.
func (r *run) printSummary() {
	if r.env.opts.Quiet || r.r == nil {
		return
	}
	s, dir := r.summary, r.r.Dir
	wall := time.Since(s.began)
	var b strings.Builder
	fmt.Fprintf(&b, "run %s: ", dir)
	switch {
	case r.stopped != "":
		b.WriteString("stopped by its recovery policy; ")
	case r.env.intr.signal() != nil:
		b.WriteString("interrupted; ")
	}
	fmt.Fprintf(&b, "steps %d→%d in %s", s.from, s.to, wall.Round(time.Second))
	if s.tokens > 0 {
		fmt.Fprintf(&b, ", %s tokens sampled (%s tok/s)", strings.TrimSpace(humanize.SIWithDigits(s.tokens, 1, "")),
			strings.TrimSpace(humanize.SIWithDigits(s.tokens/wall.Seconds(), 1, "")))
	}
	if peak, err := procmem.Peak(); err == nil {
		fmt.Fprintf(&b, ", peak memory %s", humanize.Bytes(uint64(peak)))
	}
	if s.noSignalSteps > 0 {
		fmt.Fprintf(&b, "; %d steps without reward signal", s.noSignalSteps)
	}
	line := func(name, path string) { fmt.Fprintf(&b, "\n  %-12s %s", name, path) }
	if l := s.signal.line(); l != "" {
		line("no signal", l)
	}
	if latest, err := r.r.LatestName(); err == nil {
		saved := "latest " + latest
		if best, err := r.r.Best(); err == nil && best != "" {
			saved += ", best " + best
		}
		line("checkpoints", filepath.Join(dir, "checkpoints")+" ("+saved+")")
	} else {
		line("checkpoints", "none saved")
	}
	line("metrics", filepath.Join(dir, "metrics.jsonl"))
	if s.samples {
		line("samples", filepath.Join(dir, checkpoint.SamplesFile)+"   (rookscript samples "+dir+")")
	}
	line("plot", "rookscript plot "+dir)
	r.progress.finish()
	fmt.Fprintln(r.env.out, b.String())
}
