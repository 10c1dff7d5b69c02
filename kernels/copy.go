package kernels

import (
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

// TiledCopyElems returns the number of elements one block of tiled_copy moves.
func TiledCopyElems(dt dsl.Type) int { return copyThreads * copyIters * 16 / dt.Bytes() }

// TiledCopy copies n elements of src to dst. Each block moves one tile of
// TiledCopyElems(dt) elements: thread t owns copyIters vectors of 16 bytes, the vectors of
// consecutive threads adjacent (a thread-value layout of 256 threads x 16/size(dt) values).
// Launch ceil(n / TiledCopyElems(dt)) blocks of 256 threads.
func TiledCopy(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[CopyArgs](k, dt)
	src, dst, n := a.Src, a.Dst, a.N
	vals := 16 / dt.Bytes()
	tile := TiledCopyElems(dt)
	thr := layout.Must(layout.MakeLayout(layout.Int(copyThreads)))
	bid, tid := k.BlockIdx(dsl.X), k.ThreadIdx(dsl.X)

	gS := k.MakeTensorDyn(src, []any{n}, []any{1}).LocalTile([]int{tile}, bid)
	gD := k.MakeTensorDyn(dst, []any{n}, []any{1}).LocalTile([]int{tile}, bid)
	tS := gS.LocalPartition(thr, tid, vals)
	tD := gD.LocalPartition(thr, tid, vals)
	frag := k.Fragment(dt, tS)
	k.Copy(tS, frag)
	k.Copy(frag, tD)
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
// predicated. Launch a grid of (ceil(n/32), ceil(m/32)) blocks of (256) threads.
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
	tile := []int{transTile, transTile}
	tiles := func(ld, ldT dsl.Value) (gIn, gOut dsl.Tensor) {
		gIn = k.MakeTensorDyn(in, []any{m, n}, []any{ld, 1}).LocalTile(tile, by, bx)
		gOut = k.MakeTensorDyn(out, []any{n, m}, []any{ldT, 1}).LocalTile(tile, bx, by)
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
