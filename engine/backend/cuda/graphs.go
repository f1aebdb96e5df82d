//go:build cuda

package cuda

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
#include <stdlib.h>
#include <string.h>

// rk_graph_add appends a kernel node to g after prev (first when prev is NULL): n argument
// values of 8 bytes each, which the node copies (a 4-byte parameter reads the low half, as
// cuLaunchKernel does).
static CUresult rk_graph_add(CUgraph g, CUgraphNode prev, CUgraphNode *node, CUfunction f, unsigned gx, unsigned gy,
                             unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared,
                             unsigned long long *vals, int n) {
	void *ptrs[64];
	if (n > 64) return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < n; i++) ptrs[i] = &vals[i];
	CUDA_KERNEL_NODE_PARAMS p;
	memset(&p, 0, sizeof p);
	p.func = f;
	p.gridDimX = gx, p.gridDimY = gy, p.gridDimZ = gz;
	p.blockDimX = bx, p.blockDimY = by, p.blockDimZ = bz;
	p.sharedMemBytes = shared;
	p.kernelParams = ptrs;
	return cuGraphAddKernelNode(node, g, prev ? &prev : NULL, prev ? 1 : 0, &p);
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/rookscript/rookscript/engine/backend/cuda/launch"
)

// A decode step's graph (launch/graphs.go) is built node by node, each kernel after the one
// before, and launched into the legacy default stream like every other call of the backend:
// no stream capture, which that stream does not allow, and the graph stays ordered with the
// copies and launches around it.

var _ launch.Graphs = (*driver)(nil)

// graphExec is an instantiated graph.
type graphExec struct{ exec C.CUgraphExec }

func cuCheck(r C.CUresult, what string) error {
	if r != C.CUDA_SUCCESS {
		return fmt.Errorf("%s: CUresult %d", what, int(r))
	}
	return nil
}

func (d *driver) Graph(ls []launch.Launch) (launch.Graph, error) {
	var g graphExec
	err := d.run(func() error {
		var graph C.CUgraph
		if err := cuCheck(C.cuGraphCreate(&graph, 0), "cuGraphCreate"); err != nil {
			return err
		}
		defer C.cuGraphDestroy(graph) // the instance keeps what it needs
		var prev C.CUgraphNode
		vals := (*[64]C.ulonglong)(C.malloc(64 * 8))
		defer C.free(unsafe.Pointer(vals))
		for _, l := range ls {
			fn, ok := d.fns[l.Kernel.Name]
			if !ok || len(l.Args) > 64 {
				return fmt.Errorf("kernel %s with %d arguments", l.Kernel.Name, len(l.Args))
			}
			for i, a := range l.Args {
				vals[i] = C.ulonglong(a.Bits)
			}
			var node C.CUgraphNode
			f := *(*C.CUfunction)(unsafe.Pointer(&fn)) // cu.Function holds the CUfunction alone
			if err := cuCheck(C.rk_graph_add(graph, prev, &node, f, C.uint(l.Grid.X), C.uint(l.Grid.Y), C.uint(l.Grid.Z),
				C.uint(l.Block.X), C.uint(l.Block.Y), C.uint(l.Block.Z), C.uint(l.Shared), &vals[0], C.int(len(l.Args))),
				"cuGraphAddKernelNode "+l.Kernel.Name); err != nil {
				return err
			}
			prev = node
		}
		return cuCheck(C.cuGraphInstantiateWithFlags(&g.exec, graph, 0), "cuGraphInstantiateWithFlags")
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: making a graph of %d launches: %w", len(ls), err)
	}
	return g, nil
}

func (d *driver) LaunchGraph(g launch.Graph) {
	d.do("launching a graph", func() error {
		if err := cuCheck(C.cuGraphLaunch(g.(graphExec).exec, nil), "cuGraphLaunch"); err != nil {
			return err
		}
		if d.syncEach {
			return cuCheck(C.cuCtxSynchronize(), "cuCtxSynchronize")
		}
		return nil
	})
}

func (d *driver) DestroyGraph(g launch.Graph) {
	d.do("destroying a graph", func() error { return cuCheck(C.cuGraphExecDestroy(g.(graphExec).exec), "cuGraphExecDestroy") })
}
