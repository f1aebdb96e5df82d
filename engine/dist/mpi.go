package dist

/*
#cgo pkg-config: ompi-c
#include <mpi.h>
#include <stdlib.h>

// The handles are macros (pointers to Open MPI's globals): C helpers keep them out of Go.
static int rk_init(int *provided) {
	int flag = 0;
	MPI_Initialized(&flag);
	if (flag) { MPI_Query_thread(provided); return MPI_SUCCESS; }
	int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, provided);
	if (rc == MPI_SUCCESS) MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	return rc;
}
static int rk_rank(int *r) { return MPI_Comm_rank(MPI_COMM_WORLD, r); }
static int rk_size(int *s) { return MPI_Comm_size(MPI_COMM_WORLD, s); }
static int rk_barrier(void) { return MPI_Barrier(MPI_COMM_WORLD); }
static int rk_bcast(void *b, int n, int root) { return MPI_Bcast(b, n, MPI_BYTE, root, MPI_COMM_WORLD); }
static void rk_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }
static int rk_finalize(void) { return MPI_Finalize(); }
static int rk_alltoallv(void *s, int *sc, int *sd, void *r, int *rc, int *rd, int f64) {
	MPI_Datatype t = f64 ? MPI_DOUBLE : MPI_FLOAT;
	return MPI_Alltoallv(s, sc, sd, t, r, rc, rd, t, MPI_COMM_WORLD);
}
static int rk_allgatherv(void *b, int *rc, int *rd, int f64) {
	MPI_Datatype t = f64 ? MPI_DOUBLE : MPI_FLOAT;
	return MPI_Allgatherv(MPI_IN_PLACE, 0, t, b, rc, rd, t, MPI_COMM_WORLD);
}
static void rk_error(int code, char *buf, int *len) { MPI_Error_string(code, buf, len); }
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"unsafe"
)

// mpiComm is MPI_COMM_WORLD. Calls are serialized (MPI_THREAD_SERIALIZED): Go may run them on
// any thread, never two at once.
type mpiComm struct {
	mu         sync.Mutex
	rank, size int
	s32        []float32 // the reduce-scatter's receive buffer
	s64        []float64
}

func openMPI() (*mpiComm, error) {
	var provided C.int
	if rc := C.rk_init(&provided); rc != C.MPI_SUCCESS {
		return nil, mpiError("MPI_Init_thread", rc)
	}
	if provided < C.MPI_THREAD_SERIALIZED {
		return nil, errors.New("the MPI library does not support calls from more than one thread (MPI_THREAD_SERIALIZED)")
	}
	c := &mpiComm{}
	var r, s C.int
	if rc := C.rk_rank(&r); rc != C.MPI_SUCCESS {
		return nil, mpiError("MPI_Comm_rank", rc)
	}
	if rc := C.rk_size(&s); rc != C.MPI_SUCCESS {
		return nil, mpiError("MPI_Comm_size", rc)
	}
	c.rank, c.size = int(r), int(s)
	return c, nil
}

func mpiError(call string, rc C.int) error {
	buf := make([]byte, C.MPI_MAX_ERROR_STRING)
	var n C.int
	C.rk_error(rc, (*C.char)(unsafe.Pointer(&buf[0])), &n)
	return fmt.Errorf("%s: %s", call, buf[:n])
}

func (c *mpiComm) Rank() int { return c.rank }
func (c *mpiComm) Size() int { return c.size }

func (c *mpiComm) Barrier() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rc := C.rk_barrier(); rc != C.MPI_SUCCESS {
		return mpiError("MPI_Barrier", rc)
	}
	return nil
}

func (c *mpiComm) Broadcast(b []byte, root int) error {
	if len(b) == 0 {
		return nil
	}
	if len(b) > math.MaxInt32 {
		return fmt.Errorf("dist: broadcast of %d bytes: more than MPI counts", len(b))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if rc := C.rk_bcast(unsafe.Pointer(&b[0]), C.int(len(b)), C.int(root)); rc != C.MPI_SUCCESS {
		return mpiError("MPI_Bcast", rc)
	}
	return nil
}

func (c *mpiComm) Abort(code int) { C.rk_abort(C.int(code)) }

func (c *mpiComm) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rc := C.rk_finalize(); rc != C.MPI_SUCCESS {
		return mpiError("MPI_Finalize", rc)
	}
	return nil
}

func (c *mpiComm) SumF32(x []float32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return sum(c, x, &c.s32, false)
}

func (c *mpiComm) SumF64(x []float64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return sum(c, x, &c.s64, true)
}

// sum is SumF32 and SumF64: each rank receives its chunk of every rank's x (all-to-all), adds
// them in rank order, and the sums go to every rank (all-gather, in place).
func sum[T float32 | float64](c *mpiComm, x []T, scratch *[]T, f64 bool) error {
	n, size := len(x), c.size
	if n == 0 || size == 1 {
		return nil
	}
	if n > math.MaxInt32 {
		return fmt.Errorf("dist: a sum of %d elements: more than MPI counts", n)
	}
	off := chunks(n, size)
	mine := off[c.rank+1] - off[c.rank]
	if cap(*scratch) < size*mine {
		*scratch = make([]T, size*mine)
	}
	recv := (*scratch)[:size*mine]
	sc, sd, rc, rd := make([]C.int, size), make([]C.int, size), make([]C.int, size), make([]C.int, size)
	for j := range size {
		sc[j], sd[j] = C.int(off[j+1]-off[j]), C.int(off[j])
		rc[j], rd[j] = C.int(mine), C.int(j*mine)
	}
	var rp unsafe.Pointer
	if len(recv) > 0 {
		rp = unsafe.Pointer(&recv[0])
	}
	if e := C.rk_alltoallv(unsafe.Pointer(&x[0]), &sc[0], &sd[0], rp, &rc[0], &rd[0], boolInt(f64)); e != C.MPI_SUCCESS {
		return mpiError("MPI_Alltoallv", e)
	}
	part := x[off[c.rank]:off[c.rank+1]]
	for i := range part {
		s := recv[i]
		for j := 1; j < size; j++ {
			s += recv[j*mine+i]
		}
		part[i] = s
	}
	for j := range size {
		rc[j], rd[j] = C.int(off[j+1]-off[j]), C.int(off[j])
	}
	if e := C.rk_allgatherv(unsafe.Pointer(&x[0]), &rc[0], &rd[0], boolInt(f64)); e != C.MPI_SUCCESS {
		return mpiError("MPI_Allgatherv", e)
	}
	return nil
}

func boolInt(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
