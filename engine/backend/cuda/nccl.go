//go:build cuda

package cuda

/*
#include <stddef.h>

// The NCCL entry points the ranks' transport calls, with their C signatures (nccl.h; unchanged
// since NCCL 2.7). ncclResult_t and ncclDataType_t are C enums (int), ncclComm_t and
// cudaStream_t pointers; a stream of NULL is the legacy default stream, the one the backend's
// launches use.
typedef struct { char internal[128]; } rk_nccl_id; // ncclUniqueId, NCCL_UNIQUE_ID_BYTES
typedef int (*rk_nccl_id_fn)(rk_nccl_id *id);
typedef int (*rk_nccl_init_fn)(void **comm, int nranks, rk_nccl_id id, int rank);
typedef int (*rk_nccl_send_fn)(const void *buf, size_t count, int type, int peer, void *comm, void *stream);
typedef int (*rk_nccl_recv_fn)(void *buf, size_t count, int type, int peer, void *comm, void *stream);
typedef int (*rk_nccl_group_fn)(void);
typedef int (*rk_nccl_allgather_fn)(const void *send, void *recv, size_t count, int type, void *comm, void *stream);
typedef int (*rk_nccl_comm_fn)(void *comm);
typedef const char *(*rk_nccl_errstr_fn)(int result);
typedef const char *(*rk_nccl_lasterr_fn)(void *comm);
typedef int (*rk_nccl_version_fn)(int *version);

enum { rk_ncclFloat32 = 7 };

static int rk_nccl_get_id(void *f, void *id) { return ((rk_nccl_id_fn)f)((rk_nccl_id *)id); }
static int rk_nccl_init(void *f, void **comm, int nranks, void *id, int rank) {
	return ((rk_nccl_init_fn)f)(comm, nranks, *(rk_nccl_id *)id, rank);
}
static int rk_nccl_comm(void *f, void *comm) { return ((rk_nccl_comm_fn)f)(comm); }
static const char *rk_nccl_errstr(void *f, int r) { return ((rk_nccl_errstr_fn)f)(r); }
static const char *rk_nccl_lasterr(void *f, void *comm) { return ((rk_nccl_lasterr_fn)f)(comm); }
static int rk_nccl_version(void *f, int *v) { return ((rk_nccl_version_fn)f)(v); }

// rk_nccl_exchange sends chunk q of send to rank q and receives rank q's chunk into chunk q of
// recv, for every rank q, as one group; *what names the call that failed. A group once started
// is always ended, as NCCL requires.
static int rk_nccl_exchange(void *start, void *end, void *send, void *recv, unsigned long long sbuf,
                            unsigned long long rbuf, size_t count, int size, void *comm, const char **what) {
	int rc = ((rk_nccl_group_fn)start)();
	if (rc != 0) { *what = "ncclGroupStart"; return rc; }
	int first = 0;
	for (int q = 0; q < size && first == 0; q++) {
		unsigned long long off = 4ull * count * (unsigned long long)q;
		first = ((rk_nccl_send_fn)send)((const void *)(sbuf + off), count, rk_ncclFloat32, q, comm, NULL);
		if (first != 0) { *what = "ncclSend"; break; }
		first = ((rk_nccl_recv_fn)recv)((void *)(rbuf + off), count, rk_ncclFloat32, q, comm, NULL);
		if (first != 0) { *what = "ncclRecv"; break; }
	}
	rc = ((rk_nccl_group_fn)end)();
	if (first != 0) return first;
	if (rc != 0) *what = "ncclGroupEnd";
	return rc;
}

// rk_nccl_allgather is ncclAllGather in place: this rank's chunk is already at its place.
static int rk_nccl_allgather(void *f, unsigned long long buf, size_t count, int rank, void *comm) {
	return ((rk_nccl_allgather_fn)f)((const void *)(buf + 4ull * count * (unsigned long long)rank), (void *)buf,
	                                 count, rk_ncclFloat32, comm, NULL);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/rookscript/rookscript/engine/backend/cuda/launch"
	"github.com/rookscript/rookscript/engine/dist"
)

// NCCL is loaded at run time, like cuBLAS (cublas.go), so that the CUDA build needs neither
// its headers nor the library: only a data-parallel run on GPUs opens it.

// ncclIDBytes is the size of ncclUniqueId (NCCL_UNIQUE_ID_BYTES), which ranks pass around.
const ncclIDBytes = 128

// ncclNames are tried in order when ROOKSCRIPT_NCCL does not name the library.
var ncclNames = []string{"libnccl.so.2", "libnccl.so"}

// ncclLib is a loaded NCCL.
type ncclLib struct {
	path                                       string
	getID, initRank, send, recv, start, end    unsafe.Pointer
	allGather, destroy, abort, errStr, version unsafe.Pointer
	lastErr                                    unsafe.Pointer // ncclGetLastError, NCCL 2.13 and later; may be nil
	Version                                    string
}

var ncclOnce struct {
	sync.Mutex
	lib *ncclLib
}

// loadNCCL opens NCCL once: the file ROOKSCRIPT_NCCL names, else the first of ncclNames the
// dynamic loader finds (LD_LIBRARY_PATH, the ld.so cache). JoinRanks calls it inside
// driver.run.
func loadNCCL() (*ncclLib, error) {
	ncclOnce.Lock()
	defer ncclOnce.Unlock()
	if ncclOnce.lib != nil {
		return ncclOnce.lib, nil
	}
	lib, err := openNCCL(libCandidates("ROOKSCRIPT_NCCL", ncclNames))
	if err != nil {
		return nil, err
	}
	ncclOnce.lib = lib
	return lib, nil
}

func openNCCL(names []string) (*ncclLib, error) {
	var lib *ncclLib
	tried, ok := dlopenFirst(names, func(name string, sym func(string) unsafe.Pointer) string {
		var missing []string
		need := func(s string) unsafe.Pointer {
			p := sym(s)
			if p == nil {
				missing = append(missing, s)
			}
			return p
		}
		l := &ncclLib{path: name,
			getID: need("ncclGetUniqueId"), initRank: need("ncclCommInitRank"),
			send: need("ncclSend"), recv: need("ncclRecv"),
			start: need("ncclGroupStart"), end: need("ncclGroupEnd"),
			allGather: need("ncclAllGather"), destroy: need("ncclCommDestroy"),
			abort: need("ncclCommAbort"), errStr: need("ncclGetErrorString"),
			version: need("ncclGetVersion"), lastErr: sym("ncclGetLastError")}
		if len(missing) > 0 {
			return fmt.Sprintf("no %s (NCCL 2.7 or later has them)", strings.Join(missing, ", "))
		}
		var v C.int
		if rc := C.rk_nccl_version(l.version, &v); rc != 0 {
			return "ncclGetVersion: " + l.errorString(rc)
		}
		l.Version = ncclVersion(int(v))
		lib = l
		return ""
	})
	if !ok {
		hint := "install NCCL (pip's nvidia-nccl-cu12 or nvidia-nccl-cu13, which PyTorch brings, or the distribution's libnccl2) " +
			"and put its lib folder on LD_LIBRARY_PATH, or name the file in ROOKSCRIPT_NCCL"
		return nil, fmt.Errorf("loading NCCL: %s; %s", strings.Join(tried, "; "), hint)
	}
	return lib, nil
}

// ncclVersion formats NCCL_VERSION_CODE: major·10000 + minor·100 + patch since 2.9,
// major·1000 + minor·100 + patch before.
func ncclVersion(v int) string {
	if v >= 20900 {
		return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
	}
	return fmt.Sprintf("%d.%d.%d", v/1000, v/100%10, v%100)
}

func (l *ncclLib) errorString(rc C.int) string {
	return C.GoString(C.rk_nccl_errstr(l.errStr, rc))
}

// NCCL is the ranks of a data-parallel run joined over NCCL: launch.Ranks for the backend's
// SumRanks, one communicator on the backend's GPU. Every call runs on the CUDA context's
// thread, on the default stream, so it is ordered with the backend's launches.
type NCCL struct {
	d          *driver
	b          *launch.Backend
	lib        *ncclLib
	comm       unsafe.Pointer
	rank, size int
	failed     error // the first failure: the communicator was aborted then
}

var _ launch.Ranks = (*NCCL)(nil)

// JoinRanks joins the GPU backend b to world's ranks over NCCL, and makes b.SumRanks sum over
// them. Every rank calls it at the same point: rank 0 creates NCCL's unique id, world
// broadcasts it, and every rank creates its communicator (ncclCommInitRank, which waits for
// all). A rank that cannot load NCCL makes every rank fail, naming it. The communicator lives
// as long as the process, like the CUDA context; Close ends it.
func JoinRanks(b *launch.Backend, world dist.Comm) (*NCCL, error) {
	d, ok := b.Driver().(*driver)
	if !ok {
		return nil, fmt.Errorf("cuda: joining ranks over NCCL: the backend runs on %s, not a GPU", b.Name())
	}
	rank, size := world.Rank(), world.Size()
	// Rank 0 makes NCCL's unique id. Every rank learns whether every rank could load NCCL (and
	// rank 0 make the id) before any waits for the others in ncclCommInitRank.
	id := make([]byte, ncclIDBytes)
	var lib *ncclLib
	err := d.run(func() (err error) {
		if lib, err = loadNCCL(); err != nil || rank != 0 {
			return err
		}
		return ncclCheck(lib, nil, "ncclGetUniqueId", C.rk_nccl_get_id(lib.getID, unsafe.Pointer(&id[0])))
	})
	msg := []byte(nil)
	if err != nil {
		msg = []byte(err.Error())
	}
	all, gerr := dist.Gather(world, msg)
	if gerr != nil {
		return nil, fmt.Errorf("cuda: rank %d: joining ranks over NCCL: %w", rank, gerr)
	}
	var bad []string
	for r, m := range all {
		if len(m) > 0 {
			bad = append(bad, fmt.Sprintf("rank %d: %s", r, m))
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("cuda: joining %d ranks over NCCL: %s", size, strings.Join(bad, "; "))
	}
	if err := world.Broadcast(id, 0); err != nil {
		return nil, fmt.Errorf("cuda: rank %d: broadcasting NCCL's id: %w", rank, err)
	}
	n := &NCCL{d: d, b: b, lib: lib, rank: rank, size: size}
	err = d.run(func() error {
		var comm unsafe.Pointer
		rc := C.rk_nccl_init(lib.initRank, &comm, C.int(size), unsafe.Pointer(&id[0]), C.int(rank))
		if err := ncclCheck(lib, nil, "ncclCommInitRank", rc); err != nil {
			return err
		}
		n.comm = comm
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: rank %d of %d on %s: %s %s: %w", rank, size, d.Device, lib.path, lib.Version, err)
	}
	b.JoinRanks(n)
	return n, nil
}

func (n *NCCL) Rank() int { return n.rank }
func (n *NCCL) Size() int { return n.size }

// Describe names the library and the communicator.
func (n *NCCL) Describe() string {
	return fmt.Sprintf("NCCL %s (%s), rank %d of %d on %s", n.lib.Version, n.lib.path, n.rank, n.size, n.d.Device)
}

func (n *NCCL) Exchange(send, recv uintptr, count int) error {
	return n.call(func() error {
		var what *C.char
		rc := C.rk_nccl_exchange(n.lib.start, n.lib.end, n.lib.send, n.lib.recv, C.ulonglong(send), C.ulonglong(recv),
			C.size_t(count), C.int(n.size), n.comm, &what)
		return ncclCheck(n.lib, n.comm, C.GoString(what), rc)
	})
}

func (n *NCCL) AllGather(buf uintptr, count int) error {
	return n.call(func() error {
		return ncclCheck(n.lib, n.comm, "ncclAllGather", C.rk_nccl_allgather(n.lib.allGather, C.ulonglong(buf), C.size_t(count), C.int(n.rank), n.comm))
	})
}

// call runs f with the context current (driver.run). A failure aborts the communicator (NCCL's
// state is then unknown, and a peer may wait for this rank forever); every later call reports
// it.
func (n *NCCL) call(f func() error) error {
	if n.failed != nil {
		return fmt.Errorf("an earlier NCCL call failed: %w", n.failed)
	}
	err := n.d.run(func() error {
		err := f()
		if err == nil && n.d.syncEach {
			err = cu.Synchronize()
		}
		if err != nil {
			C.rk_nccl_comm(n.lib.abort, n.comm)
		}
		return err
	})
	if err != nil {
		n.failed = fmt.Errorf("%s on %s: %w", n.lib.path, n.d.Device, err)
		return n.failed
	}
	return nil
}

// Close leaves the ranks: the backend sums over none, and the communicator is destroyed.
func (n *NCCL) Close() error {
	n.b.JoinRanks(nil)
	if n.failed != nil || n.comm == nil {
		return nil // aborted already
	}
	err := n.d.run(func() error {
		return ncclCheck(n.lib, nil, "ncclCommDestroy", C.rk_nccl_comm(n.lib.destroy, n.comm))
	})
	n.comm = nil
	return err
}

// ncclCheck turns an ncclResult_t into an error naming the call, with NCCL's last error
// message when the library has one.
func ncclCheck(lib *ncclLib, comm unsafe.Pointer, call string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	msg := fmt.Sprintf("%s: %s (ncclResult_t %d)", call, lib.errorString(rc), int(rc))
	if lib.lastErr != nil {
		if last := C.GoString(C.rk_nccl_lasterr(lib.lastErr, comm)); last != "" {
			msg += ": " + last
		}
	}
	return errors.New(msg)
}
