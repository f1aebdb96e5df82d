package emu

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/backend/cuda/kernels"
	"github.com/rookscript/rookscript/engine/backend/cuda/launch"
	"github.com/rookscript/rookscript/engine/gpt2/gpt2test"
	"github.com/rookscript/rookscript/engine/internal/paritytest"
	"github.com/rookscript/rookscript/engine/philox"
	"github.com/rookscript/rookscript/engine/rollout"
)

// deviceWords runs a self-test kernel of signature (out, in int*, n) over one block: in's
// words uploaded, outWords·n words of out downloaded.
func deviceWords(name, outKind string, in []uint32, n, outWords int) []uint64 {
	d := Driver{}
	inDev, outDev := d.Alloc(4*len(in), false), d.Alloc(8*n*outWords, true)
	defer d.Free(inDev)
	defer d.Free(outDev)
	d.HtoD(inDev, unsafe.Pointer(&in[0]), 4*len(in))
	d.Launch(kernels.Kernel{Name: name, Sig: outKind + "Ii"}, launch.D1(1), launch.D1(64), 0,
		[]launch.Arg{{Bits: uint64(outDev), Kind: outKind[0]}, {Bits: uint64(inDev), Kind: 'I'}, {Bits: uint64(n), Kind: 'i'}})
	out := make([]uint64, n*outWords)
	if outKind == "D" {
		d.DtoH(unsafe.Pointer(&out[0]), outDev, 8*len(out))
		return out
	}
	words := make([]uint32, n*outWords)
	d.DtoH(unsafe.Pointer(&words[0]), outDev, 4*len(words))
	for i, w := range words {
		out[i] = uint64(w)
	}
	return out
}

// TestDevicePhilox holds the device's generator to Random123's known answers and its
// uniforms to package philox's, bit for bit.
func TestDevicePhilox(t *testing.T) {
	kat := []struct{ in, want []uint32 }{
		{[]uint32{0, 0, 0, 0, 0, 0}, []uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{[]uint32{^uint32(0), ^uint32(0), ^uint32(0), ^uint32(0), ^uint32(0), ^uint32(0)},
			[]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{[]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0},
			[]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	}
	var in []uint32
	for _, c := range kat {
		in = append(in, c.in...)
	}
	got := deviceWords("emutest_philox", "I", in, len(kat), 4)
	for i, c := range kat {
		for k, w := range c.want {
			if uint32(got[4*i+k]) != w {
				t.Errorf("block %d word %d: %08x, want %08x", i, k, got[4*i+k], w)
			}
		}
	}

	r := rand.New(rand.NewPCG(1, 2))
	type draw struct {
		seed, stream uint64
		pos          uint32
	}
	draws := []draw{{0, 0, 0}, {^uint64(0), ^uint64(0), ^uint32(0)}}
	for range 200 {
		draws = append(draws, draw{r.Uint64(), r.Uint64(), r.Uint32N(4096)})
	}
	in = in[:0]
	for _, x := range draws {
		in = append(in, uint32(x.seed), uint32(x.seed>>32), uint32(x.stream), uint32(x.stream>>32), x.pos)
	}
	us := deviceWords("emutest_uniform", "D", in, len(draws), 1)
	for i, x := range draws {
		if want := philox.Uniform(x.seed, x.stream, x.pos); us[i] != math.Float64bits(want) {
			t.Fatalf("uniform %+v: device %v, philox.Uniform %v", x, math.Float64frombits(us[i]), want)
		}
	}
}

// hostOnly is a backend without device sampling: the same kernels, the draws on the host.
type hostOnly struct{ backend.Backend }

func (hostOnly) BatchInvariant() bool { return true }

// byteCounting is the emulator's driver counting the bytes copied each way.
type byteCounting struct {
	Driver
	toHost, toDevice, launches int
	graphs, graphKernels       int
}

func (c *byteCounting) LaunchGraph(g launch.Graph) {
	c.graphs++
	c.graphKernels += len(g.([]launch.Launch))
	c.Driver.LaunchGraph(g)
}

func (c *byteCounting) Launch(k kernels.Kernel, grid, block launch.Dim, shared int, args []launch.Arg) {
	c.launches++
	c.Driver.Launch(k, grid, block, shared, args)
}

func (c *byteCounting) DtoH(dst unsafe.Pointer, src uintptr, bytes int) {
	c.toHost += bytes
	c.Driver.DtoH(dst, src, bytes)
}

func (c *byteCounting) HtoD(dst uintptr, src unsafe.Pointer, bytes int) {
	c.toDevice += bytes
	c.Driver.HtoD(dst, src, bytes)
}

// noGraphs is a driver whose graphs cannot be made.
type noGraphs struct{ byteCounting }

func (*noGraphs) Graph([]launch.Launch) (launch.Graph, error) {
	return nil, errors.New("no graphs here")
}

// TestRolloutSamplesOnDevice: a rollout on a backend that samples on the device draws the
// tokens and records the logprobs a rollout with the same kernels draws on the host, bit for
// bit (repeated prompts, groups, the stop token, greedy), though its steps run as graphs and
// finished completions ride along in its decode batch; and it moves 8 bytes a drawn token to
// the host: its token and logprob, never a row of the distribution.
func TestRolloutSamplesOnDevice(t *testing.T) {
	cfg := gpt2test.Tiny()
	params := gpt2test.Params(cfg, 11, 1)
	d := &byteCounting{}
	dev := gpt2test.New(t, launch.New(d), cfg, params)
	host := gpt2test.New(t, hostOnly{launch.New(Driver{})}, cfg, params)
	if !dev.SamplesOnDevice() || host.SamplesOnDevice() {
		t.Fatal("the emulator's backend must sample on the device, its wrapper not")
	}
	prompts := [][]int32{{1, 2, 3, 4}, {5, 6}, {1, 2, 3, 4}}
	for _, greedy := range []bool{false, true} {
		rc := rollout.Config{Group: 2, MaxNewTokens: 8, Temperature: 0.8, Seed: 5, StopToken: gpt2test.Stop}
		rc.Greedy = greedy
		*d = byteCounting{}
		got, err := rollout.NewSampler(dev).Generate(context.Background(), prompts, rc)
		if err != nil {
			t.Fatal(err)
		}
		toHost := d.toHost
		want, err := rollout.NewSampler(host).Generate(context.Background(), prompts, rc)
		if err != nil {
			t.Fatal(err)
		}
		stopped := 0
		for k, c := range want.Completions {
			g := got.Completions[k]
			if !slices.Equal(g.Tokens, c.Tokens) || !slices.EqualFunc(g.LogProbs, c.LogProbs, sameBits) || g.Truncated != c.Truncated {
				t.Fatalf("greedy %v, completion %d: device %v %v, host %v %v", greedy, k, g.Tokens, g.LogProbs, c.Tokens, c.LogProbs)
			}
			if !c.Truncated {
				stopped++
			}
		}
		if !greedy && (stopped == 0 || stopped == len(want.Completions)) {
			t.Errorf("%d of %d completions stopped: the test should see both ends", stopped, len(want.Completions))
		}
		if d.graphs == 0 {
			t.Errorf("greedy %v: no decode step ran as a graph", greedy)
		}
		if !greedy && got.Stats.RiderTokens == 0 {
			t.Error("no finished completion rode along in the decode batch")
		}
		if want := 8 * (got.Stats.NewTokens + got.Stats.RiderTokens); toHost != want {
			t.Errorf("greedy %v: %d bytes to the host for %d new tokens and %d riders', want %d (a token and a logprob each)",
				greedy, toHost, got.Stats.NewTokens, got.Stats.RiderTokens, want)
		}
	}
}

func sameBits(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }

// TestDecodeStepSteadyState: a decode step whose inputs are the last step's own (its tokens
// the last draws', its positions one further, its slots, rows and streams the same) copies
// nothing to the device and 8 bytes a row to the host, and from the third step on runs as one
// graph of the second step's launches; a step whose batch changed uploads and runs launch by
// launch.
func TestDecodeStepSteadyState(t *testing.T) {
	cfg := gpt2test.Tiny()
	d := &byteCounting{}
	const prompts, group = 2, 3
	kernels := 0
	counts := paritytest.DecodeSteps(t, launch.New(d), cfg, prompts, group, 5, func() paritytest.Counts {
		c := paritytest.Counts{Launches: d.launches, Graphs: d.graphs, ToHost: d.toHost, ToDevice: d.toDevice}
		if d.graphs > 0 {
			kernels = d.graphKernels / d.graphs
		}
		*d = byteCounting{}
		return c
	})
	n := prompts * group
	for step, c := range counts[:len(counts)-1] {
		if step > 0 && c.ToDevice != 0 {
			t.Errorf("step %d: %d bytes to the device in the steady state, want 0", step, c.ToDevice)
		}
		if c.ToHost != 8*n {
			t.Errorf("step %d: %d bytes to the host, want %d", step, c.ToHost, 8*n)
		}
		want := paritytest.DecodeStepLaunches(cfg.NumLayers, step == 0)
		switch {
		case step < 2 && (c.Launches != want || c.Graphs != 0):
			t.Errorf("step %d: %d launches and %d graphs, want %d launches", step, c.Launches, c.Graphs, want)
		case step >= 2 && (c.Launches != 0 || c.Graphs != 1):
			t.Errorf("step %d: %d launches and %d graphs, want one graph", step, c.Launches, c.Graphs)
		}
	}
	if kernels != paritytest.DecodeStepLaunches(cfg.NumLayers, false) {
		t.Errorf("the steady step's graph holds %d kernels, want %d", kernels, paritytest.DecodeStepLaunches(cfg.NumLayers, false))
	}
	if last := counts[len(counts)-1]; last.ToDevice == 0 || last.Graphs != 0 {
		t.Errorf("a step after a completion left the batch: %+v, want copies to the device and no graph", last)
	}

	// A driver that cannot make the graph: the step runs launch by launch, graphs stay off,
	// and the backend says why.
	failing := &noGraphs{byteCounting: byteCounting{}}
	fb := launch.New(failing)
	counts = paritytest.DecodeSteps(t, fb, cfg, prompts, group, 4, func() paritytest.Counts {
		c := paritytest.Counts{Launches: failing.launches, Graphs: failing.graphs}
		failing.byteCounting = byteCounting{}
		return c
	})
	if c := counts[3]; c.Graphs != 0 || c.Launches != paritytest.DecodeStepLaunches(cfg.NumLayers, false) || fb.GraphError() == nil {
		t.Errorf("no graphs to be had: a steady step made %d launches and %d graphs, error %v", c.Launches, c.Graphs, fb.GraphError())
	}

	// With graphs turned off every step launches its kernels one by one.
	t.Setenv("ROOKSCRIPT_CUDA_GRAPHS", "0")
	*d = byteCounting{}
	counts = paritytest.DecodeSteps(t, launch.New(d), cfg, prompts, group, 4, func() paritytest.Counts {
		c := paritytest.Counts{Launches: d.launches, Graphs: d.graphs}
		*d = byteCounting{}
		return c
	})
	if c := counts[3]; c.Graphs != 0 || c.Launches != paritytest.DecodeStepLaunches(cfg.NumLayers, false) {
		t.Errorf("ROOKSCRIPT_CUDA_GRAPHS=0: a steady step made %d launches and %d graphs", c.Launches, c.Graphs)
	}
}
