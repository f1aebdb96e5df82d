package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/rookscript/rookscript/engine/checkpoint"
)

const samplesUsage = `Usage: rookscript samples RUN_DIR [--step N] [--last K]

Prints the completions a run logged in RUN_DIR/samples.jsonl (a few of each step), grouped by
step: for each, its place in the batch, task, reward with its components, advantage and
length, then its prompt and completion. Default: the last step's; --step N those of step N;
--last K those of the last K steps. Reading a run needs no lock: a running run can be read.
`

// runSamples implements `rookscript samples`; exit codes follow plot's: 0 ok, 1 a file that
// cannot be read or parsed, 2 usage (a bad flag, no such run, step or samples.jsonl).
func runSamples(args []string, stdout, stderr io.Writer) int {
	dir, step, last, help, err := parseSamplesArgs(args)
	if help {
		fmt.Fprint(stdout, samplesUsage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "rookscript samples: %v\n\n%s", err, samplesUsage)
		return 2
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		fmt.Fprintf(stderr, "rookscript samples: run directory %s does not exist\n", dir)
		return 2
	}
	path := filepath.Join(dir, checkpoint.SamplesFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stderr, "rookscript samples: %s does not exist (not a run directory, a run that logs no samples, or no step logged yet)\n", path)
		return 2
	}
	ss, err := checkpoint.ReadSamples(dir)
	if err != nil {
		fmt.Fprintf(stderr, "rookscript samples: %v\n", err)
		return 1
	}
	steps := sampleSteps(ss)
	if len(steps) == 0 {
		fmt.Fprintf(stderr, "rookscript samples: %s holds no samples yet\n", path)
		return 2
	}
	var show []int
	switch {
	case step >= 0:
		if !slices.Contains(steps, step) {
			fmt.Fprintf(stderr, "rookscript samples: %s has no samples of step %d (it has steps %s)\n", path, step, stepRanges(steps))
			return 2
		}
		show = []int{step}
	default:
		show = steps[max(len(steps)-last, 0):]
	}
	for k, s := range show {
		if k > 0 {
			fmt.Fprintln(stdout)
		}
		printStepSamples(stdout, s, ss)
	}
	return 0
}

// parseSamplesArgs returns step -1 when no --step is given, and last 1 unless --last is.
func parseSamplesArgs(args []string) (dir string, step, last int, help bool, err error) {
	step, last = -1, 1
	var stepSet, lastSet bool
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(a, "=")
		switch {
		case a == "-h" || a == "--help" || a == "-help":
			return "", 0, 0, true, nil
		case name == "--step" || name == "-step" || name == "--last" || name == "-last":
			if !hasValue {
				if i+1 >= len(args) {
					return "", 0, 0, false, fmt.Errorf("%s needs a number", a)
				}
				i++
				value = args[i]
			}
			n, perr := strconv.Atoi(value)
			if strings.HasSuffix(name, "step") {
				if perr != nil || n < 0 {
					return "", 0, 0, false, fmt.Errorf("%s %q: want a step number (an integer ≥ 0)", name, value)
				}
				step, stepSet = n, true
			} else {
				if perr != nil || n < 1 {
					return "", 0, 0, false, fmt.Errorf("%s %q: want how many steps (an integer ≥ 1)", name, value)
				}
				last, lastSet = n, true
			}
		case strings.HasPrefix(a, "-") && a != "-":
			return "", 0, 0, false, fmt.Errorf("unknown flag %s", a)
		case dir != "":
			return "", 0, 0, false, fmt.Errorf("one run directory, not %s and %s", dir, a)
		default:
			dir = a
		}
	}
	switch {
	case dir == "":
		return "", 0, 0, false, errors.New("no run directory given")
	case stepSet && lastSet:
		return "", 0, 0, false, errors.New("--step and --last: give one of them")
	}
	return dir, step, last, false, nil
}

// sampleSteps is the steps the samples are of, in order. A resume or rollback takes the
// steps it replays out of samples.jsonl (engine/checkpoint), so a step is one block of lines.
func sampleSteps(ss []checkpoint.Sample) []int {
	var steps []int
	for _, s := range ss {
		if !slices.Contains(steps, s.Step) {
			steps = append(steps, s.Step)
		}
	}
	slices.Sort(steps)
	return steps
}

// stepRanges writes sorted steps compactly: 1–12, 20.
func stepRanges(steps []int) string {
	var parts []string
	for i := 0; i < len(steps); {
		j := i
		for j+1 < len(steps) && steps[j+1] == steps[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d–%d", steps[i], steps[j]))
		} else {
			parts = append(parts, strconv.Itoa(steps[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// printStepSamples prints step's samples in file order, a blank line between them.
func printStepSamples(w io.Writer, step int, ss []checkpoint.Sample) {
	first := true
	for _, s := range ss {
		if s.Step != step {
			continue
		}
		if !first {
			fmt.Fprintln(w)
		}
		first = false
		fmt.Fprintln(w, s.String())
	}
}
