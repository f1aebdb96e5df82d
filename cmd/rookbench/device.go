package main

import (
	"fmt"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/device"
	"github.com/rookscript/rookscript/engine/gpt2"
)

// The GPU side of rookbench (-device cuda): one backend for every section, the ceilings its
// floors use measured through that backend (cuBLAS's SGEMM rate, the device's copy
// bandwidth), and the device memory each section held.

// Shapes of the device's SGEMM rates: the MLP's c_fc product over a GRPO minibatch of 16
// sequences × 144 tokens, and a large square product, the rate the floors use.
const (
	devGEMMRows       = 16 * 144
	devGEMMPeak       = 8192
	devBandwidthBytes = 1 << 30
)

// finish waits until the device has done the work queued on it: a download is ordered after
// every earlier launch. On the CPU it copies one float.
func finish(m *gpt2.Model) { finishBuf(m.B, m.Params) }

func finishBuf(be backend.Backend, b backend.Buf) {
	var one [1]float32
	be.Download(one[:], b.Slice(0, 1))
}

// deviceMemory is what an accelerator backend says of its memory (launch.Backend).
type deviceMemory interface {
	Memory() (live, peak int64)
	ResetPeak()
}

// backend is the engine's backend: opened once, so that a GPU has one context for every
// section.
func (b *bench) backend() (backend.Backend, error) {
	if b.be == nil {
		be, err := device.Open(b.device, device.Options{Threads: b.threads})
		if err != nil {
			return nil, err
		}
		b.be = be
	}
	return b.be, nil
}

// deviceName describes the GPU (empty on the CPU, whose name the header gives).
func (b *bench) deviceName() string {
	if b.device == "cpu" || b.be == nil {
		return ""
	}
	if d, ok := b.be.(interface{ Describe() string }); ok {
		return d.Describe()
	}
	return b.be.Name()
}

// section runs f and records the most device memory the backend held meanwhile.
func (b *bench) section(name string, f func()) {
	if dm, ok := b.be.(deviceMemory); ok {
		dm.ResetPeak()
	}
	f()
	if dm, ok := b.be.(deviceMemory); ok {
		_, peak := dm.Memory()
		b.devPeak[name] = peak
	}
}

// measureDeviceGEMM measures the device's ceilings: cuBLAS SGEMM at the model's shape and at a
// large square (the floors' rate), the forward's own MatMul at the model's shape, and the copy
// bandwidth.
func (b *bench) measureDeviceGEMM(_, warmup, runs int) (gemmResults, error) {
	var g gemmResults
	be, err := b.backend()
	if err != nil {
		return g, err
	}
	r := gemmRates(runs,
		newGEMMSampler(be, warmup, fmt.Sprintf("SGEMM %d×%d×%d", devGEMMRows, 3072, 768), devGEMMRows, 768, 3072, true),
		newGEMMSampler(be, warmup, fmt.Sprintf("MatMul %d×%d×%d", devGEMMRows, 3072, 768), devGEMMRows, 768, 3072, false))
	g.single, g.forward = r[0], r[1]
	g.pool = gemmRateAt(be, warmup, runs, fmt.Sprintf("SGEMM %d³", devGEMMPeak), devGEMMPeak, devGEMMPeak, devGEMMPeak, true)
	g.blasThreads = skipped("OpenBLAS threads: the CPU's")
	g.bandwidth = deviceBandwidth(be, warmup, runs)
	return g, nil
}

// deviceBandwidth is the rate of the backend's Copy between two 1 GiB buffers, counting the
// bytes read and the bytes written, in GB/s.
func deviceBandwidth(be backend.Backend, warmup, runs int) series {
	n := devBandwidthBytes / 4
	src, dst := be.Alloc(n), be.Alloc(n)
	be.Fill(src, 1.5)
	for range max(warmup, 1) {
		be.Copy(dst, src)
	}
	finishBuf(be, dst)
	const reps = 20
	var out []sample
	for i := range runs {
		s, _ := timed(func() (sample, error) {
			for range reps {
				be.Copy(dst, src)
			}
			finishBuf(be, dst)
			return sample{}, nil
		})
		out = append(out, s)
		progress("  device copy bandwidth %d/%d: %.0f GB/s", i+1, runs, 2*reps*devBandwidthBytes/s.ms/1e6)
	}
	return fromRuns(out, func(s sample) float64 { return 2 * reps * devBandwidthBytes / s.ms / 1e6 })
}

// floorRate is the run's SGEMM rate, which a floor takes where its section sampled none of its
// own (sectionFloors): the CPU backend's pool (its one thread with -threads 1), or the device's
// peak product. On the CPU the same product is also sampled in the forward's, the train
// step's and the generation's rounds and beside the GRPO steps, and the MLP's down projection
// through OpenBLAS on the pool in the gemm section, and it is the fastest median of them: a
// rate is a ceiling, and a section measured while another process held a core (a run here
// read 97 GFLOP/s on 1.0 of 2 cores, then 180 in the rounds after it) measured the machine's
// load. (Another run read 154 at the ceiling's shape and 177 at the down projection's minutes
// later; its GRPO step came out at 0.96 of floors at 162, the fastest of the others. A third
// read 170 in the gemm section and ran its 64-row decode steps 11% faster than the runs beside
// it: a window faster than every one the rate was sampled in.)
func (b *bench) floorRate() series {
	if b.device != "cpu" {
		return b.gemm.pool
	}
	base := b.gemm.pool
	if b.threads == 1 {
		base = b.gemm.single
	}
	return fastest(namedSeries{s: base}, namedSeries{s: b.gemm.poolProj}, namedSeries{s: b.fwdRate},
		namedSeries{s: b.trainRate}, namedSeries{s: b.genRate}, namedSeries{s: b.grpoRate}).s
}

// bandwidthRate is the run's memory bandwidth, as floorRate is its rate, and which samples it
// is: on the CPU the fastest median of the gemm section's samples, those taken in the
// generation rounds and those beside the GRPO steps, for the reason floorRate gives (a run
// here read 21.8 GB/s in a gemm section disturbed by another process); on a device, its copy
// bandwidth.
func (b *bench) bandwidthRate() (series, string) {
	gemm := namedSeries{b.gemm.bandwidth, "the gemm section's"}
	if b.device != "cpu" {
		return gemm.s, gemm.name
	}
	best := fastest(gemm, namedSeries{b.genBandwidth, "sampled in the generation rounds"}, namedSeries{b.grpoBandwidth, "sampled beside the GRPO steps"})
	return best.s, best.name
}

// sectionFloors are the SGEMM rate and the memory bandwidth that bound a section's workload,
// and what each is: on the CPU, the section's own samples of them, taken in the rounds of its
// workload (alternate), as the forward's and the train step's rates are, so that a floor and
// the step it bounds see the same machine; on a device, or when the section has none, the
// run's (floorRate, bandwidthRate). The fastest of a run's samples is a window the step may
// not have had: in one run here the gemm section read 44.3 GB/s and the generation rounds,
// minutes later, 29.4, and the 8-row decode step came out at 1.92× a floor at the first and
// 1.27× at the second. A floor sampled in a window slower than its step's is flagged loose
// (flagLooseFloors, flagStepsBelowFloor).
func (b *bench) sectionFloors(rate, bw series, where string) floorRates {
	if b.device == "cpu" && rate.ok() && bw.ok() {
		return floorRates{gemm: rate, bw: bw, gemmName: b.rateName() + ", " + where, bwName: where, own: true}
	}
	mem, memName := b.bandwidthRate()
	return floorRates{gemm: b.floorRate(), bw: mem, gemmName: b.rateName(), bwName: memName}
}

// floorRates are a section's floors' SGEMM rate and memory bandwidth (sectionFloors).
type floorRates struct {
	gemm, bw         series
	gemmName, bwName string // which samples each is
	own              bool   // the section's own, not the run's
}

// namedSeries is a series of rates and which samples they are.
type namedSeries struct {
	s    series
	name string
}

// fastest is the measured candidate of the highest median, the first of them on a tie; the
// first candidate when none was measured.
func fastest(cands ...namedSeries) namedSeries {
	best := cands[0]
	for _, c := range cands[1:] {
		if c.s.ok() && (!best.s.ok() || c.s.median() > best.s.median()) {
			best = c
		}
	}
	return best
}

// floorRateSampler is the sampler of floorRate's product that the CPU sections run beside
// their workloads, made once.
func (b *bench) floorRateSampler() *gemmSampler {
	if b.rateSampler == nil {
		b.rateSampler = newGEMMSampler(b.be, b.warmup, "SGEMM floor rate", gemmN, gemmC, gemmOC, true)
	}
	return b.rateSampler
}

// floorBandwidthSampler is bandwidthRate's sampler, likewise; its 1 GiB buffer is touched once.
func (b *bench) floorBandwidthSampler() *bandwidthSampler {
	if b.bwSampler == nil {
		b.bwSampler = newBandwidthSampler(b.threads)
	}
	return b.bwSampler
}

// rateName says which rate floorRate is.
func (b *bench) rateName() string {
	switch {
	case b.device != "cpu":
		return fmt.Sprintf("cuBLAS's SGEMM rate at %d³", devGEMMPeak)
	case b.threads == 1:
		return "the single thread's SGEMM rate"
	}
	return "the pool's SGEMM rate"
}

func (b *bench) deviceGEMMRows(add func(Row)) {
	gr := "cuBLAS SGEMM (FP32), the forward's batch-invariant MatMul, and the device's memory bandwidth"
	add(valueRow(gr, "gemm.device_model", fmt.Sprintf("%d×768 · 768×3072: the MLP's product over a GRPO minibatch", devGEMMRows), "GFLOP/s", b.gemm.single, 0))
	add(valueRow(gr, "gemm.device_forward", "the same through MatMul (rkcu_matmul_nt: the forward's products)", "GFLOP/s", b.gemm.forward, 0))
	add(ratioRow(gr, "gemm.device_forward_vs_sgemm", "cuBLAS rate / MatMul rate", "the price of batch invariance", b.gemm.single, b.gemm.forward, false))
	add(valueRow(gr, "gemm.device_peak", fmt.Sprintf("%d³: the floors' rate", devGEMMPeak), "GFLOP/s", b.gemm.pool, 0))
	add(valueRow(gr, "mem.bandwidth", "device-to-device Copy of 1 GiB, bytes read + written", "GB/s", b.gemm.bandwidth, 0))
}

// devMemRows are the device memory each section held at most: the engine's buffers
// (parameters, gradients, optimizer moments, activations, KV caches, scratch), not the
// context, the kernels' code or cuBLAS's workspace.
func (b *bench) devMemRows(add func(Row)) {
	gr := "device memory held by the engine's buffers, most at any time in the section (context, code and cuBLAS workspace not counted)"
	for _, s := range []struct{ key, what string }{
		{"engine", fmt.Sprintf("forward and train step, B=%d T=%d (model, gradients, AdamW moments, activations)", b.batch, b.seq)},
		{"gen", fmt.Sprintf("generation, %d and %d sequences (+ the model and what the train step left)", genPrompts*genGroup, genGroup)},
		{"grpo", "GRPO step (+ the reference model)"},
	} {
		if peak, ok := b.devPeak[s.key]; ok {
			add(valueRow(gr, "devmem."+s.key, s.what, "MB", measured([]float64{float64(peak) / 1e6}), 0))
		}
	}
}
