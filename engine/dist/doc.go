// Package dist is the ranks of a data-parallel run: which process this is among how many, and
// the collective operations that keep them in step. A run launched by mpirun or srun has one
// rank per process, connected through MPI (Open MPI, linked: one binary runs alone or as a
// rank); a plain run is the one rank of a world of one, and never touches MPI.
//
// Every floating-point reduction here is deterministic and leaves every rank the same bits:
// the sum of element i is taken by one rank, over the ranks' values in rank order, and sent
// to all (a reduce-scatter by all-to-all, then an all-gather — data movement only, whatever
// algorithm the MPI library picks for it). MPI_Allreduce promises neither: its order may
// depend on the algorithm, the message size and the rank, and weights that drift apart by one
// rounding are two models.
package dist
