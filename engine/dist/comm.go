package dist

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
)

// Comm is this process's place in the run's world of ranks.
type Comm interface {
	Rank() int
	Size() int
	// SumF32 and SumF64 replace x, on every rank, with the element-wise sum over the ranks
	// (the same length everywhere), added in rank order.
	SumF32(x []float32) error
	SumF64(x []float64) error
	// Broadcast replaces b on every rank with root's (the same length everywhere).
	Broadcast(b []byte, root int) error
	// Barrier returns when every rank has called it.
	Barrier() error
	// Abort ends every rank of the run with code, at once: what one rank does when it cannot go
	// on, so that no other waits for it forever.
	Abort(code int)
	// Close ends the world (MPI_Finalize); the last call.
	Close() error
}

// Single is the world of a plain run: one rank, whose collectives do nothing.
type Single struct{}

func (Single) Rank() int                   { return 0 }
func (Single) Size() int                   { return 1 }
func (Single) SumF32([]float32) error      { return nil }
func (Single) SumF64([]float64) error      { return nil }
func (Single) Broadcast([]byte, int) error { return nil }
func (Single) Barrier() error              { return nil }
func (Single) Abort(code int)              { os.Exit(code) }
func (Single) Close() error                { return nil }

// Launched reports the rank and world size a launcher gave this process: Open MPI's mpirun
// (OMPI_COMM_WORLD_*), Slurm's srun with PMIx or PMI2 (PMIX_RANK, PMI_RANK/PMI_SIZE, or
// SLURM_PROCID/SLURM_NTASKS). ok is false for a process started on its own.
func Launched() (rank, size int, ok bool) {
	for _, v := range [][2]string{
		{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
		{"PMI_RANK", "PMI_SIZE"},
		{"SLURM_PROCID", "SLURM_NTASKS"},
	} {
		r, errR := strconv.Atoi(os.Getenv(v[0]))
		s, errS := strconv.Atoi(os.Getenv(v[1]))
		if errR == nil && errS == nil && s >= 1 && r >= 0 && r < s {
			return r, s, true
		}
	}
	if r, err := strconv.Atoi(os.Getenv("PMIX_RANK")); err == nil && r >= 0 {
		return r, 0, true // the size comes from MPI itself
	}
	return 0, 1, false
}

// LocalRank is this rank's index among the ranks on its machine, as the launcher says
// (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, MPI_LOCALRANKID): the GPU a rank takes. 0 when
// no launcher says.
func LocalRank() int {
	for _, v := range []string{"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"} {
		if r, err := strconv.Atoi(os.Getenv(v)); err == nil && r >= 0 {
			return r
		}
	}
	return 0
}

// Open returns the world this process belongs to: MPI's when a launcher started it (even as
// a world of one: mpirun -np 1 behaves as a rank), Single otherwise.
func Open() (Comm, error) {
	if _, _, ok := Launched(); !ok {
		return Single{}, nil
	}
	c, err := openMPI()
	if err != nil {
		return nil, fmt.Errorf("dist: starting MPI: %w", err)
	}
	return c, nil
}

// chunks splits n elements into size parts for the reduce-scatter: part r is [off[r], off[r+1]).
func chunks(n, size int) []int {
	off := make([]int, size+1)
	for r := range size + 1 {
		off[r] = r * n / size
	}
	return off
}

// Gather gives every rank every rank's b (of any length), in rank order: a broadcast from
// each rank in turn, its length first. For small things: names, results, hashes.
func Gather(c Comm, b []byte) ([][]byte, error) {
	all := make([][]byte, c.Size())
	for r := range c.Size() {
		size := make([]byte, 8)
		binary.LittleEndian.PutUint64(size, uint64(len(b)))
		if err := c.Broadcast(size, r); err != nil {
			return nil, err
		}
		all[r] = make([]byte, binary.LittleEndian.Uint64(size))
		if r == c.Rank() {
			copy(all[r], b)
		}
		if err := c.Broadcast(all[r], r); err != nil {
			return nil, err
		}
	}
	return all, nil
}
