package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/rollout"
)

func TestSeriesStats(t *testing.T) {
	for _, tc := range []struct {
		in            []float64
		med, min, max float64
	}{
		{[]float64{3, 1, 2}, 2, 1, 3},
		{[]float64{4, 1, 3, 2}, 2.5, 1, 4},
		{[]float64{7}, 7, 7, 7},
	} {
		s := measured(tc.in)
		if s.median() != tc.med || s.min() != tc.min || s.max() != tc.max {
			t.Errorf("%v: median/min/max %v %v %v, want %v %v %v", tc.in, s.median(), s.min(), s.max(), tc.med, tc.min, tc.max)
		}
	}
	if in := []float64{3, 1, 2}; measured(in).median() != 2 || !slices.Equal(in, []float64{3, 1, 2}) {
		t.Error("median must not reorder the samples")
	}
	if !math.IsNaN(skipped("x").median()) || skipped("x").ok() {
		t.Error("a skipped series has no median")
	}
}

func TestRatioRow(t *testing.T) {
	peer, eng := measured([]float64{200, 220, 240}), measured([]float64{100, 110, 120})
	r := ratioRow("g", "k", "speed-up", "peer / engine", peer, eng, false)
	if *r.Median != 2 || *r.Min != 200.0/120 || *r.Max != 2.4 {
		t.Errorf("ratio of medians/min/max %v %v %v, want 2, 1.667, 2.4", *r.Median, *r.Min, *r.Max)
	}
	if r.Note != "peer / engine, ratio of medians" {
		t.Errorf("note %q", r.Note)
	}
	if r = ratioRow("g", "k", "engine / floor", "", eng, peer, false); r.Note != "ratio of medians" {
		t.Errorf("a row without a note of its own: note %q", r.Note)
	}
	peer = measured([]float64{300, 200, 220}) // run 0 of both slowed down together
	eng = measured([]float64{150, 100, 100})
	r = ratioRow("g", "k", "speed-up", "peer / engine", peer, eng, true)
	if *r.Median != 2 || *r.Min != 2 || *r.Max != 2.2 {
		t.Errorf("paired median/min/max %v %v %v, want 2, 2, 2.2", *r.Median, *r.Min, *r.Max)
	}
	r = ratioRow("g", "k", "speed-up", "", skipped("torch missing"), eng, true)
	if r.Median != nil || !strings.Contains(r.Note, "torch missing") {
		t.Errorf("ratio against a missing peer: %+v", r)
	}
}

func TestValueRow(t *testing.T) {
	runs := []sample{{ms: 500, cpu: 900, sys: 100}, {ms: 400, cpu: 800, sys: 40}, {ms: 600, cpu: 1200, sys: 60}}
	r := valueRow("g", "k", "step", "ms", fromRuns(runs, wallMS), 100e9)
	if *r.GFLOPS != 200 {
		t.Errorf("100 GFLOP in a 500 ms median: %v GFLOP/s, want 200", *r.GFLOPS)
	}
	if *r.Cores != 2 || *r.SysCores != 0.1 {
		t.Errorf("cores %v (sys %v), want the medians 2 and 0.1", *r.Cores, *r.SysCores)
	}
	tok := fromRuns(runs, wallMS).mapped(func(ms float64) float64 { return 1e3 / ms })
	if r := valueRow("g", "k", "rate", "tok/s", tok, 0); *r.Median != 2 || *r.Cores != 2 {
		t.Errorf("mapped series: median %v cores %v", *r.Median, *r.Cores)
	}
}

func TestSumSeries(t *testing.T) {
	a := fromRuns([]sample{{ms: 1, cpu: 2}, {ms: 2, cpu: 4}}, wallMS)
	b := fromRuns([]sample{{ms: 10, cpu: 20}, {ms: 20, cpu: 40}}, wallMS)
	s := sumSeries(a, b)
	if !slices.Equal(s.samples, []float64{11, 22}) || !slices.Equal(s.cpu, []float64{22, 44}) {
		t.Errorf("sum %v, cpu %v", s.samples, s.cpu)
	}
	if sumSeries(measured([]float64{1}), skipped("no")).ok() {
		t.Error("a sum with a missing part must be missing")
	}
}

func TestParseSections(t *testing.T) {
	all, err := parseSections("", "cpu")
	if err != nil || len(all) != len(sections) {
		t.Fatalf("default: %v %v", all, err)
	}
	sel, err := parseSections("gemm, Engine", "cpu")
	if err != nil || !sel["gemm"] || !sel["engine"] || sel["torch"] {
		t.Errorf("gemm,engine: %v %v", sel, err)
	}
	if _, err := parseSections("gemm,bogus", "cpu"); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("unknown section: %v", err)
	}
	// A GPU runs the engine's sections only, by default and when asked.
	gpu, err := parseSections("", "cuda")
	if err != nil || len(gpu) != len(deviceSections) || gpu["torch"] || !gpu["grpo"] {
		t.Errorf("cuda default: %v %v", gpu, err)
	}
	if _, err := parseSections("engine,torch", "cuda"); err == nil || !strings.Contains(err.Error(), `"torch" runs on the CPU only`) {
		t.Errorf("torch on cuda: %v", err)
	}
}

func TestTorchEnv(t *testing.T) {
	t.Setenv("OMP_WAIT_POLICY", "ACTIVE") // what the caller has must not reach the tuned run
	base := []string{"A=1", "OMP_WAIT_POLICY=ACTIVE", "OPENBLAS_CORETYPE=Prescott", "B=2"}
	tuned := torchPeer{tuned: true, coreType: "Cooperlake", capability: "AVX512"}
	if got := torchEnv(base, tuned); !slices.Equal(got, []string{"A=1", "B=2", "OMP_WAIT_POLICY=PASSIVE", "OPENBLAS_CORETYPE=Cooperlake", "ATEN_CPU_CAPABILITY=avx512", "GLIBC_TUNABLES=glibc.malloc.hugetlb=1"}) {
		t.Errorf("tuned env %v", got)
	}
	if got := torchEnv(base, torchPeer{}); !slices.Equal(got, []string{"A=1", "OPENBLAS_CORETYPE=Prescott", "B=2"}) {
		t.Errorf("untuned env %v", got)
	}
	// The engine capped at AVX2: the peer runs AVX2 kernels in its operators, its BLAS and oneDNN.
	capped := torchPeer{tuned: true, coreType: "Haswell", capability: "AVX2", capped: true}
	if got := torchEnv(append(base, "ONEDNN_MAX_CPU_ISA=AVX512_CORE"), capped); !slices.Equal(got, []string{"A=1", "B=2", "OMP_WAIT_POLICY=PASSIVE", "OPENBLAS_CORETYPE=Haswell", "ATEN_CPU_CAPABILITY=avx2", "ONEDNN_MAX_CPU_ISA=AVX2", "GLIBC_TUNABLES=glibc.malloc.hugetlb=1"}) {
		t.Errorf("capped env %v", got)
	}
}

// TestTorchCapabilityReal holds the tuned peer's environment to the torch it runs: each
// operator kernel family asked for (AVX-512 where the processor has it) is the one torch
// reports it dispatches to, and a peer capped at AVX2 has oneDNN's kernels capped too, as the
// scripts' own kernel_info and onednn_isa read them.
func TestTorchCapabilityReal(t *testing.T) {
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import torch").Run(); err != nil {
		t.Skipf("needs %s with torch (Debian's python3-torch, which `make bench` installs): %v", python, err)
	}
	const probe = "import sys; sys.path.insert(0, sys.argv[1]); import torch_gpt2; print(torch_gpt2.kernel_info()[0] + '|' + torch_gpt2.onednn_isa())"
	type tc struct {
		peer          torchPeer
		want, wantDNN string // wantDNN "": whatever oneDNN finds
	}
	cases := []tc{
		{torchPeer{tuned: true, capability: "AVX2"}, "AVX2", ""},
		{torchPeer{tuned: true, capability: "DEFAULT"}, "NO AVX", ""},
		{torchPeer{tuned: true, capability: "AVX2", capped: true}, "AVX2", "AVX2"},
	}
	if cpuHas("avx512f") {
		cases = append(cases, tc{torchPeer{tuned: true, capability: "AVX512"}, "AVX512", ""})
	}
	for _, c := range cases {
		cmd := exec.Command(python, "-c", probe, "../../bench")
		cmd.Env = torchEnv(os.Environ(), c.peer)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%+v: %v\n%s", c.peer, err, &stderr)
		}
		got, dnn, _ := strings.Cut(strings.TrimSpace(string(out)), "|")
		if got != c.want {
			t.Errorf("asked for %s, torch reports %q\n%s", c.peer.capability, got, &stderr)
		}
		if dnn == "" || c.wantDNN != "" && dnn != c.wantDNN {
			t.Errorf("%+v: oneDNN runs %q, want %q", c.peer, dnn, c.wantDNN)
		}
	}
}

// TestHugeMalloc: the tunable joins the caller's GLIBC_TUNABLES, and a caller's own
// glibc.malloc.hugetlb stays.
func TestHugeMalloc(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"A=1"}, []string{"A=1", "GLIBC_TUNABLES=glibc.malloc.hugetlb=1"}},
		{[]string{"GLIBC_TUNABLES=glibc.malloc.arena_max=2", "B=2"}, []string{"GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1", "B=2"}},
		{[]string{"GLIBC_TUNABLES="}, []string{"GLIBC_TUNABLES=glibc.malloc.hugetlb=1"}},
		{[]string{"GLIBC_TUNABLES=glibc.malloc.hugetlb=0"}, []string{"GLIBC_TUNABLES=glibc.malloc.hugetlb=0"}},
	} {
		in := slices.Clone(c.in)
		if got := hugeMalloc(in); !slices.Equal(got, c.want) {
			t.Errorf("hugeMalloc(%q) = %q, want %q", c.in, got, c.want)
		}
		if !slices.Equal(in, c.in) {
			t.Errorf("hugeMalloc changed its argument: %q", in)
		}
	}
}

// fakeTorch is a stand-in for a PyTorch script in --serve mode (a shell script, run with sh
// as the interpreter). It reads ATEN_CPU_CAPABILITY as torch 1.13 does: lower case only,
// anything else ignored with a warning.
const fakeTorch = `echo "progress on stderr" >&2
echo "a library's stdout noise"
case "$ATEN_CPU_CAPABILITY" in
  avx512) cap=AVX512 ;; default) cap="NO AVX" ;; avx2|"") cap=AVX2 ;;
  *) echo "ignoring invalid value for ATEN_CPU_CAPABILITY: $ATEN_CPU_CAPABILITY" >&2; cap=AVX2 ;;
esac
echo "{\"ready\": true, \"torch\": \"9.9\", \"threads\": $3, \"omp_wait_policy\": \"$OMP_WAIT_POLICY\", \"openblas_coretype\": \"$OPENBLAS_CORETYPE\", \"glibc_tunables\": \"$GLIBC_TUNABLES\", \"cpu_capability\": \"$cap\", \"params\": 5}"
while read op; do
  case $op in
    forward) echo "{\"op\": \"forward\", \"ms\": 12.5, \"cpu_ms\": 20, \"sys_ms\": 1}" ;;
    gen) echo "{\"op\": \"gen\", \"ms\": 30, \"cpu_ms\": 50, \"sys_ms\": 2, \"prefill_ms\": 10, \"decode_ms\": 20}" ;;
    die) echo "dying" >&2; exit 3 ;;
    *) echo "{\"op\": \"$op\", \"error\": \"unknown op $op\"}" ;;
  esac
done
`

// TestTorchProc checks the serve protocol: the ready line, the environment, replies, errors.
func TestTorchProc(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "fake.sh")
	if err := os.WriteFile(script, []byte(fakeTorch), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPENBLAS_CORETYPE", "Prescott") // a tuned peer gets the engine's family instead
	p, err := startTorch("sh", script, torchPeer{tuned: true, coreType: "SkylakeX", capability: "AVX512"}, "--threads", "3")
	if err != nil {
		t.Fatal(err)
	}
	if p.Info.Torch != "9.9" || p.Info.Threads != 3 || p.Info.OMPWaitPolicy != "PASSIVE" || p.Info.Params != 5 ||
		p.Info.CoreType != "SkylakeX" || p.Info.Capability != "AVX512" || p.Info.Tunables != "glibc.malloc.hugetlb=1" {
		t.Errorf("info %+v", p.Info)
	}
	if s, err := p.Do("forward"); err != nil || s.ms != 12.5 || s.cpu != 20 || s.sys != 1 {
		t.Errorf("forward: %+v %v", s, err)
	}
	if s, err := p.Do("gen"); err != nil || s.prefill != 10 || s.decode != 20 {
		t.Errorf("gen: %+v %v", s, err)
	}
	if _, err := p.Do("bogus"); err == nil || !strings.Contains(err.Error(), "unknown op bogus") {
		t.Errorf("unknown op: %v", err)
	}
	if _, err := p.Do("die"); err == nil || !strings.Contains(err.Error(), "dying") {
		t.Errorf("a dead process: %v", err)
	}
	p.Close()

	if u, err := startTorch("sh", script, torchPeer{}, "--threads", "3"); err != nil {
		t.Errorf("untuned start: %v", err)
	} else {
		if u.Info.OMPWaitPolicy != "" || u.Info.CoreType != "Prescott" {
			t.Errorf("untuned process saw OMP_WAIT_POLICY=%q OPENBLAS_CORETYPE=%q: its environment is the user's", u.Info.OMPWaitPolicy, u.Info.CoreType)
		}
		u.Close()
	}
	if _, err := startTorch("sh", filepath.Join(dir, "missing.py"), torchPeer{tuned: true}); err == nil {
		t.Error("a missing script must be an error")
	}
	if err := os.WriteFile(script, []byte("echo boom >&2; exit 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := startTorch("sh", script, torchPeer{tuned: true}); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("a script that fails at start: %v", err)
	}
}

func TestAlternate(t *testing.T) {
	var order []string
	mk := func(name string, ms float64, failAt int) *contender {
		calls := 0
		return &contender{name: name, run: func() (sample, error) {
			calls++
			order = append(order, name)
			if calls == failAt {
				return sample{}, os.ErrDeadlineExceeded
			}
			return sample{prefill: ms}, nil
		}}
	}
	a, b, c := mk("a", 1, 0), mk("b", 2, 0), mk("c", 3, 2)
	b.repeat = 2 // twice in each round
	off := &contender{name: "off"}
	alternate("test", 1, 2, a, off, b, c)
	if want := []string{"a", "b", "b", "c", "a", "b", "b", "c", "a", "b", "b"}; !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	if len(a.runs) != 2 || len(b.runs) != 4 || c.err == nil || off.runs != nil {
		t.Errorf("runs a %d b %d, c err %v", len(a.runs), len(b.runs), c.err)
	}
	if s := c.series(func(s sample) float64 { return s.prefill }); s.ok() {
		t.Error("a failed contender has no series")
	}
}

const llmcOutput = `[GPT-2]
max_seq_len: 1024
num_parameters: 124475904
val loss 5.325522
step 0: train loss 5.356189 (took 16000.5 ms)
step 1: train loss 4.300870 (took 15012.25 ms)
step 2: train loss 4.623082 (took 15100 ms)
step 3: train loss 4.599362 (took 14999.0 ms)
`

func TestLLMCStepMS(t *testing.T) {
	ms, err := llmcStepMS(strings.NewReader(llmcOutput), 1, 2)
	if err != nil || !slices.Equal(ms, []float64{15012.25, 15100}) {
		t.Errorf("warm-up 1, 2 runs: %v %v", ms, err)
	}
	if _, err := llmcStepMS(strings.NewReader(llmcOutput), 1, 5); err == nil {
		t.Error("too few steps must be an error")
	}
}

// TestRunLLMC runs a stand-in train_gpt2 that never exits by itself: rookbench must take
// the steps it needs and stop it.
func TestRunLLMC(t *testing.T) {
	if s, err := runLLMC("", 2, 1, 2); err != nil || s.ok() || !strings.Contains(s.reason, "LLMC_DIR") {
		t.Errorf("no LLMC_DIR: %+v %v", s, err)
	}
	dir := t.TempDir()
	if s, _ := runLLMC(dir, 2, 1, 2); s.ok() || !strings.Contains(s.reason, "train_gpt2") {
		t.Errorf("no binary: %+v", s)
	}
	bin := filepath.Join(dir, "train_gpt2")
	body := "#!/bin/sh\n" + `echo "threads $OMP_NUM_THREADS"
for i in 0 1 2 3 4 5 6 7 8 9; do echo "step $i: train loss 4.0 (took 1$i.5 ms)"; sleep 0.05; done
exec sleep 600
`
	if err := os.WriteFile(bin, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	if s, _ := runLLMC(dir, 2, 1, 2); s.ok() || !strings.Contains(s.reason, "gpt2_124M.bin") {
		t.Errorf("no checkpoint: %+v", s)
	}
	if err := os.WriteFile(filepath.Join(dir, "gpt2_124M.bin"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s, err := runLLMC(dir, 2, 1, 3)
	if err != nil || !slices.Equal(s.samples, []float64{11.5, 12.5, 13.5}) {
		t.Errorf("steps %+v %v", s, err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %v: the stand-in was not stopped once its steps were read", d)
	}
}

func TestReportOutput(t *testing.T) {
	rep := &Report{Header: []string{"head"}, Notes: []string{"a note"}, Rows: []Row{
		valueRow("Group A", "a.x", "engine", "ms", measured([]float64{10, 12, 11}), 1e9),
		valueRow("Group A", "a.y", "peer", "ms", skipped("no peer here"), 1e9),
		ratioRow("Group B", "b.r", "speed-up", "peer / engine", measured([]float64{20}), measured([]float64{10}), true),
	}}
	var buf bytes.Buffer
	rep.WriteTable(&buf)
	out := buf.String()
	for _, want := range []string{"head", "Group A\n", "Group B\n", "11.0", "90.9", "not measured: no peer here", "2.00", "* a note"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	buf.Reset()
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || len(back.Rows) != 3 || *back.Rows[0].Median != 11 || back.Rows[1].Median != nil {
		t.Errorf("JSON round trip: %v %+v", err, back)
	}
}

// TestMemRows: each case gives its peak, its analytic size with the parts named, and their
// ratio; a case that failed says why; the main job's row needs the default model.
func TestMemRows(t *testing.T) {
	f := gpt2.Footprint{Weights: 100e6, Activations: 300e6}
	b := &bench{memRuns: map[string]memRun{
		"grpo_default": {res: memResult{Peak: 440e6, Footprint: f, Shape: "s"}},
		"sft_default":  {err: errors.New("no /proc")},
	}, main: mainJob{err: errors.New("the default model is not in the cache yet")}}
	var rows []Row
	b.memRows(func(r Row) { rows = append(rows, r) })
	byKey := map[string]Row{}
	for _, r := range rows {
		byKey[r.Key] = r
	}
	if r := byKey["mem.grpo_default_ratio"]; r.Median == nil || *r.Median != 1.1 {
		t.Errorf("ratio row %+v, want 440/400 = 1.1", r)
	}
	if r := byKey["mem.grpo_default_analytic"]; r.Median == nil || *r.Median != 400 || !strings.Contains(r.Note, "activations 300 MB") {
		t.Errorf("analytic row %+v", r)
	}
	if r := byKey["mem.sft_default"]; !strings.Contains(r.Note, "not measured: no /proc") {
		t.Errorf("failed case %+v", r)
	}
	if r := byKey["mem.main_job"]; !strings.Contains(r.Note, "not in the cache") {
		t.Errorf("main job row %+v", r)
	}
}

// TestDefaultModelCached: the bench finds the default model where the binary says its cache
// entry is (a fake binary here), a relative answer taken from the repository root as the main
// job runs there, and reports a binary that cannot say.
func TestDefaultModelCached(t *testing.T) {
	root, tmp := t.TempDir(), t.TempDir()
	bin := filepath.Join(root, "rookscript")
	fake := func(body string) {
		if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The fake answers only the question the bench must ask, with the script it was given.
	fake(`grep -qF 'require("defaultmodel").dir()' "$2" && [ "$1" = --quiet ] && echo cache/default-model-v9` + "\n")
	if cached, err := defaultModelCached(bin, root, tmp); err != nil || cached {
		t.Errorf("before the build: cached %v, %v", cached, err)
	}
	model := filepath.Join(root, "cache", "default-model-v9", "model")
	os.MkdirAll(model, 0o755)
	os.WriteFile(filepath.Join(model, "config.json"), []byte("{}"), 0o644)
	if cached, err := defaultModelCached(bin, root, tmp); err != nil || !cached {
		t.Errorf("after the build: cached %v, %v", cached, err)
	}
	fake("echo 'no module defaultmodel' >&2; exit 1\n")
	if _, err := defaultModelCached(bin, root, tmp); err == nil || !strings.Contains(err.Error(), "no module defaultmodel") {
		t.Errorf("a binary that fails: %v", err)
	}
	fake("exit 0\n")
	if _, err := defaultModelCached(bin, root, tmp); err == nil {
		t.Error("a binary that prints nothing: no error")
	}
}

// TestCountGRPO: a step's work by hand, for L = C = V = 1 (a block token is 24 + 4·(pos+1)
// FLOPs, a head row 2): one 3-token prompt, completions of 2 and 1 tokens.
func TestCountGRPO(t *testing.T) {
	cfg := gpt2.Config{VocabSize: 1, MaxSeqLen: 8, NumLayers: 1, NumHeads: 1, Channels: 1, LayerNormE: 1e-5}
	b := &rollout.Batch{Prompts: [][]int32{{0, 0, 0}}, Group: 2,
		Completions: []rollout.Completion{{Tokens: []int32{0, 0}}, {Tokens: []int32{0}}}}
	w := countGRPO(cfg, 10, b)
	if w.prefill != 28+32+36+2 {
		t.Errorf("prefill %v, want 98", w.prefill)
	}
	// The prompt but its last token once (positions 0, 1), then rows at positions 2, 3 and 2.
	if want := 28 + 32 + (36 + 2) + (40 + 2) + (36 + 2); w.forward != float64(want) {
		t.Errorf("forward %v, want %d", w.forward, want)
	}
	// One decode step: the products of one row (24 + 2 FLOPs); its attention reads the prompt's
	// 3 cached positions once and the completion's own 1 (8 bytes each); every weight read.
	if len(w.productFLOP) != 1 || w.productFLOP[0] != 24+2 || w.attendedBytes[0] != 8*(3+1) || w.weightBytes != 4*10 {
		t.Errorf("decode steps %v product FLOPs, %v attended bytes, %v weight bytes; want one step of 26 FLOPs, 32 bytes, 40 bytes",
			w.productFLOP, w.attendedBytes, w.weightBytes)
	}
}

// TestGRPORolloutFloor: the rollout's floor is its prefill's FLOPs at the SGEMM rate, then
// each decode step's floor by phase — its products bound by FLOPs or by the weights' bytes,
// whichever takes longer, then its attention's bytes — as the decode rows' floor is.
func TestGRPORolloutFloor(t *testing.T) {
	b := &bench{device: "cpu", threads: 2}
	b.gemm.pool = measured([]float64{100})     // GFLOP/s
	b.gemm.bandwidth = measured([]float64{10}) // GB/s
	b.grpo = grpoPhases{rollout: measured([]float64{1}), reference: measured([]float64{1}), update: measured([]float64{1}),
		total: measured([]float64{3}), tokPerS: measured([]float64{1}), work: []grpoWork{{
			prefill: 1e9, weightBytes: 1e8, forward: 1e9,
			productFLOP: []float64{2e9, 5e8}, attendedBytes: []float64{1e8, 2e8},
		}}}
	rows := map[string]Row{}
	b.grpoRows(func(r Row) { rows[r.Key] = r })
	// 10 ms of prefill; step 1: 20 ms of products (FLOPs) + 10 of attention; step 2: 10 ms of
	// products (the weights' bytes, more than 5 ms of FLOPs) + 20 of attention.
	if r := rows["floor.grpo_rollout_s"]; r.Median == nil || math.Abs(*r.Median-0.07) > 1e-12 {
		t.Errorf("rollout floor %+v, want 0.07 s", r)
	}
	// Sampled before each step at half the gemm section's rate and bandwidth, the floors are
	// those samples': twice as long.
	b.grpoRate, b.grpoBandwidth = measured([]float64{50}), measured([]float64{5})
	b.grpoRows(func(r Row) { rows[r.Key] = r })
	if r := rows["floor.grpo_rollout_s"]; r.Median == nil || math.Abs(*r.Median-0.14) > 1e-12 {
		t.Errorf("rollout floor at the steps' own samples %+v, want 0.14 s", r)
	}
}

// TestSectionFloors: a section's floors take the rate and bandwidth it sampled in its own
// rounds, however fast the run's other samples were; the run's, where it sampled none, or on
// a device.
func TestSectionFloors(t *testing.T) {
	b := &bench{device: "cpu", threads: 2}
	b.gemm.pool, b.gemm.bandwidth = measured([]float64{180}), measured([]float64{44})
	fr := b.sectionFloors(series{}, series{}, "in the rounds")
	if fr.gemm.median() != 180 || fr.bw.median() != 44 || strings.Contains(fr.gemmName+fr.bwName, "rounds") || fr.own {
		t.Errorf("none of its own: %+v, want the run's 180 and 44", fr)
	}
	b.genRate, b.genBandwidth = measured([]float64{170, 172}), measured([]float64{29, 30, 31})
	fr = b.sectionFloors(b.genRate, b.genBandwidth, "in the rounds")
	if fr.gemm.median() != 171 || fr.bw.median() != 30 || !strings.HasSuffix(fr.gemmName, ", in the rounds") || fr.bwName != "in the rounds" || !fr.own {
		t.Errorf("its own: %+v, want 171 and 30 from the rounds", fr)
	}
	fl := decodeFloors(8, 0, 1e8, 1, 1, 0, fr.gemm, fr.bw)
	if want := 4e8 / 30e9 * 1e3; math.Abs(fl.bytes.median()-want) > 1e-9 {
		t.Errorf("8-row bytes floor %v ms, want %v (the weights at the rounds' 30 GB/s)", fl.bytes.median(), want)
	}
	b.device = "cuda"
	if fr := b.sectionFloors(b.genRate, b.genBandwidth, "in the rounds"); fr.gemm.median() != 180 || fr.bw.median() != 44 || fr.own {
		t.Errorf("a device: %+v, want its own 180 and 44", fr)
	}
}

// A decode phase that beat its floor of bytes at the bandwidth shows the bandwidth was
// measured on a slower machine: that row count's decode ratios are flagged, in the rows and
// the summary. Products that beat a floor of FLOPs at the SGEMM rate prove nothing (the
// engine's kernel may outrun OpenBLAS's), nor does a phase at or above its floor.
func TestLooseFloors(t *testing.T) {
	v := func(x float64) *float64 { return &x }
	ms := func(x float64) series { return measured([]float64{x}) }
	phases := func(products, attention float64) decodePhases {
		return decodePhases{step: ms(products + attention + 1), products: ms(products), attention: ms(attention), rest: ms(1)}
	}
	for _, c := range []struct {
		name            string
		p64, p8         decodePhases
		byBytes64       bool
		loose64, loose8 bool
		summary         string
	}{
		{"8-row products below the bandwidth", phases(97, 13), phases(13.65, 2), false, false, true,
			"summary (Zen 4): engine / floor: decode64 1.270x, decode8 1.110x (loose floor)"},
		{"64-row products below the SGEMM rate", phases(97, 13), phases(18, 2), false, false, false,
			"summary (Zen 4): engine / floor: decode64 1.270x, decode8 1.110x"},
		{"64-row products below the bandwidth", phases(97, 13), phases(18, 2), true, true, false,
			"summary (Zen 4): engine / floor: decode64 1.270x (loose floor), decode8 1.110x"},
		{"64-row attention below its floor", phases(110, 8), phases(18, 2), false, true, false,
			"summary (Zen 4): engine / floor: decode64 1.270x (loose floor), decode8 1.110x"},
	} {
		b := &bench{genPhases: map[string]decodePhases{"": c.p64, "8": c.p8}}
		rows := []Row{{Key: "floor.decode_phases_ratio", Median: v(1.27)}, {Key: "floor.decode_ratio", Median: v(1.36)},
			{Key: "floor.decode_ratio8", Median: v(1.11), Note: "target ≤ 1.3"}, {Key: "floor.decode_phases_ratio8", Median: v(1.11)}}
		add := func(r Row) { rows = append(rows, r) }
		b.decodePhaseRows("g", "", 64, decodeFloor{products: ms(100), attention: ms(9), productFLOP: 16e9, productsByBytes: c.byBytes64}, add)
		b.decodePhaseRows("g", "8", 8, decodeFloor{products: ms(15), attention: ms(1), productFLOP: 2e9, productsByBytes: true}, add)
		rows = flagLooseFloors(rows)
		for _, r := range rows {
			want := c.loose64 && (r.Key == "floor.decode_ratio" || r.Key == "floor.decode_phases_ratio") ||
				c.loose8 && (r.Key == "floor.decode_ratio8" || r.Key == "floor.decode_phases_ratio8")
			if strings.HasPrefix(r.Key, "floor.decode_") && strings.Contains(r.Key, "ratio") && !strings.Contains(r.Key, "products") && !strings.Contains(r.Key, "attention") &&
				(r.Loose != want || want && !strings.HasPrefix(r.Note, "LOOSE FLOOR (its ")) {
				t.Errorf("%s: %s: loose %v, note %q", c.name, r.Key, r.Loose, r.Note)
			}
			if r.Key == "floor.decode_ratio8" && c.loose8 && !strings.HasSuffix(r.Note, "reads low). target ≤ 1.3") {
				t.Errorf("%s: the row's own note is lost: %q", c.name, r.Note)
			}
		}
		if got := summary(rows, "Zen 4"); got != c.summary {
			t.Errorf("%s: summary %q", c.name, got)
		}
	}
}

// A whole step that took less of its FLOP floor than the engine's own products took of
// theirs was timed in a faster window than its rate: its ratio is flagged, in the row and the
// summary. At or above that edge nothing is, nor are ratios that are not whole steps'.
func TestStepsBelowFloor(t *testing.T) {
	b := &bench{}
	b.gemm.pool, b.gemm.forward = measured([]float64{176}), measured([]float64{183})         // MatMul 4% faster
	b.gemm.poolProj, b.gemm.forwardProj = measured([]float64{177}), measured([]float64{170}) // here slower
	edge := b.kernelEdge()
	if math.Abs(edge-176.0/183) > 1e-12 {
		t.Fatalf("edge %v, want 176/183", edge)
	}
	if got := (&bench{}).kernelEdge(); got != 1 {
		t.Errorf("without a gemm section the edge is %v, want 1", got)
	}
	v := func(x float64) *float64 { return &x }
	rows := flagStepsBelowFloor([]Row{
		{Key: "floor.forward_ratio", Median: v(0.97), Note: "paired runs"},
		{Key: "floor.train_ratio", Median: v(0.89), Note: "paired runs"},
		{Key: "floor.grpo_total_ratio", Median: v(edge)},
		{Key: "floor.decode_ratio8", Median: v(0.5)}, // a bytes floor: the cache may hold weights
		{Key: "gemm.forward_vs_floor", Median: v(0.5)},
	}, edge)
	for _, r := range rows {
		want := r.Key == "floor.train_ratio"
		if r.Loose != want || want && (!strings.HasPrefix(r.Note, "LOOSE FLOOR (the step took 0.89x") || !strings.HasSuffix(r.Note, "reads low). paired runs")) {
			t.Errorf("%s: loose %v, note %q", r.Key, r.Loose, r.Note)
		}
	}
	if got, want := summary(rows, "Zen 4"), "summary (Zen 4): engine / floor: forward 0.970x, train 0.890x (loose floor), decode8 0.500x, grpo 0.962x"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}

// A peer that ran degraded kernels is flagged in its rows and in the engine's ratios
// against it, and the summary says so; the summary names the processor and reads the
// stable keys.
func TestDegradedPeerAndSummary(t *testing.T) {
	v := func(x float64) *float64 { return &x }
	rows := []Row{
		{Key: "floor.forward_ratio", Median: v(1.29)}, {Key: "floor.train_ratio", Median: v(1.31)},
		{Key: "torch.forward", Median: v(500)}, {Key: "speedup.forward_vs_torch", Median: v(3.83)},
		{Key: "engine.forward", Median: v(130)},
	}
	fair := flagDegraded(slices.Clone(rows), []torchInfo{{BLASCore: "Cooperlake", Capability: "AVX2"}})
	if got := summary(fair, "Zen 4"); got != "summary (Zen 4): engine / floor: forward 1.290x, train 1.310x; engine speed-up over tuned torch: forward 3.830x" {
		t.Errorf("summary %q", got)
	}
	bad := flagDegraded(slices.Clone(rows), []torchInfo{{BLAS: "libopenblasp-r0.3.21.so", BLASCore: "Prescott", Capability: "AVX2"}})
	for _, r := range bad {
		want := r.Key == "torch.forward" || r.Key == "speedup.forward_vs_torch"
		if r.Degraded != want || want && !strings.Contains(r.Note, "DEGRADED PEER (its OpenBLAS (libopenblasp-r0.3.21.so) runs its Prescott (SSE3) kernels)") {
			t.Errorf("%s: degraded %v, note %q", r.Key, r.Degraded, r.Note)
		}
	}
	if got := summary(bad, "Emerald Rapids"); !strings.Contains(got, "forward 3.830x (degraded peer)") {
		t.Errorf("summary %q", got)
	}
}

// TestGEMMFloorPaired: with the SGEMM rate sampled in the engine's own rounds, engine / floor
// is the median of the rounds' ratios, so a round slowed for both sides cancels; without it,
// the gemm section's rate divides the engine's median.
func TestGEMMFloorPaired(t *testing.T) {
	b := &bench{device: "cpu", threads: 2}
	b.gemm.pool = measured([]float64{100})
	eng := measured([]float64{10, 20, 12}) // ms; the second round ran at half speed
	rows := func(paired series) map[string]Row {
		out := map[string]Row{}
		b.gemmFloorRows("g", "forward", 1e9, eng, paired, func(r Row) { out[r.Key] = r })
		return out
	}
	r := rows(measured([]float64{100, 50, 100}))["floor.forward_ratio"] // GFLOP/s: 10, 20, 10 ms floors
	if r.Median == nil || *r.Median != 1 || *r.Max != 1.2 || !strings.Contains(r.Note, "paired runs") {
		t.Errorf("paired: %+v, want median 1, max 1.2, paired runs", r)
	}
	r = rows(series{})["floor.forward_ratio"]
	if r.Median == nil || *r.Median != 1.2 || !strings.Contains(r.Note, "ratio of medians") {
		t.Errorf("unpaired: %+v, want a median of 12 ms / 10 ms = 1.2, ratio of medians", r)
	}
	if ms := rows(measured([]float64{100, 50}))["floor.forward_ms"]; ms.Median == nil || *ms.Median != 10 {
		t.Errorf("a rate series of another length than the engine's: %+v, want the gemm section's 10 ms", ms)
	}
}

// TestTrainFloorNote: the note under the table states the train step's ratio as its row does:
// the median of the rounds' ratios when the rate was sampled in the step's rounds.
func TestTrainFloorNote(t *testing.T) {
	b := &bench{device: "cpu", threads: 2}
	b.gemm.pool = measured([]float64{100})
	b.engTrain = measured([]float64{10, 40, 12}) // ms; the second round ran at a quarter speed
	b.trainRate = measured([]float64{100, 25, 100})
	if got := strings.Join(b.notes(2e9, 1e9, 0, 0), "\n"); !strings.Contains(got, "takes 1.00x its round's floor") {
		t.Errorf("paired note:\n%s\nwant the rounds' median ratio, 1.00x", got)
	}
	b.trainRate = series{}
	if got := strings.Join(b.notes(2e9, 1e9, 0, 0), "\n"); !strings.Contains(got, "takes 1.20x that") {
		t.Errorf("unpaired note:\n%s\nwant 12 ms over the gemm section's 10 ms, 1.20x", got)
	}
}

// TestFloorRateFastest: the floors' SGEMM rate is the fastest median among the gemm
// section's samples of the product and of the down projection and the rounds' samples of the
// product, so that a section slowed by another process does not lower the floors.
func TestFloorRateFastest(t *testing.T) {
	b := &bench{device: "cpu", threads: 2}
	b.gemm.pool = measured([]float64{97, 96, 98}) // measured on one core of two
	if got := b.floorRate().median(); got != 97 {
		t.Errorf("the gemm section alone: %v, want 97", got)
	}
	b.fwdRate, b.trainRate = measured([]float64{180, 181, 179}), measured([]float64{170, 175})
	if got := b.floorRate().median(); got != 180 {
		t.Errorf("with the rounds' samples: %v, want the forward's 180", got)
	}
	b.gemm.pool = measured([]float64{190})
	if got := b.floorRate().median(); got != 190 {
		t.Errorf("a faster gemm section: %v, want 190", got)
	}
	b.gemm.poolProj = measured([]float64{195, 196, 194})
	if got := b.floorRate().median(); got != 195 {
		t.Errorf("a faster down projection in the gemm section: %v, want 195", got)
	}
	b.genRate = measured([]float64{199, 198, 120}) // one sample preempted
	if got := b.floorRate().median(); got != 198 {
		t.Errorf("a faster window in the generation rounds: %v, want 198", got)
	}
	b.grpoRate = measured([]float64{201, 200, 202})
	if got := b.floorRate().median(); got != 201 {
		t.Errorf("a faster window beside the GRPO steps: %v, want 201", got)
	}
	b.device = "cuda"
	b.gemm.pool = measured([]float64{50000})
	if got := b.floorRate().median(); got != 50000 {
		t.Errorf("a device's floor is its own peak product: %v", got)
	}
}

// TestBandwidthRateFastest: the floors' bandwidth is the fastest median of the gemm section's
// samples, the generation rounds' and those beside the GRPO steps, and says which; a device
// keeps its own copy bandwidth.
func TestBandwidthRateFastest(t *testing.T) {
	b := &bench{device: "cpu", threads: 2}
	b.gemm.bandwidth = measured([]float64{21.8, 22, 21}) // the gemm section under another process's load
	if got, _ := b.bandwidthRate(); got.median() != 21.8 {
		t.Errorf("the gemm section alone: %v, want 21.8", got.median())
	}
	b.genBandwidth = measured([]float64{31, 30.5, 31.5})
	if got, where := b.bandwidthRate(); got.median() != 31 || !strings.Contains(where, "generation") {
		t.Errorf("with the generation rounds' samples: %v (%s), want 31 from the rounds", got.median(), where)
	}
	b.gemm.bandwidth = measured([]float64{35})
	if got, where := b.bandwidthRate(); got.median() != 35 || !strings.Contains(where, "gemm") {
		t.Errorf("a faster gemm section: %v (%s), want 35 from the gemm section", got.median(), where)
	}
	b.grpoBandwidth = measured([]float64{34, 36, 37})
	if got, where := b.bandwidthRate(); got.median() != 36 || !strings.Contains(where, "GRPO") {
		t.Errorf("a faster window beside the GRPO steps: %v (%s), want 36 from there", got.median(), where)
	}
	b.device = "cuda"
	b.gemm.bandwidth, b.genBandwidth = measured([]float64{2000}), measured([]float64{40})
	if got, _ := b.bandwidthRate(); got.median() != 2000 {
		t.Errorf("a device's bandwidth is its own: %v", got.median())
	}
}

// TestCPUIdle reads the cpuidle driver, and haltpoll's polling, from a sysfs tree.
func TestCPUIdle(t *testing.T) {
	for _, c := range []struct{ driver, pollNS, want string }{
		{"", "", ""},
		{"none", "", ""},
		{"intel_idle", "", "intel_idle"},
		{"haltpoll", "0", "haltpoll, no polling (an idle vCPU halts at once: waking a thread on it is a hypervisor exit)"},
		{"haltpoll", "200000", "haltpoll, polling up to 200 µs"},
		{"haltpoll", "", "haltpoll"},
	} {
		root := t.TempDir()
		write := func(path, v string) {
			if v == "" {
				return
			}
			p := filepath.Join(root, path)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write("sys/devices/system/cpu/cpuidle/current_driver", c.driver)
		write("sys/module/haltpoll/parameters/guest_halt_poll_ns", c.pollNS)
		if got := cpuIdle(root); got != c.want {
			t.Errorf("driver %q, polling %q: %q, want %q", c.driver, c.pollNS, got, c.want)
		}
	}
}
