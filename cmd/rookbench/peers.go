package main

import (
	"bufio"
	"bytes"
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
)

// peerTimeout bounds one peer process (a PyTorch script or llm.c).
const peerTimeout = 20 * time.Minute

// torchInfo is the first line a PyTorch script prints in --serve mode.
type torchInfo struct {
	Ready         bool    `json:"ready"`
	Torch         string  `json:"torch"`
	Threads       int     `json:"threads"`
	OMPWaitPolicy string  `json:"omp_wait_policy"`
	CoreType      string  `json:"openblas_coretype"` // OPENBLAS_CORETYPE as the process saw it
	Tunables      string  `json:"glibc_tunables"`    // GLIBC_TUNABLES as the process saw it
	BLAS          string  `json:"blas"`              // the BLAS library it loaded
	BLASCore      string  `json:"blas_core"`         // the processor family whose kernels that OpenBLAS runs
	Capability    string  `json:"cpu_capability"`    // the kernels torch's own operators dispatch to
	OneDNN        string  `json:"onednn"`            // its version
	OneDNNISA     string  `json:"onednn_isa"`        // the instructions its kernels use (ONEDNN_MAX_CPU_ISA's names)
	Params        int     `json:"params"`
	InitS         float64 `json:"init_s"`
}

// degraded says why the process runs kernels below what the processor can do, or "".
func (ti torchInfo) degraded() string {
	switch {
	case strings.EqualFold(ti.BLASCore, "prescott"):
		return fmt.Sprintf("its OpenBLAS (%s) runs its Prescott (SSE3) kernels", ti.BLAS)
	case strings.EqualFold(ti.Capability, "default"), strings.EqualFold(ti.Capability, "NO AVX"):
		return "torch's operators run their scalar (DEFAULT) kernels"
	}
	return ""
}

// torchPeer is how a PyTorch process is configured. Tuned, it gets what makes it fastest
// here: OMP_WAIT_POLICY=PASSIVE, OpenBLAS told to run the kernel family the engine's runs
// (a release that does not know the processor falls back to Prescott's, as the engine would
// without blas_core.c), and torch's operators at the faster of their AVX2 and AVX-512
// kernels on this machine. Untuned, it gets the environment as it is.
type torchPeer struct {
	tuned      bool
	coreType   string // OPENBLAS_CORETYPE; "" leaves it to OpenBLAS
	capability string // the operators' kernels as torch names them (AVX2, AVX512, DEFAULT); "" leaves it to torch
	capped     bool   // the engine's kernels are capped at AVX2: oneDNN is too (ONEDNN_MAX_CPU_ISA)
}

// torchReply is its answer to one op: the run's wall, CPU and system ms (and, for a
// generation, its prefill and decode ms), or an error.
type torchReply struct {
	Op        string  `json:"op"`
	Error     string  `json:"error"`
	MS        float64 `json:"ms"`
	CPUMS     float64 `json:"cpu_ms"`
	SysMS     float64 `json:"sys_ms"`
	PrefillMS float64 `json:"prefill_ms"`
	DecodeMS  float64 `json:"decode_ms"`
}

// torchEnv is the environment of a PyTorch process: ours without OMP_WAIT_POLICY, plus
// OMP_WAIT_POLICY=PASSIVE when tuned (Debian's torch otherwise keeps its OpenMP threads
// spinning between parallel regions, against the threads of its own BLAS on a small
// machine), and the kernel choices of a tuned peer, and huge pages for its tensors
// (hugeMalloc) as the engine's buffers have them.
func torchEnv(base []string, peer torchPeer) []string {
	env := make([]string, 0, len(base)+4)
	for _, kv := range base {
		if !strings.HasPrefix(kv, "OMP_WAIT_POLICY=") && !(peer.tuned && (strings.HasPrefix(kv, "OPENBLAS_CORETYPE=") || strings.HasPrefix(kv, "ATEN_CPU_CAPABILITY=") || strings.HasPrefix(kv, "ONEDNN_MAX_CPU_ISA="))) {
			env = append(env, kv)
		}
	}
	if peer.tuned {
		env = append(env, "OMP_WAIT_POLICY=PASSIVE")
		if peer.coreType != "" {
			env = append(env, "OPENBLAS_CORETYPE="+peer.coreType)
		}
		if peer.capability != "" {
			// torch reads only lower case here ("avx2", "avx512", "default"); any other
			// spelling is ignored with a warning and the process runs its default kernels.
			env = append(env, "ATEN_CPU_CAPABILITY="+strings.ToLower(peer.capability))
		}
		if peer.capped {
			env = append(env, "ONEDNN_MAX_CPU_ISA=AVX2")
		}
		env = hugeMalloc(env)
	}
	return env
}

// hugeMallocTunable makes glibc's malloc (2.35 and later) advise transparent huge pages for
// the large blocks it maps, as the engine's cpu.HostFloats does for its buffers: a peer that
// allocates through malloc (torch 1.13's CPU allocator, llm.c) gets the same pages. Forward
// 15% faster for torch here; where huge pages are off it changes nothing.
const hugeMallocTunable = "glibc.malloc.hugetlb=1"

// hugeMalloc adds hugeMallocTunable to env's GLIBC_TUNABLES, keeping the tunables already
// there (one that sets glibc.malloc.hugetlb itself is left as it is).
func hugeMalloc(env []string) []string {
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GLIBC_TUNABLES="); ok {
			if strings.Contains(v, "glibc.malloc.hugetlb=") {
				return env
			}
			if v != "" {
				v += ":"
			}
			out := slices.Clone(env)
			out[i] = "GLIBC_TUNABLES=" + v + hugeMallocTunable
			return out
		}
	}
	return append(env, "GLIBC_TUNABLES="+hugeMallocTunable)
}

// torchProc is a PyTorch script running in --serve mode: it builds its model once, then
// times one op per request, so that its runs can alternate with the engine's.
type torchProc struct {
	Info   torchInfo
	name   string
	cmd    *exec.Cmd
	cancel context.CancelFunc
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr bytes.Buffer

	closed  bool
	waitErr error
}

// startTorch starts script (with python, in --serve mode, with the given arguments) and
// waits for its ready line. Its standard error (progress, warnings) is passed through.
func startTorch(python, script string, peer torchPeer, args ...string) (*torchProc, error) {
	if _, err := os.Stat(script); err != nil {
		return nil, fmt.Errorf("PyTorch script: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
	p := &torchProc{name: filepath.Base(script), cancel: cancel}
	p.cmd = exec.CommandContext(ctx, python, append([]string{script, "--serve"}, args...)...)
	p.cmd.Env = torchEnv(os.Environ(), peer)
	p.cmd.Stderr = io.MultiWriter(os.Stderr, &tail{buf: &p.stderr, max: 4096})
	in, err := p.cmd.StdinPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	p.in, p.out = in, bufio.NewScanner(out)
	p.out.Buffer(make([]byte, 64<<10), 1<<20)
	if err := p.cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	line, err := p.readLine()
	if err == nil {
		err = json.Unmarshal(line, &p.Info)
	}
	if err == nil && !p.Info.Ready {
		err = errors.New("no ready line")
	}
	if err == nil && peer.tuned && p.Info.OMPWaitPolicy != "PASSIVE" {
		err = fmt.Errorf("OMP_WAIT_POLICY is %q in the tuned process, not PASSIVE", p.Info.OMPWaitPolicy)
	}
	if err != nil {
		return nil, p.failure(err)
	}
	return p, nil
}

// readLine is the next line of the script's stdout that looks like JSON (anything a library
// prints there is skipped).
func (p *torchProc) readLine() ([]byte, error) {
	for p.out.Scan() {
		if line := bytes.TrimSpace(p.out.Bytes()); len(line) > 0 && line[0] == '{' {
			return line, nil
		}
	}
	if err := p.out.Err(); err != nil {
		return nil, err
	}
	return nil, io.ErrUnexpectedEOF
}

// failure describes why the process could not answer, with the end of its stderr. The
// process is ended first (and waited for, so that all of its stderr is in).
func (p *torchProc) failure(err error) error {
	p.Close()
	msg := strings.TrimSpace(p.stderr.String())
	if strings.Contains(msg, "No module named 'torch'") {
		return fmt.Errorf("%s has no torch (run make setup-bench, or pass -python)", p.cmd.Path)
	}
	return fmt.Errorf("%s: %v: %s", p.name, err, lastLine(msg))
}

// Do times one op in the script and returns its run.
func (p *torchProc) Do(op string) (sample, error) {
	if p.closed {
		return sample{}, fmt.Errorf("%s: the process has ended", p.name)
	}
	if _, err := fmt.Fprintln(p.in, op); err != nil {
		return sample{}, p.failure(err)
	}
	line, err := p.readLine()
	if err != nil {
		return sample{}, p.failure(err)
	}
	var r torchReply
	if err := json.Unmarshal(line, &r); err != nil {
		return sample{}, fmt.Errorf("%s: bad reply %q: %v", p.name, line, err)
	}
	if r.Error != "" {
		return sample{}, fmt.Errorf("%s: %s", p.name, r.Error)
	}
	return sample{ms: r.MS, cpu: r.CPUMS, sys: r.SysMS, prefill: r.PrefillMS, decode: r.DecodeMS}, nil
}

// Close ends the script (end of its stdin) and waits for it; later calls return the same.
func (p *torchProc) Close() error {
	if !p.closed {
		p.closed = true
		p.in.Close()
		p.waitErr = p.cmd.Wait()
		p.cancel()
	}
	return p.waitErr
}

// tail keeps the last max bytes written to it.
type tail struct {
	buf *bytes.Buffer
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	t.buf.Write(p)
	if extra := t.buf.Len() - t.max; extra > 0 {
		t.buf.Next(extra)
	}
	return len(p), nil
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// llmcStep matches llm.c's train_gpt2 step lines: "step 3: train loss 5.123 (took 15012.3 ms)".
var llmcStep = regexp.MustCompile(`^step\s+(\d+): train loss \S+ \(took ([0-9.eE+-]+) ms\)`)

// llmcStepMS reads llm.c's output until it has warmup+runs train steps and returns the
// milliseconds of the last runs of them; it stops reading (and the caller stops the process)
// as soon as it has them.
func llmcStepMS(r io.Reader, warmup, runs int) ([]float64, error) {
	var ms []float64
	sc := bufio.NewScanner(r)
	seen := 0
	for sc.Scan() {
		m := llmcStep.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, fmt.Errorf("llm.c step line %q: %v", sc.Text(), err)
		}
		if seen++; seen > warmup {
			ms = append(ms, v)
			progress("  llm.c train step %d/%d: %.1f ms", len(ms), runs, v)
		}
		if len(ms) == runs {
			return ms, nil
		}
	}
	if err := sc.Err(); err != nil {
		return ms, err
	}
	return ms, fmt.Errorf("llm.c stopped after %d train steps, wanted %d", seen, warmup+runs)
}

// runLLMC runs llm.c's CPU trainer (train_gpt2 in dir, started there so that it finds its
// gpt2_124M.bin and data; it trains at B=4, T=64) with OMP_NUM_THREADS=threads, takes the
// per-step times it prints itself (forward + backward + AdamW, excluding data loading,
// validation and sampling) and stops it once it has warmup+runs steps.
func runLLMC(dir string, threads, warmup, runs int) (series, error) {
	if dir == "" {
		return skipped("LLMC_DIR is not set (an llm.c checkout with a built train_gpt2 CPU binary; rookbench does not download or build it)"), nil
	}
	bin := filepath.Join(dir, "train_gpt2")
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return skipped("LLMC_DIR has no executable train_gpt2 (build it there with make train_gpt2)"), nil
	}
	if _, err := os.Stat(filepath.Join(dir, "gpt2_124M.bin")); err != nil {
		return skipped("LLMC_DIR has no gpt2_124M.bin (llm.c's train_gpt2 needs it; see llm.c's README)"), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
	defer cancel()
	// llm.c prints with stdio, which buffers a pipe in 4 KiB blocks; stdbuf (coreutils) makes
	// it line-buffered so that the step times arrive as they happen.
	argv := []string{bin}
	if sb, err := exec.LookPath("stdbuf"); err == nil {
		argv = []string{sb, "-oL", bin}
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = hugeMalloc(append(os.Environ(), "OMP_NUM_THREADS="+strconv.Itoa(threads)))
	var stderr bytes.Buffer
	cmd.Stderr = &tail{buf: &stderr, max: 4096}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return series{}, err
	}
	if err := cmd.Start(); err != nil {
		return series{}, err
	}
	ms, readErr := llmcStepMS(out, warmup, runs)
	if readErr == nil {
		cmd.Process.Kill() // the process we started; it would go on for 40 steps
	}
	waitErr := cmd.Wait()
	if readErr != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return series{}, fmt.Errorf("llm.c ran over %v", peerTimeout)
		}
		return series{}, fmt.Errorf("%v (%v): %s", readErr, waitErr, lastLine(strings.TrimSpace(stderr.String())))
	}
	return measured(ms), nil
}
