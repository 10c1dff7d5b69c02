package kernels

import (
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
)

// Tiled-copy and transpose geometry.
const (
	copyThreads = 256 // threads per block
	copyIters   = 4   // 128-bit accesses per thread and direction
	transTile   = 32  // transpose tile edge
	transRows   = 8   // thread rows of the transpose block (32 x 8 threads)
)

func init() {
	register(&Spec{
		Name:   "tiled_copy",
		Doc:    "dst[i] = src[i] for i < n; 256 threads x 128-bit vectors x 4 per block, from a thread-value layout",
		DTypes: []dsl.Type{dsl.F32, dsl.F16, dsl.U8},
		New:    TiledCopy,
	})
	register(&Spec{
		Name:   "transpose",
		Doc:    "out (n x m) = in (m x n)^T, row-major; 32x32 tiles through swizzled shared memory, 32x8 threads",
		DTypes: []dsl.Type{dsl.F32, dsl.F16},
		New:    Transpose,
	})
}

// CopyArgs are tiled_copy's parameters (launch.Copy on the host).
type CopyArgs struct {
	Src, Dst dsl.Ptr   // of dt
	N        dsl.Value `kgen:"u32"`
}

// TransposeArgs are transpose's parameters (launch.Transpose on the host).
type TransposeArgs struct {
	In, Out dsl.Ptr   // in is m x n, out n x m, of dt, row-major
	M, N    dsl.Value `kgen:"u32"`
}

// TiledCopyElems returns the number of elements one block of tiled_copy moves (a type of
// no size, the zero Type, counts as one byte).
func TiledCopyElems(dt dsl.Type) int { return copyThreads * copyIters * 16 / max(dt.Bytes(), 1) }

// TiledCopy copies n elements of src to dst. Each block moves one tile of
// TiledCopyElems(dt) elements: thread t owns copyIters vectors of 16 bytes, the vectors of
// consecutive threads adjacent (a thread-value layout of 256 threads x 16/size(dt) values).
// Launch ceil(n / TiledCopyElems(dt)) blocks of 256 threads (blocks past the end do nothing).
func TiledCopy(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[CopyArgs](k, dt)
	src, dst, n := a.Src, a.Dst, a.N
	vals := 16 / max(dt.Bytes(), 1)
	tile := TiledCopyElems(dt)
	thr := layout.Must(layout.MakeLayout(layout.Int(copyThreads)))
	bid, tid := k.BlockIdx(dsl.X), k.ThreadIdx(dsl.X)

	// The block's tile starts at a 64-bit offset (bid*tile may pass 2^31 elements, where
	// 32-bit signed tile offsets turn negative); within it the offsets are small, and the
	// tile's extent, min(max(n, bid*tile) - bid*tile, tile), predicates the last one and
	// empties those of blocks past the end (a larger grid than ceil(n/tile)).
	first := bid.MulWide(uint32(tile))
	left := n.To(dsl.U64).Max(first).Sub(first).Min(uint64(tile)).To(dsl.U32)
	gS := k.MakeTensorDyn(src.At(bid.MulWide(uint32(tile))), []any{left}, []any{1}).LocalTile([]int{tile}, 0)
	gD := k.MakeTensorDyn(dst.At(bid.MulWide(uint32(tile))), []any{left}, []any{1}).LocalTile([]int{tile}, 0)
	tS := gS.LocalPartition(thr, tid, vals)
	tD := gD.LocalPartition(thr, tid, vals)
	frag := k.Fragment(dt, tS)
	k.Copy(tS, frag)
	k.Copy(frag, tD)
}

// MaxTransposeExtent is the largest M or N transpose takes: 2^26, so that a tile's 32-bit
// offsets (up to 31 rows of a row stride of N or M elements) stay below 2^31; each tile's
// first element is a 64-bit offset, so M*N may pass 2^31.
const MaxTransposeExtent = 1 << 26

// TransposeCheckShape reports an m x n transpose the kernel cannot run: each extent must be
// in [1, MaxTransposeExtent].
func TransposeCheckShape(m, n int) error {
	if m < 1 || n < 1 || m > MaxTransposeExtent || n > MaxTransposeExtent {
		return fmt.Errorf("transpose: %d x %d: each extent must be in [1, 2^26] (MaxTransposeExtent: the tiles' 32-bit offsets span 31 rows)", m, n)
	}
	return nil
}

// Transpose writes out = in^T for an m x n row-major in (out is n x m, row-major). A block
// of 256 threads moves a 32 x 32 tile through shared memory laid out with a Swizzle<5,0,5>
// (row bits xor column bits, so reading a column is free of bank conflicts), as CuTe's
// transpose does: when m and n are multiples of 4 (every row of both matrices starts on a
// 4-element boundary), the threads are 32 rows of 8, each reading 4 consecutive elements of
// a row of in's tile with one vector load (128-bit for f32, 64-bit for f16: 256 threads x 4
// elements cover the tile) into registers, storing them to the swizzled tile, and after a
// barrier gathering 4 elements of a column of it (scalar: the swizzle keeps a row's
// elements, and so a column's, on distinct banks) into registers and writing them with one
// vector store to a row of out's tile. Otherwise the threads are 8 rows of 32 moving
// elements one at a time (a warp per row, coalesced). Partial tiles at the edges are
// predicated. Launch a grid of (ceil(n/32), ceil(m/32)) blocks of (256) threads (blocks past
// the edges do nothing).
func Transpose(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[TransposeArgs](k, dt)
	in, out, m, n := a.In, a.Out, a.M, a.N
	bx, by, tid := k.BlockIdx(dsl.X), k.BlockIdx(dsl.Y), k.ThreadIdx(dsl.X)

	smem := k.SharedArray(dt, transTile*transTile)
	sw := layout.Swizzle{B: 5, M: 0, S: 5}
	rowMajor := layout.MustParse("(32,32):(32,1)")
	colMajor := layout.MustParse("(32,32):(1,32)")
	sTile := k.MakeSwizzledTensor(smem, sw, rowMajor)  // s(i, j) = in(i, j)
	sTrans := k.MakeSwizzledTensor(smem, sw, colMajor) // sT(j, i) = s(i, j)

	// tiles returns this block's tiles of in and out, viewed with row strides ld and ldT.
	// Each tile's first element is a 64-bit offset (row*ld may pass 2^31 elements); within
	// the tile the offsets are 32-bit (at most 32 rows of ld), and its extents, the rows and
	// columns left of the matrix (at most 32), predicate the edges.
	tile := []int{transTile, transTile}
	r0, c0 := k.Assume(by.Mul(uint32(transTile)), transTile), k.Assume(bx.Mul(uint32(transTile)), transTile)
	// Blocks past the edges (a larger grid than documented) have empty tiles.
	rowsIn, colsIn := m.Max(r0).Sub(r0).Min(uint32(transTile)), n.Max(c0).Sub(c0).Min(uint32(transTile))
	tiles := func(ld, ldT dsl.Value) (gIn, gOut dsl.Tensor) {
		gIn = k.MakeTensorDyn(in.At(r0.MulWide(ld)).At(c0), []any{rowsIn, colsIn}, []any{ld, 1}).LocalTile(tile, 0, 0)
		gOut = k.MakeTensorDyn(out.At(c0.MulWide(ldT)).At(r0), []any{colsIn, rowsIn}, []any{ldT, 1}).LocalTile(tile, 0, 0)
		return gIn, gOut
	}

	// The vector path's partition: 32 rows of 8 threads, 4 consecutive elements each.
	const vals = transTile * transTile / (transRows * transTile)
	vThr := layout.MustParse("(32,8):(8,1)")
	vPart := func(t dsl.Tensor) dsl.Tensor { return t.LocalPartition(vThr, tid, 1, vals) }
	// The scalar path's: 8 rows of 32 threads, a warp per row.
	sThr := layout.MustParse("(8,32):(32,1)")
	sPart := func(t dsl.Tensor) dsl.Tensor { return t.LocalPartition(sThr, tid) }

	// Rows start on a vector boundary when m and n are multiples of vals: uniform over the
	// grid. Within the branch n and m equal themselves rounded down to a multiple of vals,
	// which Assume may declare (vector accesses need the strides' divisibility).
	aligned := m.Or(n).And(vals - 1).Eq(0)
	ldIn := k.Assume(n.And(^uint32(vals-1)), vals)
	ldOut := k.Assume(m.And(^uint32(vals-1)), vals)
	k.If(aligned, func() {
		gIn, _ := tiles(ldIn, ldOut)
		tIn := vPart(gIn)
		frag := k.Fragment(dt, tIn)
		k.Copy(tIn, frag) // one vector load; zeros outside the matrix
		k.Copy(frag, vPart(sTile))
	}).Else(func() {
		gIn, _ := tiles(n, m)
		k.Copy(sPart(gIn), sPart(sTile))
	})
	k.SyncThreads()
	k.If(aligned, func() {
		_, gOut := tiles(ldIn, ldOut)
		tOut := vPart(gOut)
		frag := k.Fragment(dt, tOut)
		k.Copy(vPart(sTrans), frag)
		k.Copy(frag, tOut) // one vector store, predicated at the edges
	}).Else(func() {
		_, gOut := tiles(n, m)
		k.Copy(sPart(sTrans), sPart(gOut))
	})
}
