package launch

import (
	"os"
	"slices"
	"unsafe"

	"github.com/rookscript/rookscript/engine/backend/cuda/kernels"
)

// A decode step's launches run as one graph once they repeat. Between BeginStep and EndStep
// the backend's launches wait in a list; the first other driver call (the download of the
// step's draws, a copy, an allocation) issues them first. A list equal to the one the last
// graph was made of runs as that graph: one driver call and no gaps between the kernels on the
// device. A list equal to the last step's becomes a graph (a steady step repeats exactly: its
// buffers, sizes and scalars are the last step's, its inputs already on the device); anything
// else runs launch by launch. The comparison covers every kernel, shape and argument, so a
// graph runs only where the host would have made exactly its launches: the graph never decides
// what runs. ROOKSCRIPT_CUDA_GRAPHS=0 turns it off.

// Graphs is a driver that makes graphs of launches and runs them (CUDA graphs on a GPU; the
// emulator replays the list).
type Graphs interface {
	// Graph makes a graph of the launches, in order, each after the one before.
	Graph(ls []Launch) (Graph, error)
	// LaunchGraph runs g, ordered after earlier work as a launch is.
	LaunchGraph(g Graph)
	// DestroyGraph releases g; a launch of it still running completes.
	DestroyGraph(g Graph)
}

// Graph is a driver's graph.
type Graph any

// Launch is one kernel launch as a graph holds it (its arguments' bits; no Mem).
type Launch struct {
	Kernel      kernels.Kernel
	Grid, Block Dim
	Shared      int
	Args        []Arg
}

func (l Launch) same(o Launch) bool {
	return l.Kernel == o.Kernel && l.Grid == o.Grid && l.Block == o.Block && l.Shared == o.Shared &&
		slices.EqualFunc(l.Args, o.Args, func(a, b Arg) bool { return a.Bits == b.Bits && a.Kind == b.Kind })
}

func sameLaunches(a, b []Launch) bool { return slices.EqualFunc(a, b, Launch.same) }

// stepGraphs is a backend's graphs of decode steps: the last graph made and the launches of
// the last step.
type stepGraphs struct {
	off   bool
	err   error // why the driver could not make a graph, which turned them off
	step  *step
	graph []Launch // what b.g was made of
	g     Graph
	last  []Launch
}

// step is the driver during a step: launches wait, any other call issues them first.
type step struct {
	Driver
	b    *Backend
	todo []Launch
	keep [][]Arg // the waiting launches' arguments, their Mem reachable until issued
}

// BeginStep starts a decode step (gpt2.Model.DecodeSample); EndStep ends it.
func (b *Backend) BeginStep() {
	if _, ok := b.d.(Graphs); !ok || b.graphs.off || b.graphs.step != nil {
		return
	}
	b.graphs.step = &step{Driver: b.d, b: b}
	b.d = b.graphs.step
}

func (b *Backend) EndStep() {
	s := b.graphs.step
	if s == nil {
		return
	}
	s.flush()
	b.d, b.graphs.step = s.Driver, nil
}

func graphsOff() bool { return os.Getenv("ROOKSCRIPT_CUDA_GRAPHS") == "0" }

// StepsAsGraphs reports whether a decode step that repeats the last one runs as a graph.
func (b *Backend) StepsAsGraphs() bool {
	_, ok := b.d.(Graphs)
	return ok && !b.graphs.off
}

// GraphError is why the driver could not make a graph, where it could not (decode steps then
// launch one by one).
func (b *Backend) GraphError() error { return b.graphs.err }

func (s *step) Launch(k kernels.Kernel, grid, block Dim, shared int, args []Arg) {
	bits := make([]Arg, len(args))
	for i, a := range args {
		bits[i] = Arg{Bits: a.Bits, Kind: a.Kind}
	}
	s.todo = append(s.todo, Launch{Kernel: k, Grid: grid, Block: block, Shared: shared, Args: bits})
	s.keep = append(s.keep, args)
}

// flush issues the waiting launches: as the last graph, as a new one, or one by one.
func (s *step) flush() {
	if len(s.todo) == 0 {
		return
	}
	g, gs := s.Driver.(Graphs), &s.b.graphs
	if gs.g != nil && sameLaunches(gs.graph, s.todo) || sameLaunches(gs.last, s.todo) && gs.remake(g, s.todo) {
		g.LaunchGraph(gs.g)
	} else {
		for _, l := range s.todo {
			s.Driver.Launch(l.Kernel, l.Grid, l.Block, l.Shared, l.Args)
		}
	}
	gs.last, s.todo, s.keep = s.todo, nil, nil
}

// remake replaces the graph with one of ls, reporting whether the driver could make it; where
// it could not, steps launch one by one from then on.
func (gs *stepGraphs) remake(g Graphs, ls []Launch) bool {
	if gs.off {
		return false
	}
	if gs.g != nil {
		g.DestroyGraph(gs.g)
		gs.graph, gs.g = nil, nil
	}
	made, err := g.Graph(ls)
	if err != nil {
		gs.off, gs.err = true, err
		return false
	}
	gs.graph, gs.g = ls, made
	return true
}

func (s *step) Alloc(bytes int, zero bool) uintptr {
	s.flush()
	return s.Driver.Alloc(bytes, zero)
}

func (s *step) Free(p uintptr) {
	s.flush()
	s.Driver.Free(p)
}

func (s *step) HtoD(dst uintptr, src unsafe.Pointer, bytes int) {
	s.flush()
	s.Driver.HtoD(dst, src, bytes)
}

func (s *step) DtoH(dst unsafe.Pointer, src uintptr, bytes int) {
	s.flush()
	s.Driver.DtoH(dst, src, bytes)
}

func (s *step) Sgemm(transA, transB bool, m, n, k int, alpha float32, a uintptr, lda int, bm uintptr, ldb int, beta float32, c uintptr, ldc int) {
	s.flush()
	s.Driver.Sgemm(transA, transB, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc)
}
