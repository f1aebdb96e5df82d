package launch

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/backend/cuda/kernels"
)

// Launch shapes. Kernels that use warp shuffles need whole warps.
const (
	flatBlock      = 256     // elementwise kernels
	rowWarps       = 4       // warps per block for one-warp-per-row kernels
	lnRowsPerChunk = 16      // LayerNorm backward: rows per partial sum (fixes the sum order)
	colChunk       = 64      // column sums: rows per partial-sum chunk (fixes the sum order)
	reduceBlock    = 256     // block reductions (rows of LogProbs and Softmax, SumSquares)
	sqChunk        = 1 << 16 // SumSquares: elements per partial sum (fixes the sum order)
	maxShared      = 48 << 10
)

// Backend implements backend.Backend by launching the kernels of package kernels through a
// Driver. A Backend serves one caller at a time; concurrent calls are serialised.
type Backend struct {
	mu sync.Mutex
	d  Driver

	// Device memory in use by this backend's allocations, in bytes: now and at most since the
	// start or the last ResetPeak (memory.go). Garbage counts until the collector finds its
	// Mem unreachable; its block then waits in the cache for the next allocation of its size.
	live, peak atomic.Int64
	cache      blockCache

	graphs stepGraphs // decode steps replayed as graphs (graphs.go)

	// Scratch, grown on demand and never shrunk.
	partial  *backend.Mem // float partial sums (LayerNorm dw/db, bias gradients)
	dd       *backend.Mem // attention backward D = dy·y, (n, nh)
	sq       *backend.Mem // SumSquares partials, as doubles
	bounds   *backend.Mem // attention: each row's sequence [start, end)
	rankPad  *backend.Mem // SumRanks: the buffer padded to whole chunks
	rankRecv *backend.Mem // SumRanks: every rank's chunk for this one

	// The optimizer's kernels' tables, kept on the device (SumSquaresMany's spans, AdamW's
	// spans without decay); the same as built on the host for a call; the partial sums of
	// SumSquaresMany, copied to the host.
	sqSpans, noDecay devTable
	sqHost, adamHost []int64
	sqPart           []float64

	// The ranks of a data-parallel run this backend sums over (SumRanks), or nil.
	ranks Ranks

	// The pack whose bounds are on the device, so that the 2·L attention calls of a step
	// upload them once.
	packStart, packLen []int32
	packPrefix         []int32
	packKeys           int // the most keys of a query row
	packQueries        int // the most queries of a key row
	hostBounds         []int32
}

var _ backend.Backend = (*Backend)(nil)

// devTable is a small table of long longs on the device and the host copy it was made from.
type devTable struct {
	host []int64
	mem  *backend.Mem
}

// New returns a backend running on d.
func New(d Driver) *Backend { return &Backend{d: d, graphs: stepGraphs{off: graphsOff()}} }

// Name describes the backend.
func (b *Backend) Name() string { return b.d.Name() }

// BatchInvariant is true: every forward kernel's sums run in an order that depends only on
// each output's own inputs — the products (rkcu_matmul_nt, not cuBLAS), attention (one
// function for packed and decoded rows), LayerNorm, the softmax and log-softmax — so the
// sampler's logprobs are the training forward's bit for bit on the same device (DESIGN §6.1;
// docs/CUDA.md).
func (b *Backend) BatchInvariant() bool { return true }

// Driver returns the device driver.
func (b *Backend) Driver() Driver { return b.d }

// Describe names the device, from the driver when it says more than its name.
func (b *Backend) Describe() string {
	if d, ok := b.d.(interface{ Describe() string }); ok {
		return d.Describe()
	}
	return b.d.Name()
}

// scratch returns *s with room for n 4-byte elements, reallocating (contents undefined) if
// it is smaller.
func (b *Backend) scratch(s **backend.Mem, n int) *backend.Mem {
	if *s == nil || (*s).Len < n {
		*s = b.mem(max(n, 1), false)
	}
	return *s
}

func (b *Backend) Alloc(n int) backend.Buf {
	return backend.Buf{M: b.mem(n, true), N: n}
}

func (b *Backend) AllocI32(n int) backend.I32 {
	return backend.I32{M: b.mem(n, true), N: n}
}

// Device addresses of views.

func addrF(x backend.Buf) uintptr { return x.M.Dev + 4*uintptr(x.Off) }
func addrI(x backend.I32) uintptr { return x.M.Dev + 4*uintptr(x.Off) }

// Kernel arguments.

// A buffer's argument carries its Mem, which launch keeps reachable until the launch is
// issued; the raw addresses (argD, argPF, argPI, argPL) are of scratch memory the backend holds.
func argF(x backend.Buf) Arg {
	if x.Nil() {
		return Arg{Kind: 'F'}
	}
	return Arg{Bits: uint64(addrF(x)), Kind: 'F', Mem: x.M}
}

func argI(x backend.I32) Arg {
	if x.M == nil {
		return Arg{Kind: 'I'}
	}
	return Arg{Bits: uint64(addrI(x)), Kind: 'I', Mem: x.M}
}
func argD(p uintptr) Arg   { return Arg{Bits: uint64(p), Kind: 'D'} }
func argPF(p uintptr) Arg  { return Arg{Bits: uint64(p), Kind: 'F'} }
func argPI(p uintptr) Arg  { return Arg{Bits: uint64(p), Kind: 'I'} }
func argPL(p uintptr) Arg  { return Arg{Bits: uint64(p), Kind: 'L'} }
func argL(v int) Arg       { return Arg{Bits: uint64(int64(v)), Kind: 'l'} }
func argF32(v float32) Arg { return Arg{Bits: uint64(math.Float32bits(v)), Kind: 'f'} }
func argInt(v int) Arg {
	if v < math.MinInt32 || v > math.MaxInt32 {
		panic(fmt.Sprintf("cuda: kernel argument %d does not fit in an int", v))
	}
	return Arg{Bits: uint64(uint32(int32(v))), Kind: 'i'}
}

// launch checks the arguments against the kernel's signature and launches it.
func (b *Backend) launch(k kernels.Kernel, grid, block Dim, shared int, args ...Arg) {
	if len(args) != len(k.Sig) {
		panic(fmt.Sprintf("cuda: %s takes %d arguments, got %d", k.Name, len(k.Sig), len(args)))
	}
	for i, a := range args {
		if a.Kind != k.Sig[i] {
			panic(fmt.Sprintf("cuda: %s argument %d is %c, the kernel takes %c", k.Name, i, a.Kind, k.Sig[i]))
		}
	}
	if shared > maxShared {
		panic(fmt.Sprintf("cuda: %s needs %d bytes of shared memory, more than %d", k.Name, shared, maxShared))
	}
	b.d.Launch(k, grid, block, shared, args)
	runtime.KeepAlive(args) // the buffers behind the arguments (Arg.Mem)
}

// rowBlock is the block size of a block reduction over n elements: about eight elements per
// thread, in whole warps, at most reduceBlock.
func rowBlock(n int) int { return min(reduceBlock, max(32, (ceilDiv(n, 8)+31)/32*32)) }

// grid caps a block count at the driver's grid cap (at least 1).
func (b *Backend) grid(blocks int) int { return max(1, min(blocks, b.d.GridCap())) }

// flat launches an elementwise kernel over n elements, in blocks of flatBlock threads (fewer
// for tiny arrays, such as the few rows of a decode step).
func (b *Backend) flat(k kernels.Kernel, n int, args ...Arg) {
	if n <= 0 {
		return
	}
	block := min(flatBlock, (n+31)/32*32)
	b.launch(k, D1(b.grid(ceilDiv(n, block))), D1(block), 0, args...)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// Size checks: a device kernel writing past a view corrupts memory silently, so every view
// is checked on the host against the extent the kernel will touch (the CPU backend gets this
// from Go's slice bounds checks).

func need(op string, x backend.Buf, n int) {
	if x.Nil() || x.N < n {
		panic(fmt.Sprintf("cuda: %s: buffer of %d floats, need %d", op, x.N, n))
	}
}

func needI(op string, x backend.I32, n int) {
	if x.M == nil || x.N < n {
		panic(fmt.Sprintf("cuda: %s: index buffer of %d ints, need %d", op, x.N, n))
	}
}

func sameLen(op string, bufs ...backend.Buf) {
	for _, x := range bufs[1:] {
		if x.N != bufs[0].N {
			panic("cuda: " + op + ": buffer sizes differ")
		}
	}
}

// Memory.

func (b *Backend) Upload(dst backend.Buf, src []float32) {
	toDevice(b, "Upload", addrF(dst), dst.M, dst.N, src)
}

func (b *Backend) Download(dst []float32, src backend.Buf) {
	toHost(b, "Download", dst, addrF(src), src.M, src.N)
}

func (b *Backend) UploadI32(dst backend.I32, src []int32) {
	toDevice(b, "UploadI32", addrI(dst), dst.M, dst.N, src)
}

// DownloadI32 copies device integers to the host: tokens sampled on the device.
func (b *Backend) DownloadI32(dst []int32, src backend.I32) {
	toHost(b, "DownloadI32", dst, addrI(src), src.M, src.N)
}

// toDevice copies src to the n 4-byte elements of m at dst, m kept reachable until it is done.
func toDevice[T float32 | int32](b *Backend, op string, dst uintptr, m *backend.Mem, n int, src []T) {
	if len(src) != n {
		panic("cuda: " + op + " size mismatch")
	}
	if n > 0 {
		b.d.HtoD(dst, unsafe.Pointer(&src[0]), 4*n)
		runtime.KeepAlive(m)
	}
}

// toHost copies the n 4-byte elements of m at src to dst.
func toHost[T float32 | int32](b *Backend, op string, dst []T, src uintptr, m *backend.Mem, n int) {
	if len(dst) != n {
		panic("cuda: " + op + " size mismatch")
	}
	if n > 0 {
		b.d.DtoH(unsafe.Pointer(&dst[0]), src, 4*n)
		runtime.KeepAlive(m)
	}
}

func (b *Backend) Copy(dst, src backend.Buf) {
	sameLen("Copy", dst, src)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flat(kernels.Copy, dst.N, argF(dst), argF(src), argL(dst.N))
}

func (b *Backend) Fill(dst backend.Buf, v float32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flat(kernels.Fill, dst.N, argF(dst), argF32(v), argL(dst.N))
}

// AddI32 adds v to every element of x: a decode step's positions, advanced where they are.
func (b *Backend) AddI32(x backend.I32, v int32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flat(kernels.AddI32, x.N, argI(x), argInt(int(v)), argL(x.N))
}

// Elementwise.

func (b *Backend) Add(out, a, c backend.Buf) {
	sameLen("Add", out, a, c)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flat(kernels.Add, out.N, argF(out), argF(a), argF(c), argL(out.N))
}

func (b *Backend) AddTo(dst, src backend.Buf) {
	sameLen("AddTo", dst, src)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flat(kernels.AddTo, dst.N, argF(dst), argF(src), argL(dst.N))
}

func (b *Backend) Scale(dst backend.Buf, s float32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flat(kernels.Scale, dst.N, argF(dst), argF32(s), argL(dst.N))
}

func (b *Backend) GELU(out, inp backend.Buf) {
	sameLen("GELU", out, inp)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flat(kernels.GELUForward, out.N, argF(out), argF(inp), argL(out.N))
}

func (b *Backend) GELUBackward(dinp, inp, dout backend.Buf) {
	sameLen("GELUBackward", dinp, inp, dout)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flat(kernels.GELUBackward, dinp.N, argF(dinp), argF(inp), argF(dout), argL(dinp.N))
}

func (b *Backend) GatherRows(dst, src backend.Buf, rows backend.I32, c int) {
	n := rows.N
	need("GatherRows dst", dst, n*c)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flat(kernels.GatherRows, n*c, argF(dst), argF(src), argI(rows), argInt(n), argInt(c))
}

func (b *Backend) ScatterRows(dst, src backend.Buf, rows backend.I32, c int) {
	n := rows.N
	need("ScatterRows src", src, n*c)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flat(kernels.ScatterRows, n*c, argF(dst), argF(src), argI(rows), argInt(n), argInt(c))
}

// Embeddings.

func (b *Backend) Encoder(out backend.Buf, tok, pos backend.I32, wte, wpe backend.Buf, n, c int) {
	need("Encoder out", out, n*c)
	needI("Encoder tok", tok, n)
	needI("Encoder pos", pos, n)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flat(kernels.EncoderForward, n*c, argF(out), argI(tok), argI(pos), argF(wte), argF(wpe), argInt(n), argInt(c))
}

func (b *Backend) EncoderBackward(dwte, dwpe, dout backend.Buf, tok, pos backend.I32, n, c int) {
	need("EncoderBackward dout", dout, n*c)
	needI("EncoderBackward tok", tok, n)
	needI("EncoderBackward pos", pos, n)
	if n == 0 || c == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	const block = 128
	b.launch(kernels.EncoderBackward, D1(b.grid(ceilDiv(c, block))), D1(block), 0,
		argF(dwte), argF(dwpe), argF(dout), argI(tok), argI(pos), argInt(n), argInt(c))
}

// LayerNorm.

func (b *Backend) LayerNorm(out, mean, rstd, inp, w, bias backend.Buf, n, c int, eps float32) {
	need("LayerNorm out", out, n*c)
	need("LayerNorm inp", inp, n*c)
	need("LayerNorm mean", mean, n)
	need("LayerNorm rstd", rstd, n)
	need("LayerNorm w", w, c)
	need("LayerNorm b", bias, c)
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.launch(kernels.LayerNormForward, D1(b.grid(ceilDiv(n, rowWarps))), D1(32*rowWarps), 0,
		argF(out), argF(mean), argF(rstd), argF(inp), argF(w), argF(bias), argInt(n), argInt(c), argF32(eps))
}

func (b *Backend) LayerNormBackward(dinp, dw, db, dout, inp, w, mean, rstd backend.Buf, n, c int) {
	need("LayerNormBackward dinp", dinp, n*c)
	need("LayerNormBackward dout", dout, n*c)
	need("LayerNormBackward inp", inp, n*c)
	need("LayerNormBackward dw", dw, c)
	need("LayerNormBackward db", db, c)
	need("LayerNormBackward w", w, c)
	need("LayerNormBackward mean", mean, n)
	need("LayerNormBackward rstd", rstd, n)
	if n == 0 {
		return
	}
	// Each warp keeps dw and db (2c floats) in shared memory.
	warps := min(rowWarps, maxShared/(8*c))
	if warps < 1 {
		panic(fmt.Sprintf("cuda: LayerNormBackward: %d channels do not fit in shared memory", c))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	chunks := ceilDiv(n, lnRowsPerChunk)
	part := b.scratch(&b.partial, chunks*2*c)
	b.launch(kernels.LayerNormBackward, D1(b.grid(chunks)), D1(32*warps), warps*8*c,
		argF(dinp), argPF(part.Dev), argF(dout), argF(inp), argF(w), argF(mean), argF(rstd),
		argInt(n), argInt(c), argInt(lnRowsPerChunk))
	b.accumulate(dw, part.Dev, chunks, 2*c, c)
	b.accumulate(db, part.Dev+4*uintptr(c), chunks, 2*c, c)
}

// accumulate adds to dst[0:ncols) the sum over chunks of partial[k·ld + j], in chunk order.
func (b *Backend) accumulate(dst backend.Buf, partial uintptr, chunks, ld, ncols int) {
	const block = 256
	b.launch(kernels.AccumulatePartials, D1(b.grid(ceilDiv(ncols, block))), D1(block), 0,
		argF(dst), argPF(partial), argInt(chunks), argInt(ld), argInt(ncols))
}

// Matrix products. cuBLAS is column-major: a row-major (r, c) matrix is the column-major
// (c, r) matrix with the same leading dimension, so row-major C = op(A)·op(B) is computed as
// column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, i.e. Sgemm with the operands (and their shapes) swapped.
// The buffers stay reachable until the call is issued (see Backend.mem).
func (b *Backend) gemmRowMajor(transA, transB bool, m, n, k int, alpha float32, a backend.Buf, lda int, bm backend.Buf, ldb int, beta float32, c backend.Buf, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	b.d.Sgemm(transB, transA, n, m, k, alpha, addrF(bm), ldb, addrF(a), lda, beta, addrF(c), ldc)
	runtime.KeepAlive(a.M)
	runtime.KeepAlive(bm.M)
	runtime.KeepAlive(c.M)
}

// MatMul runs the forward's products through rkcu_matmul_nt, not cuBLAS: each output's sum
// runs in k order whatever the number of rows, so the sampler's few rows and the training
// forward's thousands give a row the same bits (DESIGN §6.1). cuBLAS's choice of algorithm,
// and with it a sum's order, depends on the sizes.
func (b *Backend) MatMul(out, inp, w, bias backend.Buf, n, c, oc int) {
	b.matMul(out, backend.Buf{}, backend.Buf{}, inp, w, bias, n, c, oc)
}

// MatMulAdd: out = res + (bias + inp·wᵀ) in one pass, rounded as MatMul then Add.
func (b *Backend) MatMulAdd(out, res, inp, w, bias backend.Buf, n, c, oc int) {
	need("MatMulAdd res", res, n*oc)
	if out.Slice(0, n*oc).Overlaps(res.Slice(0, n*oc)) {
		panic("cuda: MatMulAdd: res overlaps the output") // the interface's contract, as the CPU's
	}
	b.matMul(out, backend.Buf{}, res, inp, w, bias, n, c, oc)
}

// matMulTile is rkcu_matmul_nt's tile (rows and columns), matMulThreads its threads per
// block; a product of fewer than matMulWide such tiles runs rkcu_matmul_nt16's tiles of 16,
// which fill more of the GPU (a decode step's 64 rows × 768 columns make 12 tiles of 64). The
// tiles change which thread computes an element, not its sum.
const matMulTile, matMulThreads, matMulWide = 64, 256, 128

// matMul runs the product kernel: out = res + (bias + inp·wᵀ), and gelu(out) into gelu where
// gelu is set.
func (b *Backend) matMul(out, gelu, res, inp, w, bias backend.Buf, n, c, oc int) {
	need("MatMul out", out, n*oc)
	need("MatMul inp", inp, n*c)
	need("MatMul w", w, oc*c)
	if !bias.Nil() {
		need("MatMul bias", bias, oc)
	}
	if n == 0 || oc == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	k, tiles := kernels.MatMulNT, ceilDiv(n, matMulTile)*ceilDiv(oc, matMulTile)
	if tiles < matMulWide {
		k, tiles = kernels.MatMulNT16, ceilDiv(n, 16)*ceilDiv(oc, 16)
	}
	b.launch(k, D1(b.grid(tiles)), D1(matMulThreads), 0,
		argF(out), argF(gelu), argF(res), argF(inp), argF(w), argF(bias), argInt(n), argInt(c), argInt(oc))
}

// MatMulGELU is MatMul then GELU, in one launch: the product kernel writes both.
func (b *Backend) MatMulGELU(pre, out, inp, w, bias backend.Buf, n, c, oc int) {
	need("MatMulGELU out", out, n*oc)
	b.matMul(pre, out, backend.Buf{}, inp, w, bias, n, c, oc)
}

func (b *Backend) MatMulBackward(dinp, dw, dbias, dout, inp, w backend.Buf, n, c, oc int) {
	need("MatMulBackward dout", dout, n*oc)
	need("MatMulBackward inp", inp, n*c)
	need("MatMulBackward w", w, oc*c)
	need("MatMulBackward dw", dw, oc*c)
	b.mu.Lock()
	defer b.mu.Unlock()
	if !dinp.Nil() {
		need("MatMulBackward dinp", dinp, n*c)
		// dinp = dout·w
		b.gemmRowMajor(false, false, n, c, oc, 1, dout, oc, w, c, 0, dinp, c)
	}
	// dw += doutᵀ·inp
	b.gemmRowMajor(true, false, oc, c, n, 1, dout, oc, inp, c, 1, dw, c)
	if !dbias.Nil() && n > 0 {
		need("MatMulBackward dbias", dbias, oc)
		const block = 256
		chunks := ceilDiv(n, colChunk)
		part := b.scratch(&b.partial, chunks*oc)
		b.launch(kernels.ColumnSums, Dim{b.grid(ceilDiv(oc, block)), b.grid(min(chunks, 65535)), 1}, D1(block), 0,
			argPF(part.Dev), argF(dout), argInt(n), argInt(oc), argInt(colChunk))
		b.accumulate(dbias, part.Dev, chunks, oc, oc)
	}
}

// Attention.

// packBounds puts each row's six bounds on the device (if the pack changed; see
// kernels/attention.cu) and returns them with the most keys of a query row and the most
// queries of a key row.
func (b *Backend) packBounds(p backend.Pack) (uintptr, int, int) {
	n := p.Rows()
	if len(p.Start) != len(p.Len) || (p.Prefix != nil && len(p.Prefix) != len(p.Len)) {
		panic("cuda: Pack with Start, Len and Prefix of different lengths")
	}
	if b.bounds != nil && equal(b.packStart, p.Start) && equal(b.packLen, p.Len) && equal(b.packPrefix, p.Prefix) &&
		(b.packPrefix == nil) == (p.Prefix == nil) {
		return b.bounds.Dev, b.packKeys, b.packQueries
	}
	hb := b.hostBounds[:0]
	for range 6 * n {
		hb = append(hb, -1)
	}
	keys, queries := 0, 0
	root := -1
	for i, s := range p.Start {
		l := p.Len[i]
		if s < 0 || l < 0 || int(s+l) > n {
			panic(fmt.Sprintf("cuda: Pack sequence %d (start %d, length %d) outside %d rows", i, s, l, n))
		}
		ps, pe := s, s // no prefix: an empty run of keys
		switch pre := p.PrefixOf(i); {
		case pre < 0:
			root = i
		case pre != root:
			panic(fmt.Sprintf("cuda: Pack sequence %d continues sequence %d, which is not the prefix before it", i, pre))
		default:
			ps, pe = p.Start[pre], p.Start[pre]+p.Len[pre]
			// The prefix's rows see this sequence's rows as later queries.
			for r := ps; r < pe; r++ {
				if hb[6*r+4] < 0 {
					hb[6*r+4] = s
				}
				hb[6*r+5] = s + l
				queries = max(queries, int(pe-r)+int(s+l-hb[6*r+4]))
			}
		}
		for r := s; r < s+l; r++ {
			if hb[6*r] >= 0 {
				panic(fmt.Sprintf("cuda: Pack sequences overlap at row %d", r))
			}
			hb[6*r], hb[6*r+1], hb[6*r+2], hb[6*r+3] = s, s+l, ps, pe
		}
		keys = max(keys, int(pe-ps)+int(l))
		queries = max(queries, int(l))
	}
	b.hostBounds = hb
	m := b.scratch(&b.bounds, max(6*n, 1))
	if n > 0 {
		b.d.HtoD(m.Dev, unsafe.Pointer(&hb[0]), 24*n)
	}
	b.packStart = append(b.packStart[:0], p.Start...)
	b.packLen = append(b.packLen[:0], p.Len...)
	b.packPrefix = nil
	if p.Prefix != nil {
		b.packPrefix = append([]int32{}, p.Prefix...)
	}
	b.packKeys, b.packQueries = keys, queries
	return m.Dev, keys, queries
}

func equal(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// warpGrid returns the block count and warps per block for one warp per item, with perWarp
// floats of dynamic shared memory each.
func (b *Backend) warpGrid(op string, items, perWarp int) (blocks, warps int) {
	warps = min(rowWarps, maxShared/(4*max(perWarp, 1)))
	if warps < 1 {
		panic(fmt.Sprintf("cuda: %s: %d floats of shared memory per warp is more than the device gives (sequence too long)", op, perWarp))
	}
	return b.grid(ceilDiv(items, warps)), warps
}

func checkHeads(op string, nh, c int) int {
	if nh <= 0 || c%nh != 0 {
		panic(fmt.Sprintf("cuda: %s: %d channels do not split into %d heads", op, c, nh))
	}
	return c / nh
}

func (b *Backend) Attention(out, lse, qkv backend.Buf, p backend.Pack, nh, c int) {
	hd := checkHeads("Attention", nh, c)
	n := p.Rows()
	need("Attention out", out, n*c)
	need("Attention lse", lse, n*nh)
	need("Attention qkv", qkv, n*3*c)
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	bounds, tmax, _ := b.packBounds(p)
	per := hd + tmax
	blocks, warps := b.warpGrid("Attention", n*nh, per)
	b.launch(kernels.AttentionForward, D1(blocks), D1(32*warps), 4*warps*per,
		argF(out), argF(lse), argF(qkv), argPI(bounds), argInt(n), argInt(nh), argInt(c), argInt(tmax))
}

func (b *Backend) AttentionBackward(dqkv, dout, out, lse, qkv backend.Buf, p backend.Pack, nh, c int) {
	hd := checkHeads("AttentionBackward", nh, c)
	n := p.Rows()
	need("AttentionBackward dqkv", dqkv, n*3*c)
	need("AttentionBackward dout", dout, n*c)
	need("AttentionBackward out", out, n*c)
	need("AttentionBackward lse", lse, n*nh)
	need("AttentionBackward qkv", qkv, n*3*c)
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	bounds, tmax, tq := b.packBounds(p)
	dd := b.scratch(&b.dd, n*nh)
	per := 2*hd + tmax
	blocks, warps := b.warpGrid("AttentionBackward", n*nh, per)
	b.launch(kernels.AttentionBackwardDQ, D1(blocks), D1(32*warps), 4*warps*per,
		argF(dqkv), argPF(dd.Dev), argF(dout), argF(out), argF(lse), argF(qkv), argPI(bounds),
		argInt(n), argInt(nh), argInt(c), argInt(tmax))
	per = 2*hd + 2*tq
	blocks, warps = b.warpGrid("AttentionBackward", n*nh, per)
	b.launch(kernels.AttentionBackwardKV, D1(blocks), D1(32*warps), 4*warps*per,
		argF(dqkv), argPF(dd.Dev), argF(dout), argF(lse), argF(qkv), argPI(bounds),
		argInt(n), argInt(nh), argInt(c), argInt(tq))
}

// kvSlots is the number of cache slots a KV holds.
func kvSlots(op string, kv backend.KV, c int) int {
	if kv.Cap <= 0 || kv.K.N != kv.V.N || kv.K.N%(kv.Cap*c) != 0 {
		panic(fmt.Sprintf("cuda: %s: KV cache of %d floats is not slots × %d positions × %d channels", op, kv.K.N, kv.Cap, c))
	}
	return kv.K.N / (kv.Cap * c)
}

func (b *Backend) KVWrite(kv backend.KV, qkv backend.Buf, slot, pos backend.I32, n, c int) {
	slots := kvSlots("KVWrite", kv, c)
	need("KVWrite qkv", qkv, n*3*c)
	needI("KVWrite slot", slot, n)
	needI("KVWrite pos", pos, n)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flat(kernels.KVWrite, n*c, argF(kv.K), argF(kv.V), argF(qkv), argI(slot), argI(pos),
		argInt(n), argInt(c), argInt(kv.Cap), argInt(slots))
}

func (b *Backend) AttentionDecode(out, qkv backend.Buf, kv backend.KV, slot, pos backend.I32, n, nh, c int) {
	hd := checkHeads("AttentionDecode", nh, c)
	slots := kvSlots("AttentionDecode", kv, c)
	need("AttentionDecode out", out, n*c)
	need("AttentionDecode qkv", qkv, n*3*c)
	needI("AttentionDecode slot", slot, n)
	needI("AttentionDecode pos", pos, n)
	if kv.Shared.M != nil {
		needI("AttentionDecode KV.Shared", kv.Shared, 2*slots)
	}
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	per := hd + kv.Cap
	blocks, warps := b.warpGrid("AttentionDecode", n*nh, per)
	b.launch(kernels.AttentionDecode, D1(blocks), D1(32*warps), 4*warps*per,
		argF(out), argF(qkv), argF(kv.K), argF(kv.V), argI(kv.Shared), argI(slot), argI(pos),
		argInt(n), argInt(nh), argInt(c), argInt(kv.Cap), argInt(slots))
}

// Log-probabilities.

func (b *Backend) LogProbs(lse, logp, ent, logits backend.Buf, targets backend.I32, rows, v int, invTemp float32) {
	need("LogProbs lse", lse, rows)
	need("LogProbs logp", logp, rows)
	need("LogProbs logits", logits, rows*v)
	needI("LogProbs targets", targets, rows)
	if !ent.Nil() {
		need("LogProbs ent", ent, rows)
	}
	if rows == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.launch(kernels.LogProbsForward, D1(b.grid(rows)), D1(rowBlock(v)), 0,
		argF(lse), argF(logp), argF(ent), argF(logits), argI(targets), argInt(rows), argInt(v), argF32(invTemp))
}

func (b *Backend) LogProbsBackward(logits, lse, ent, dlogp, dent backend.Buf, targets backend.I32, rows, v int, invTemp float32) {
	need("LogProbsBackward logits", logits, rows*v)
	need("LogProbsBackward lse", lse, rows)
	need("LogProbsBackward dlogp", dlogp, rows)
	needI("LogProbsBackward targets", targets, rows)
	if !dent.Nil() {
		need("LogProbsBackward dent", dent, rows)
		need("LogProbsBackward ent", ent, rows)
	} else {
		ent = backend.Buf{}
	}
	if rows == 0 || v == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.launch(kernels.LogProbsBackward, Dim{b.grid(ceilDiv(v, flatBlock)), b.grid(min(rows, 65535)), 1}, D1(flatBlock), 0,
		argF(logits), argF(lse), argF(ent), argF(dlogp), argF(dent), argI(targets), argInt(rows), argInt(v), argF32(invTemp))
}

func (b *Backend) Softmax(probs, lse, logits backend.Buf, rows, v int, invTemp float32) {
	need("Softmax probs", probs, rows*v)
	need("Softmax lse", lse, rows)
	need("Softmax logits", logits, rows*v)
	if rows == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.launch(kernels.Softmax, D1(b.grid(rows)), D1(rowBlock(v)), 0,
		argF(probs), argF(lse), argF(logits), argInt(rows), argInt(v), argF32(invTemp))
}

// Sample makes draws on the device: draw d from row distRows[d] of probs (row d where
// distRows is nil) with the uniform of seed, its stream and its position, as the CPU sampler
// draws (rollout.Draw: DrawChunk's partial sums), or with greedy the most probable token;
// tokens[d] gets the token and logp[d] its logprob, logits[row, token]·invTemp − lse[row].
// streams holds each draw's 64-bit stream as two words, low first. Shaped sampling (top-k,
// top-p) stays on the host.
func (b *Backend) Sample(tokens backend.I32, logp, probs, logits, lse backend.Buf, distRows, streams, positions backend.I32,
	draws, rows, v int, seed uint64, greedy bool, invTemp float32) {
	needI("Sample tokens", tokens, draws)
	need("Sample logp", logp, draws)
	need("Sample probs", probs, rows*v)
	need("Sample logits", logits, rows*v)
	need("Sample lse", lse, rows)
	if distRows.M != nil {
		needI("Sample rows", distRows, draws)
	} else if draws > rows {
		panic(fmt.Sprintf("cuda: Sample of %d draws from %d rows without their rows", draws, rows))
	}
	needI("Sample streams", streams, 2*draws)
	needI("Sample positions", positions, draws)
	if v > maxSampleVocab {
		panic(fmt.Sprintf("cuda: Sample over %d tokens, more than %d", v, maxSampleVocab))
	}
	if draws == 0 {
		return
	}
	g := 0
	if greedy {
		g = 1
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.launch(kernels.Sample, D1(b.grid(draws)), D1(rowBlock(v)), 0, argI(tokens), argF(logp), argF(probs), argF(logits),
		argF(lse), argI(distRows), argI(streams), argI(positions), argInt(draws), argInt(v), Arg{Bits: seed, Kind: 'l'},
		argInt(g), argF32(invTemp))
}

// maxSampleVocab is the largest vocabulary rkcu_sample draws from: 64 chunks of 1024 tokens
// (RKCU_DRAW_CHUNKS, RKCU_DRAW_CHUNK).
const maxSampleVocab = 64 * 1024

// Optimizer.

// AdamW is one launch over the whole buffer whatever the spans without decay: they travel
// as a table of [start, end) pairs.
func (b *Backend) AdamW(p, g, m, v backend.Buf, h backend.AdamW) {
	sameLen("AdamW", p, g, m, v)
	// The scalars exactly as the CPU backend derives them.
	bc1 := 1 - math.Pow(float64(h.Beta1), float64(h.Step))
	bc2 := 1 - math.Pow(float64(h.Beta2), float64(h.Step))
	decay := 1 - h.LR*h.WeightDecay
	step := float32(float64(h.LR) / bc1)
	isb := float32(1 / math.Sqrt(bc2))
	b.mu.Lock()
	defer b.mu.Unlock()
	backend.CheckSpans("cuda: AdamW", p.N, h.NoDecay, true)
	tab := b.adamHost[:0]
	for _, s := range h.NoDecay {
		if s.N > 0 {
			tab = append(tab, int64(s.Off), int64(s.Off+s.N))
		}
	}
	b.adamHost = tab
	b.flat(kernels.AdamW, p.N, argF(p), argF(g), argF(m), argF(v), argL(p.N), argPL(b.table(&b.noDecay, tab)), argInt(len(tab)/2),
		argF32(h.Beta1), argF32(h.Beta2), argF32(h.Eps), argF32(decay), argF32(step), argF32(isb))
}

func (b *Backend) SumSquares(x backend.Buf) float64 {
	var r [1]float64
	b.SumSquaresMany(x, []backend.Span{{Off: 0, N: x.N}}, r[:])
	return r[0]
}

// SumSquaresMany is one launch over every span's chunks of sqChunk elements and one copy of
// their partial sums to the host, which adds each span's in order: a gradient norm costs one
// synchronisation, not one a tensor. A span's chunks, block size and order are the same alone
// or among others, so each sum has the bits SumSquares gives for it.
func (b *Backend) SumSquaresMany(x backend.Buf, spans []backend.Span, out []float64) {
	if len(out) != len(spans) {
		panic("cuda: SumSquaresMany: out and spans differ in length")
	}
	backend.CheckSpans("cuda: SumSquaresMany", x.N, spans, false)
	b.mu.Lock()
	defer b.mu.Unlock()
	// The table rkcu_sumsq reads: each span's first chunk (and the count after the last), the
	// offsets, the lengths.
	count := len(spans)
	tab := slices.Grow(b.sqHost[:0], 3*count+1)[:3*count+1]
	b.sqHost = tab
	chunks := 0
	for i, s := range spans {
		tab[i], tab[count+1+i], tab[2*count+1+i] = int64(chunks), int64(s.Off), int64(s.N)
		chunks += ceilDiv(s.N, sqChunk)
	}
	tab[count] = int64(chunks)
	clear(out)
	if chunks == 0 {
		return
	}
	// chunks partial doubles: 2 floats each.
	part := b.scratch(&b.sq, 2*chunks)
	b.launch(kernels.SumSquares, D1(b.grid(chunks)), D1(reduceBlock), 0,
		argD(part.Dev), argF(x), argPL(b.table(&b.sqSpans, tab)), argInt(count), argInt(sqChunk))
	host := slices.Grow(b.sqPart[:0], chunks)[:chunks]
	b.sqPart = host
	b.d.DtoH(unsafe.Pointer(&host[0]), part.Dev, 8*chunks)
	for i := range spans {
		for _, p := range host[tab[i]:tab[i+1]] {
			out[i] += p
		}
	}
}

// table puts v on the device in t, copying it only when it changed (a layout's spans are the
// same at every update, and a copy from pageable host memory waits for the device's earlier
// work), and returns its address: 0 for an empty table.
func (b *Backend) table(t *devTable, v []int64) uintptr {
	if len(v) == 0 {
		return 0
	}
	if t.mem == nil || !slices.Equal(t.host, v) {
		m := b.scratch(&t.mem, 2*len(v))
		b.d.HtoD(m.Dev, unsafe.Pointer(&v[0]), 8*len(v))
		t.host = append(t.host[:0], v...)
	}
	return t.mem.Dev
}
