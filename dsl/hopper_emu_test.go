package dsl_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/ptx"
)

// hopperTile is a GEMM tile D (64*wgs x n) = A (64*wgs x kTotal) * B^T (n x kTotal):
// warpgroup 0 is the producer (one elected thread issues the TMA loads of A and B, bk
// columns a stage, through a TMA pipeline of the given stages), warpgroups 1..wgs the
// consumers (wgmma over the stage's K blocks for their 64 rows, then release it). Both
// operands are K-major with the 128-byte swizzle. Thread t of consumer warpgroup w stores
// accumulator i at d[128*(w*n/2 + i) + t].
type hopperTile struct {
	ab                  dsl.Type
	n, bk, kTotal, stgs int
	wgs                 int  // consumer warpgroups along M (0: 1)
	bMN                 bool // B is N-major (stored K x N, N contiguous)
	lag                 bool // keep one wgmma group in flight, releasing the previous stage
}

func (c hopperTile) m() int { return 64 * max(c.wgs, 1) }

func (c hopperTile) build(t testing.TB) (*dsl.Kernel, dsl.GMMAAtom, *dsl.TMACopy, *dsl.TMACopy) {
	t.Helper()
	k := dsl.New("wsgemm", dsl.WithTarget(ptx.SM90a))
	tmA, tmB := k.TensorMapParam("tma", c.ab), k.TensorMapParam("tmb", c.ab)
	out := k.PtrParam("d", dsl.F32)
	atom, err := dsl.MakeGMMAAtom(c.ab, c.n)
	if err != nil {
		t.Fatal(err)
	}
	la, err := dsl.GMMALayoutAtom(c.ab, dsl.KMajor, 128)
	if err != nil {
		t.Fatal(err)
	}
	lA, err := dsl.TileToShape(la, c.m(), c.bk)
	if err != nil {
		t.Fatal(err)
	}
	lbAtom := la
	if c.bMN {
		lbAtom, err = dsl.GMMALayoutAtom(c.ab, dsl.MNMajor, 128)
		if err != nil {
			t.Fatal(err)
		}
	}
	lB, err := dsl.TileToShape(lbAtom, c.n, c.bk)
	if err != nil {
		t.Fatal(err)
	}
	sA, sB := k.SharedTile(c.ab, lA, c.stgs), k.SharedTile(c.ab, lB, c.stgs)
	cA, cB := k.MakeTMACopy(tmA, sA), k.MakeTMACopy(tmB, sB)
	pipe := k.MakeTMAPipeline(c.stgs, c.m()*2, cA, cB)
	mma := dsl.MakeTiledGMMA(atom, max(c.wgs, 1))
	tid := k.ThreadIdx(dsl.X)
	kTiles := c.kTotal / c.bk
	k.If(tid.Lt(uint32(128)), func() {
		k.WarpgroupRegDealloc(40)
		k.If(tid.Lt(uint32(32)).And(k.ElectOne()), func() {
			st := pipe.ProducerState()
			k.For(0, kTiles, 1, func(kt dsl.Value) {
				pipe.ProducerAcquire(st)
				pipe.Load(st, cA, 0, kt.Mul(int32(c.bk)))
				pipe.Load(st, cB, 0, kt.Mul(int32(c.bk)))
				pipe.ProducerCommit(st)
				st.Advance()
			})
		})
	}).Else(func() {
		k.WarpgroupRegAlloc(232)
		acc := mma.Accumulators(k)
		wg := tid.Shr(uint32(7)).Sub(uint32(1))
		st := pipe.ConsumerState()
		if !c.lag {
			k.For(0, kTiles, 1, func(kt dsl.Value) {
				pipe.ConsumerWait(st)
				mma.Gemm(k, wg, sA, sB, st.Index, acc)
				k.WaitGroup(0)
				pipe.ConsumerRelease(st)
				st.Advance()
			})
		} else { // CuTe's mainloop: one group in flight; release the stage before it
			for _, v := range acc.Values() { // garbage: the first K block overwrites it
				k.Set(v, float32(1e30))
			}
			rel := pipe.ConsumerState()
			pipe.ConsumerWait(st)
			mma.Accumulating(k.Const(dsl.Bool, false)).Gemm(k, wg, sA, sB, st.Index, acc)
			st.Advance()
			k.For(1, kTiles, 1, func(kt dsl.Value) {
				pipe.ConsumerWait(st)
				mma.Accumulating(kt.Ne(int32(0))).Gemm(k, wg, sA, sB, st.Index, acc) // true: a runtime scale-d
				k.WaitGroup(1)
				pipe.ConsumerRelease(rel)
				st.Advance()
				rel.Advance()
			})
			k.WaitGroup(0)
			pipe.ConsumerRelease(rel)
		}
		me := tid.Sub(uint32(128)).And(uint32(127)).Add(wg.Mul(uint32(128 * atom.AccRegs())))
		for i, v := range acc.Values() {
			k.Store(out.At(me.Add(uint32(128*i))), v)
		}
	})
	return k, atom, cA, cB
}

// elems returns n values of ab (small multiples of 1/2, exact in every input type) as
// floats and as the bytes of their encoding.
func elems(ab dsl.Type, n, seed int) ([]float64, []byte) {
	f := make([]float64, n)
	var b []byte
	for i := range f {
		f[i] = float64((i*7+seed*13)%9-4) * 0.5
		b = append(b, encode(ab, f[i])...)
	}
	return f, b
}

// encode returns the bytes of f as an ab value.
func encode(ab dsl.Type, f float64) []byte {
	switch ab {
	case dsl.BF16:
		h := fp.F32ToBF16(float32(f))
		return []byte{byte(h), byte(h >> 8)}
	case dsl.F16:
		h := fp.F32ToF16(float32(f))
		return []byte{byte(h), byte(h >> 8)}
	case dsl.E4M3:
		e, _ := fp.F64ToE4M3(f)
		return []byte{e}
	case dsl.E5M2:
		e, _ := fp.F64ToE5M2(f)
		return []byte{e}
	case dsl.F32: // read as tf32: small multiples of 1/2 are exact
		return binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(f)))
	}
	panic("encode: " + ab.String())
}

// tileData is a tile's inputs: a (rows x kTotal) and b (n x kTotal) as floats, their bytes as
// the tensors store them (B transposed when c.bMN), and each map's dimensions (innermost
// first) with its copy.
type tileData struct {
	a, b   []float64
	ab, bb []byte
	es     int
}

func (c hopperTile) data() tileData {
	d := tileData{es: c.ab.Bytes()}
	d.a, d.ab = elems(c.ab, c.m()*c.kTotal, 1)
	d.b, d.bb = elems(c.ab, c.n*c.kTotal, 2) // b[n*kTotal + k]
	if c.bMN {                               // stored k-major: byte order (k, n)
		d.bb = d.bb[:0:0]
		for kk := 0; kk < c.kTotal; kk++ {
			for n := 0; n < c.n; n++ {
				d.bb = append(d.bb, encode(c.ab, d.b[n*c.kTotal+kk])...)
			}
		}
	}
	return d
}

// mapDims returns the tensor-map dimensions (innermost first) of copy cp over a tensor of rows
// x kTotal, checking the copy's major and box against what the tile asked for.
func (c hopperTile) mapDims(t *testing.T, cp *dsl.TMACopy, rows int, isB bool) [2]uint64 {
	t.Helper()
	dims := [2]uint64{uint64(c.kTotal), uint64(rows)}
	if cp.Major() == dsl.MNMajor {
		dims[0], dims[1] = dims[1], dims[0]
	}
	if (isB && c.bMN) != (cp.Major() == dsl.MNMajor) || (cp.Major() == dsl.KMajor && cp.Box[1] != rows) {
		t.Fatalf("copy: %v-major box %v (rows %d)", cp.Major(), cp.Box, rows)
	}
	return dims
}

// check compares the consumer threads' accumulators (got[128*(w*n/2 + i) + t]) with the
// float64 product (exact: the inputs are small multiples of 1/2).
func (c hopperTile) check(t *testing.T, atom dsl.GMMAAtom, d tileData, got []float32) {
	t.Helper()
	bad := 0
	for tid := 0; tid < 2*c.m(); tid++ {
		w := tid / 128
		for i := 0; i < atom.AccRegs(); i++ {
			row, col := atom.Coord(tid%128, i)
			row += 64 * w
			want := 0.0
			for kk := 0; kk < c.kTotal; kk++ {
				want += d.a[row*c.kTotal+kk] * d.b[col*c.kTotal+kk]
			}
			if g := got[128*(w*atom.AccRegs()+i)+tid%128]; float64(g) != want {
				if bad < 5 {
					t.Errorf("D[%d][%d] (thread %d value %d) = %g, want %g", row, col, tid, i, g, want)
				}
				bad++
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d elements differ", bad, c.m()*c.n)
	}
}

func (c hopperTile) run(t *testing.T) {
	k, atom, cA, cB := c.build(t)
	m, sys := onOneGPU(t, k)
	assemble(t, m)
	d := c.data()
	rows := c.m()
	alloc := func(n int) uint64 {
		p, err := sys.Malloc(0, n)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ga, gb, gd := alloc(len(d.ab)), alloc(len(d.bb)), alloc(4*rows*c.n)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(emu.WriteSlice(sys, ga, d.ab))
	must(emu.WriteSlice(sys, gb, d.bb))
	tmap := func(g uint64, rows int, cp *dsl.TMACopy) emu.TensorMap {
		dims := c.mapDims(t, cp, rows, cp == cB)
		return emu.TensorMap{Elem: ptx.Type(c.ab), Rank: 2, Global: g, Dims: [5]uint64{dims[0], dims[1]},
			Strides: [5]uint64{0, dims[0] * uint64(d.es)}, Box: [5]uint32{uint32(cp.Box[0]), uint32(cp.Box[1])}, Swizzle: cp.SwizzleBytes}
	}
	if want := (rows + c.n) * c.bk * d.es; cA.Bytes+cB.Bytes != want {
		t.Fatalf("expect_tx %d bytes, want %d", cA.Bytes+cB.Bytes, want)
	}
	must(sys.Launch(emu.Launch{Module: m, Entry: "wsgemm", Grid: emu.D1(1), Block: emu.D1(128 + 2*rows),
		Args: []any{tmap(ga, rows, cA), tmap(gb, c.n, cB), gd}}))
	got, err := emu.ReadSlice[float32](sys, gd, rows*c.n)
	must(err)
	c.check(t, atom, d, got)
}

// hopperTiles are the tiles TestHopperGemmTile (and the GPU test) run.
var hopperTiles = []hopperTile{
	{dsl.BF16, 32, 64, 256, 3, 0, false, false},
	{dsl.BF16, 64, 64, 192, 2, 0, false, false},
	{dsl.E4M3, 32, 128, 512, 3, 0, false, false},
	{dsl.F16, 16, 64, 128, 2, 0, false, false},
	{dsl.BF16, 32, 64, 192, 2, 2, false, false},
	{dsl.BF16, 64, 64, 256, 2, 0, true, false},
	{dsl.F16, 64, 64, 192, 2, 0, true, false},
	{dsl.BF16, 32, 64, 320, 3, 0, false, true},
	{dsl.E4M3, 32, 128, 512, 2, 2, false, true},
	{dsl.E5M2, 64, 128, 256, 2, 0, false, false},
	{dsl.F32, 32, 32, 128, 2, 0, false, true},
}

func (c hopperTile) String() string {
	name := fmt.Sprintf("%s_%dx%dx%d_stages%d", c.ab, c.m(), c.n, c.kTotal, c.stgs)
	if c.bMN {
		name += "_BNmajor"
	}
	if c.lag {
		name += "_inflight"
	}
	return name
}

// TestHopperGemmTile runs the warp-specialized tile (tensor maps as grid-constant
// parameters) on the emulator for bf16 and e4m3 with 2
// and 3 stages (more K tiles than stages, so the ring wraps and the phases flip).
func TestHopperGemmTile(t *testing.T) {
	for _, c := range hopperTiles {
		t.Run(c.String(), c.run)
	}
}

// TestHopperTMAMulticast: in clusters of 2 blocks, block 0 loads a 64x64 bf16 tile once with
// .multicast::cluster into both blocks' shared memory, completing each block's own barrier
// (armed by its own thread 0 with the copy's bytes); each block then reads its tile through
// the swizzled view and writes it out: both equal the global tile.
func TestHopperTMAMulticast(t *testing.T) {
	k := dsl.New("mcast", dsl.WithTarget(ptx.SM90a))
	tm := k.TensorMapPtrParam("tma")
	out := k.PtrParam("out", dsl.BF16)
	la, _ := dsl.GMMALayoutAtom(dsl.BF16, dsl.KMajor, 64)
	l, _ := dsl.TileToShape(la, 64, 64)
	s := k.SharedTile(dsl.BF16, l, 1)
	c := k.MakeTMACopy(tm, s)
	bar := k.Mbarriers(1).At(0)
	tid := k.ThreadIdx(dsl.X)
	rank := k.BlockRankInCluster()
	k.If(tid.Eq(uint32(0)), func() {
		bar.Init(1)
		k.FenceMbarrierInit()
		bar.ArriveExpectTx(c.Bytes)
	})
	k.ClusterSync()
	k.If(tid.Eq(uint32(0)).And(rank.Eq(uint32(0))), func() {
		c.LoadMulticast(bar, 0, 0, 0, k.Const(dsl.U16, 3))
	})
	bar.Wait(0)
	view := s.Tensor(0)
	k.For(0, 64*64/128, 1, func(j dsl.Value) {
		i := j.Mul(uint32(128)).Add(tid)
		mn, kk := i.Shr(uint32(6)), i.And(uint32(63))
		k.Store(out.At(rank.Mul(uint32(4096)).Add(i)), view.Load(mn, kk))
	})
	k.ClusterSync() // block 1's shared memory stays until block 0's copy into it is done
	m, sys := onOneGPU(t, k)
	assemble(t, m)
	vals, raw := elems(dsl.BF16, 64*64, 3)
	g, _ := sys.Malloc(0, len(raw))
	po, _ := sys.Malloc(0, 2*len(raw))
	pm, _ := sys.Malloc(0, 128)
	tmap := emu.TensorMap{Elem: ptx.BF16, Rank: 2, Global: g, Dims: [5]uint64{64, 64}, Strides: [5]uint64{0, 128},
		Box: [5]uint32{uint32(c.Box[0]), uint32(c.Box[1])}, Swizzle: c.SwizzleBytes}
	enc := tmap.Encode()
	for _, err := range []error{emu.WriteSlice(sys, g, raw), emu.WriteSlice(sys, pm, enc[:]),
		sys.Launch(emu.Launch{Module: m, Entry: "mcast", Grid: emu.D1(2), Block: emu.D1(128), Cluster: emu.D1(2), Args: []any{pm, po}})} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(c.Box) != 2 || c.Box[0] != 32 || c.SwizzleBytes != 64 {
		t.Fatalf("box %v swizzle %d; want (32, 64) boxes with the 64-byte swizzle", c.Box, c.SwizzleBytes)
	}
	got, err := emu.ReadSlice[uint16](sys, po, 2*64*64)
	if err != nil {
		t.Fatal(err)
	}
	for b := 0; b < 2; b++ {
		for i := 0; i < 64*64; i++ {
			if f := float64(fp.BF16ToF32(got[b*4096+i])); f != vals[i] {
				t.Fatalf("block %d element (%d, %d) = %g, want %g", b, i/64, i%64, f, vals[i])
			}
		}
	}
}

// TestHopperTMAStore: a 64x64 bf16 tile at (64, 64) of a 128x128 tensor comes in by TMA
// (K-major, 128-byte swizzle), the threads transpose and double it through the swizzled view,
// and one thread stores it by TMA at the same place of another tensor: that tile is the
// doubled transpose, the rest of the tensor untouched.
func TestHopperTMAStore(t *testing.T) {
	k := dsl.New("tmastore", dsl.WithTarget(ptx.SM90a))
	src, dst := k.TensorMapParam("src", dsl.BF16), k.TensorMapParam("dst", dsl.BF16)
	la, _ := dsl.GMMALayoutAtom(dsl.BF16, dsl.KMajor, 128)
	l, _ := dsl.TileToShape(la, 64, 64)
	s := k.SharedTile(dsl.BF16, l, 1)
	in, out := k.MakeTMACopy(src, s), k.MakeTMACopy(dst, s)
	bar := k.Mbarriers(1).At(0)
	tid := k.ThreadIdx(dsl.X)
	k.If(tid.Eq(uint32(0)), func() {
		bar.Init(1)
		bar.ArriveExpectTx(in.Bytes)
	})
	k.SyncThreads()
	k.If(tid.Eq(uint32(0)), func() { in.Load(bar, 0, 64, 64) })
	bar.Wait(0)
	view := s.Tensor(0)
	var mine []dsl.Value
	for j := 0; j < 64*64/128; j++ {
		i := tid.Add(uint32(128 * j))
		mine = append(mine, view.Load(i.Shr(uint32(6)), i.And(uint32(63))))
	}
	k.SyncThreads()
	for j, v := range mine { // transposed and doubled: placement matters
		i := tid.Add(uint32(128 * j))
		view.Store(v.Add(v), i.And(uint32(63)), i.Shr(uint32(6)))
	}
	k.FenceProxyAsync()
	k.SyncThreads()
	k.If(tid.Eq(uint32(0)), func() {
		out.Store(0, 64, 64)
		k.BulkCommit()
		k.BulkWait(0, false)
	})
	m, sys := onOneGPU(t, k)
	assemble(t, m)
	vals, raw := elems(dsl.BF16, 128*128, 4)
	gs, _ := sys.Malloc(0, len(raw))
	gd, _ := sys.Malloc(0, len(raw))
	tm := func(g uint64) emu.TensorMap {
		return emu.TensorMap{Elem: ptx.BF16, Rank: 2, Global: g, Dims: [5]uint64{128, 128}, Strides: [5]uint64{0, 256},
			Box: [5]uint32{uint32(in.Box[0]), uint32(in.Box[1])}, Swizzle: in.SwizzleBytes}
	}
	for _, err := range []error{emu.WriteSlice(sys, gs, raw),
		sys.Launch(emu.Launch{Module: m, Entry: "tmastore", Grid: emu.D1(1), Block: emu.D1(128), Args: []any{tm(gs), tm(gd)}})} {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := emu.ReadSlice[uint16](sys, gd, 128*128)
	if err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 128; r++ {
		for c := 0; c < 128; c++ {
			want := 0.0
			if r >= 64 && c >= 64 {
				want = 2 * vals[c*128+r] // the tile transposed
			}
			if f := float64(fp.BF16ToF32(got[r*128+c])); f != want {
				t.Fatalf("dst[%d][%d] = %g, want %g", r, c, f, want)
			}
		}
	}
}
