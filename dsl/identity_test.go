package dsl_test

import (
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// coordKernel writes out[r][c] = 1000*r + c for an m x n row-major matrix with 16x16 tiles
// of 64 threads (4 rows each), predicated with an identity tensor tiled and partitioned like
// the data; out2 gets the same from the data tensor's own coordinates.
func coordKernel(k *dsl.Kernel) {
	out, out2 := k.PtrParam("out", dsl.I32), k.PtrParam("out2", dsl.I32)
	m, n := k.Param("m", dsl.U32), k.Param("n", dsl.U32)
	bx, by, tid := k.BlockIdx(dsl.X), k.BlockIdx(dsl.Y), k.ThreadIdx(dsl.X)
	thr := layout.MustParse("(4,16):(16,1)")
	tile := []int{16, 16}
	gO := k.MakeTensorDyn(out, []any{m, n}, []any{n, 1}).LocalTile(tile, by, bx).LocalPartition(thr, tid)
	gO2 := k.MakeTensorDyn(out2, []any{m, n}, []any{n, 1}).LocalTile(tile, by, bx).LocalPartition(thr, tid)
	cO := k.IdentityTensor(m, n).LocalTile(tile, by, bx).LocalPartition(thr, tid)
	for i := 0; i < cO.Size(); i++ {
		k.If(cO.ElemLess(i, m, n), func() {
			c, d := cO.Coord(i), gO2.Coord(i)
			k.Store(gO.At(i), c[0].Mul(1000).Add(c[1]))
			k.Store(gO2.At(i), d[0].Mul(1000).Add(d[1]))
		})
	}
}

func TestIdentityTensorAssembles(t *testing.T) {
	for _, target := range []ptx.Target{ptx.SM80, ptx.SM90} {
		t.Run(string(target), func(t *testing.T) { build(t, target, coordKernel) })
	}
}

// TestIdentityTensorOnEmulator: every element of a matrix that is not a multiple of the tile
// is written once with its own coordinate, and nothing past it.
func TestIdentityTensorOnEmulator(t *testing.T) {
	const m, n = 37, 45
	k := dsl.New("coords")
	coordKernel(k)
	mod, sys := onOneGPU(t, k)
	po, _ := sys.Malloc(0, 4*(m*n+16))
	po2, _ := sys.Malloc(0, 4*(m*n+16))
	for _, p := range []uint64{po, po2} {
		fill := make([]int32, m*n+16)
		for i := range fill {
			fill[i] = -1
		}
		if err := emu.WriteSlice(sys, p, fill); err != nil {
			t.Fatal(err)
		}
	}
	err := sys.Launch(emu.Launch{Module: mod, Entry: "coords", Grid: emu.Dim3{X: (n + 15) / 16, Y: (m + 15) / 16, Z: 1},
		Block: emu.D1(64), Args: []any{po, po2, uint32(m), uint32(n)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []uint64{po, po2} {
		got, _ := emu.ReadSlice[int32](sys, p, m*n+16)
		for i, g := range got {
			want := int32(1000*(i/n) + i%n)
			if i >= m*n {
				want = -1
			}
			if g != want {
				t.Fatalf("element %d: got %d, want %d", i, g, want)
			}
		}
	}
}

func TestIdentityTensorMisuse(t *testing.T) {
	cases := []misuse{
		{"copy from an identity tensor", "Copy: an identity tensor has no memory", func(k *dsl.Kernel) int {
			c := k.IdentityTensor(8)
			f := k.Fragment(dsl.I32, c)
			return at(func() { k.Copy(c, f) })
		}},
		{"load from an identity tensor", "At: an identity tensor has no memory", func(k *dsl.Kernel) int {
			c := k.IdentityTensor(8, 8)
			return at(func() { c.Load(1, 2) })
		}},
		{"ElemLess with too few extents", "coordinates have 2 modes; got 1 extents", func(k *dsl.Kernel) int {
			c := k.IdentityTensor(8, 8).LocalTile([]int{4, 4}, 1, 0)
			return at(func() { c.ElemLess(0, 8) })
		}},
		{"float extent", "extent 1 is f32, not an integer", func(k *dsl.Kernel) int {
			x := k.Param("x", dsl.F32)
			return at(func() { k.IdentityTensor(8, x) })
		}},
		{"coordinate of a fragment", "a register fragment has no coordinates", func(k *dsl.Kernel) int {
			f := k.Fragment(dsl.F32, k.IdentityTensor(4))
			return at(func() { f.Coord(0) })
		}},
		{"coordinate out of range", "index 16 out of range [0, 16)", func(k *dsl.Kernel) int {
			c := k.IdentityTensor(4, 4)
			return at(func() { c.Coord(16) })
		}},
	}
	checkMisuses(t, "dsl/identity_test.go", cases)
}
