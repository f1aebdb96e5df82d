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

// Launch is one kernel launch as a graph holds it.
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
	in    bool  // a step is under way: b.d is step
	step  step
	graph []Launch // what g was made of
	g     Graph
	last  []Launch
}

// step is the driver during a step: launches wait, any other call issues them first.
type step struct {
	Driver
	b    *Backend
	todo []Launch // waiting; their arguments' Mem kept reachable until issued
}

// BeginStep starts a decode step (gpt2.Model.DecodeSample); EndStep ends it.
func (b *Backend) BeginStep() {
	gs := &b.graphs
	if _, ok := b.d.(Graphs); !ok || gs.off || gs.in {
		return
	}
	gs.step.Driver, gs.step.b, gs.in = b.d, b, true
	b.d = &gs.step
}

func (b *Backend) EndStep() {
	gs := &b.graphs
	if !gs.in {
		return
	}
	gs.step.flush()
	b.d, gs.in = gs.step.Driver, false
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

// Launch keeps the launch for flush; args is the caller's own (Backend.launch's).
func (s *step) Launch(k kernels.Kernel, grid, block Dim, shared int, args []Arg) {
	s.todo = append(s.todo, Launch{Kernel: k, Grid: grid, Block: block, Shared: shared, Args: args})
}

// flush issues the waiting launches: as the last graph, as a new one, or one by one.
func (s *step) flush() {
	if len(s.todo) == 0 {
		return
	}
	g, gs := s.Driver.(Graphs), &s.b.graphs
	replay := gs.g != nil && sameLaunches(gs.graph, s.todo)
	if replay || sameLaunches(gs.last, s.todo) && gs.remake(g, s.todo) {
		g.LaunchGraph(gs.g)
	} else {
		for _, l := range s.todo {
			s.Driver.Launch(l.Kernel, l.Grid, l.Block, l.Shared, l.Args)
		}
	}
	if replay { // the graph's list stands for this one; the list's storage serves the next step
		clear(s.todo)
		gs.last, s.todo = gs.graph, s.todo[:0]
		return
	}
	for _, l := range s.todo { // kept to compare with, not to hold the buffers
		for i := range l.Args {
			l.Args[i].Mem = nil
		}
	}
	gs.last, s.todo = s.todo, nil
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
