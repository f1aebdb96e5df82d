// Package ptxsrc is what the PTX generator and the kernels package agree on: the PTX
// targets, the nvcc flags, and the source hash that heads each generated file. It imports
// nothing generated, so the generator builds even when the PTX is missing.
package ptxsrc
