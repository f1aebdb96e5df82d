package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rookscript/rookscript/engine/backend/cpu"
)

// peerTimeout bounds one peer process.
const peerTimeout = 20 * time.Minute

// torchInfo is the ready line a PyTorch script prints in --serve mode.
type torchInfo struct {
	Ready         bool    `json:"ready"`
	Torch         string  `json:"torch"`
	OMPWaitPolicy string  `json:"omp_wait_policy"`
	CoreType      string  `json:"openblas_coretype"` // OPENBLAS_CORETYPE as the process saw it
	BLASCore      string  `json:"blas_core"`         // the family whose kernels its OpenBLAS runs
	Capability    string  `json:"cpu_capability"`    // the kernels torch's own operators run
	OneDNNISA     string  `json:"onednn_isa"`
	InitS         float64 `json:"init_s"`
}

// peerEnv is base with set's variables in place of base's, and huge pages for large blocks
// of glibc's malloc, as cpu.HostFloats advises them for the engine's buffers.
func peerEnv(base []string, set ...string) []string {
	set = append(set, "GLIBC_TUNABLES=glibc.malloc.hugetlb=1")
	env := slices.DeleteFunc(slices.Clone(base), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.ContainsFunc(set, func(s string) bool { return strings.HasPrefix(s, k+"=") })
	})
	return append(env, set...)
}

// torchEnv is the environment of a PyTorch peer at its best here: OMP_WAIT_POLICY=PASSIVE
// (Debian's torch otherwise keeps its OpenMP threads spinning between parallel regions, against
// its own BLAS threads), OpenBLAS on the engine's kernel family, and where the engine is capped
// at AVX2, its operators and oneDNN capped too (torch reads its capability in lower case only).
func torchEnv(base []string, coreType string, capped bool) []string {
	set := []string{"OMP_WAIT_POLICY=PASSIVE", "OPENBLAS_CORETYPE=" + coreType}
	if capped {
		set = append(set, "ATEN_CPU_CAPABILITY=avx2", "ONEDNN_MAX_CPU_ISA=AVX2")
	}
	return peerEnv(base, set...)
}

// torchProc is a PyTorch script in --serve mode: it builds its model once, then times one op
// per request, so that its runs alternate with the engine's.
type torchProc struct {
	Info   torchInfo
	name   string
	cmd    *exec.Cmd
	cancel context.CancelFunc
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr bytes.Buffer
	closed bool
}

// startTorch starts one of the bench's PyTorch scripts in --serve mode as a peer, on the
// bench's threads and seed, and waits for its ready line; its stderr passes through. The first
// one started says what the peer's kernels are.
func (b *bench) startTorch(script string, args ...string) (*torchProc, error) {
	script = filepath.Join(b.scripts, script)
	if _, err := os.Stat(script); err != nil {
		return nil, fmt.Errorf("PyTorch script: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
	p := &torchProc{name: filepath.Base(script), cancel: cancel}
	args = append([]string{script, "--serve", "--threads", fmt.Sprint(b.threads), "--seed", "42"}, args...)
	p.cmd = exec.CommandContext(ctx, b.python, args...)
	p.cmd.Env = torchEnv(os.Environ(), cpu.BLASCoreName(), cpu.Capped())
	p.cmd.Stderr = io.MultiWriter(os.Stderr, &p.stderr)
	in, err := p.cmd.StdinPipe()
	out, err2 := p.cmd.StdoutPipe()
	if err = cmp.Or(err, err2, p.cmd.Start()); err != nil {
		cancel()
		return nil, err
	}
	p.in, p.out = in, bufio.NewScanner(out)
	p.out.Buffer(nil, 1<<20)
	line, err := p.readLine()
	if err = cmp.Or(err, json.Unmarshal(line, &p.Info)); err == nil && !p.Info.Ready {
		err = errors.New("no ready line")
	} else if err == nil && p.Info.OMPWaitPolicy != "PASSIVE" {
		err = fmt.Errorf("OMP_WAIT_POLICY is %q in the peer, not PASSIVE", p.Info.OMPWaitPolicy)
	}
	if err != nil {
		return nil, p.failure(err)
	}
	progress("  torch %s: OpenBLAS %s, operators %s, ready in %.1f s", p.Info.Torch, p.Info.BLASCore,
		p.Info.Capability, p.Info.InitS)
	if b.peer == nil {
		b.peer = &p.Info
	}
	return p, nil
}

// readLine is the script's next stdout line that looks like JSON (libraries print there too).
func (p *torchProc) readLine() ([]byte, error) {
	for p.out.Scan() {
		if line := bytes.TrimSpace(p.out.Bytes()); len(line) > 0 && line[0] == '{' {
			return line, nil
		}
	}
	return nil, cmp.Or(p.out.Err(), io.ErrUnexpectedEOF)
}

// failure ends the process and says why it could not answer, with the end of its stderr.
func (p *torchProc) failure(err error) error {
	p.Close()
	if msg := p.stderr.String(); strings.Contains(msg, "No module named 'torch'") {
		return fmt.Errorf("%s has no torch (run make setup-bench, or pass -python)", p.cmd.Path)
	}
	return fmt.Errorf("%s: %v: %s", p.name, err, lastLines(p.stderr.String(), 1))
}

// Do times one op in the script.
func (p *torchProc) Do(op string) (sample, error) {
	var r struct {
		Error   string  `json:"error"`
		MS      float64 `json:"ms"`
		Prefill float64 `json:"prefill_ms"`
		Decode  float64 `json:"decode_ms"`
	}
	_, err := fmt.Fprintln(p.in, op)
	line, err2 := p.readLine()
	if err = cmp.Or(err, err2); err != nil {
		return sample{}, p.failure(err)
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return sample{}, fmt.Errorf("%s: bad reply %q: %v", p.name, line, err)
	} else if r.Error != "" {
		return sample{}, fmt.Errorf("%s: %s", p.name, r.Error)
	}
	return sample{ms: r.MS, prefill: r.Prefill, decode: r.Decode}, nil
}

// Close ends the script (the end of its stdin) and waits for it.
func (p *torchProc) Close() {
	if !p.closed {
		p.closed = true
		p.in.Close()
		p.cmd.Wait()
		p.cancel()
	}
}

// llmcStep matches llm.c's step lines: "step 3: train loss 5.123 (took 15012.3 ms)".
var llmcStep = regexp.MustCompile(`^step\s+\d+: train loss \S+ \(took ([0-9.eE+-]+) ms\)`)

// llmcStepMS reads llm.c's output until it has warmup+runs steps and returns the last runs'.
func llmcStepMS(r io.Reader, warmup, runs int) ([]float64, error) {
	var ms []float64
	for sc, seen := bufio.NewScanner(r), 0; sc.Scan(); {
		if m := llmcStep.FindStringSubmatch(strings.TrimSpace(sc.Text())); m != nil {
			if seen++; seen > warmup {
				v, _ := strconv.ParseFloat(m[1], 64)
				ms = append(ms, v)
				progress("  llm.c train step %d/%d: %.1f ms", len(ms), runs, v)
			}
			if len(ms) == runs {
				return ms, nil
			}
		}
	}
	return ms, fmt.Errorf("llm.c stopped after %d train steps, wanted %d", len(ms)+warmup, warmup+runs)
}

// runLLMC runs llm.c's CPU trainer (train_gpt2 in dir, B=4 T=64) with OMP_NUM_THREADS=threads,
// takes the step times it prints (forward, backward, AdamW) and stops it once it has them.
func runLLMC(dir string, threads, warmup, runs int) (series, error) {
	bin := filepath.Join(dir, "train_gpt2")
	fi, err := os.Stat(bin)
	_, err2 := os.Stat(filepath.Join(dir, "gpt2_124M.bin"))
	if dir == "" || err != nil || fi.Mode()&0o111 == 0 || err2 != nil {
		return skipped("LLMC_DIR names no llm.c checkout with train_gpt2 built and gpt2_124M.bin " +
			"(rookbench does not download or build it)"), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
	defer cancel()
	argv := []string{bin}
	if sb, err := exec.LookPath("stdbuf"); err == nil { // stdio buffers a pipe: line-buffer it
		argv = []string{sb, "-oL", bin}
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stderr bytes.Buffer
	cmd.Dir, cmd.Stderr = dir, &stderr
	cmd.Env = peerEnv(os.Environ(), "OMP_NUM_THREADS="+strconv.Itoa(threads))
	out, err := cmd.StdoutPipe()
	if err = cmp.Or(err, cmd.Start()); err != nil {
		return series{}, err
	}
	ms, err := llmcStepMS(out, warmup, runs)
	cmd.Process.Kill() // it would go on for its 40 steps
	if cmd.Wait(); err != nil {
		return series{}, fmt.Errorf("%v: %s", cmp.Or(ctx.Err(), err), lastLines(stderr.String(), 1))
	}
	return measured(ms), nil
}
