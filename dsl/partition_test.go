package dsl_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// coords lists the coordinates of every element of t (constants for a constant thread).
func coords(t dsl.Tensor) []string {
	var out []string
	for i := 0; i < t.Size(); i++ {
		var c []string
		for _, v := range t.Coord(i) {
			c = append(c, strings.TrimPrefix(v.String(), "s32 constant "))
		}
		out = append(out, "("+strings.Join(c, ",")+")")
	}
	return out
}

// TestPartitionByTVMatchesLocalPartition: for each thread, partitioning by the layout
// MakeLayoutTV(thr, val) gives the elements LocalPartition(thr, tid, val extents...) gives,
// in the same order within one tile.
func TestPartitionByTVMatchesLocalPartition(t *testing.T) {
	cases := []struct {
		thr, val, tensor string
		vals             []int
		oneTile          bool
	}{
		{"256:1", "4:1", "1024:1", []int{4}, true},
		{"256:1", "4:1", "4096:1", []int{4}, false},
		{"(8,32):(32,1)", "(1,4):(1,1)", "(8,128):(128,1)", []int{1, 4}, true},
		{"(8,32):(32,1)", "(1,4):(1,1)", "(16,256):(256,1)", []int{1, 4}, false},
		{"(2,4):(4,1)", "(2,2):(1,2)", "(4,8):(8,1)", []int{2, 2}, true},
		{"(32,8):(1,32)", "(4,1):(1,1)", "(128,8):(1,128)", []int{4, 1}, true},
		{"(4,8):(1,4)", "(2,4):(1,2)", "(16,64):(64,1)", []int{2, 4}, false},
	}
	for _, c := range cases {
		t.Run(c.thr+"/"+c.val+"/"+c.tensor, func(t *testing.T) {
			thr, val := layout.MustParse(c.thr), layout.MustParse(c.val)
			tiler, tv, err := layout.MakeLayoutTV(thr, val)
			if err != nil {
				t.Fatal(err)
			}
			k := dsl.New("k")
			g := k.MakeTensor(k.PtrParam("p", dsl.F32), layout.MustParse(c.tensor))
			for tid := 0; tid < thr.Size(); tid++ {
				id := k.Const(dsl.U32, tid)
				a, b := coords(g.LocalPartition(thr, id, c.vals...)), coords(g.PartitionByTV(tiler, tv, id))
				if !c.oneTile {
					slices.Sort(a)
					slices.Sort(b)
				}
				if !slices.Equal(a, b) {
					t.Fatalf("thread %d: LocalPartition %v\nPartitionByTV %v", tid, a, b)
				}
			}
			if err := k.Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// tvCopy copies n floats with 256 threads x 4 values per tile of 1024, partitioned by a
// thread-value layout.
func tvCopy(k *dsl.Kernel) {
	src, dst := k.PtrParam("src", dsl.F32), k.PtrParam("dst", dsl.F32)
	n := k.Param("n", dsl.U32)
	tiler, tv, _ := layout.MakeLayoutTV(layout.MustParse("256:1"), layout.MustParse("4:1"))
	bid, tid := k.BlockIdx(dsl.X), k.ThreadIdx(dsl.X)
	tS := k.MakeTensorDyn(src, []any{n}, []any{1}).LocalTile([]int{2048}, bid).PartitionByTV(tiler, tv, tid)
	tD := k.MakeTensorDyn(dst, []any{n}, []any{1}).LocalTile([]int{2048}, bid).PartitionByTV(tiler, tv, tid)
	frag := k.Fragment(dsl.F32, tS)
	k.Copy(tS, frag)
	k.Copy(frag, tD)
}

func TestPartitionByTVCopy(t *testing.T) {
	for _, target := range []ptx.Target{ptx.SM80, ptx.SM90} {
		t.Run(string(target), func(t *testing.T) {
			s := build(t, target, tvCopy)
			if !strings.Contains(s, "ld.global.v4.f32") || !strings.Contains(s, "st.global.v4.f32") {
				t.Errorf("no 128-bit accesses:\n%s", s)
			}
		})
	}
	k := dsl.New("tv_copy")
	tvCopy(k)
	m, sys := onOneGPU(t, k)
	const n = 2*2048 + 101
	in := make([]float32, n)
	for i := range in {
		in[i] = float32(i) + 0.5
	}
	ps, _ := sys.Malloc(0, 4*n)
	pd, _ := sys.Malloc(0, 4*(n+8))
	if err := emu.WriteSlice(sys, ps, in); err != nil {
		t.Fatal(err)
	}
	if err := sys.Launch(emu.Launch{Module: m, Entry: "tv_copy", Grid: emu.D1(3), Block: emu.D1(256), Args: []any{ps, pd, uint32(n)}}); err != nil {
		t.Fatal(err)
	}
	got, _ := emu.ReadSlice[float32](sys, pd, n+8)
	for i, g := range got {
		want := float32(0)
		if i < n {
			want = in[i]
		}
		if g != want {
			t.Fatalf("element %d: got %v, want %v", i, g, want)
		}
	}
}

func TestPartitionByTVMisuse(t *testing.T) {
	tiler, tv, _ := layout.MakeLayoutTV(layout.MustParse("(8,32):(32,1)"), layout.MustParse("(1,4):(1,1)"))
	cases := []misuse{
		{"tiler of another rank", "tensor has rank 1; tiler (8,128) must give one extent per mode", func(k *dsl.Kernel) int {
			g := k.MakeTensor(k.PtrParam("p", dsl.F32), layout.MustParse("1024:1"))
			return at(func() { g.PartitionByTV(tiler, tv, k.ThreadIdx(dsl.X)) })
		}},
		{"tv of rank 1", "must have two modes, (thread, value)", func(k *dsl.Kernel) int {
			g := k.MakeTensor(k.PtrParam("p", dsl.F32), layout.MustParse("(8,128):(128,1)"))
			return at(func() { g.PartitionByTV(tiler, layout.MustParse("256:4"), k.ThreadIdx(dsl.X)) })
		}},
		{"mode not a multiple of the tiler", "mode 1 of extent 100 is not a multiple of the tiler's 128", func(k *dsl.Kernel) int {
			g := k.MakeTensor(k.PtrParam("p", dsl.F32), layout.MustParse("(8,100):(100,1)"))
			return at(func() { g.PartitionByTV(tiler, tv, k.ThreadIdx(dsl.X)) })
		}},
		{"tv past the tile", "reaches index 1023; the tile (8,64) has 512 elements", func(k *dsl.Kernel) int {
			g := k.MakeTensor(k.PtrParam("p", dsl.F32), layout.MustParse("(8,128):(128,1)"))
			return at(func() { g.PartitionByTV(layout.Ints(8, 64), tv, k.ThreadIdx(dsl.X)) })
		}},
		{"float thread index", "thread index is f32", func(k *dsl.Kernel) int {
			g := k.MakeTensor(k.PtrParam("p", dsl.F32), layout.MustParse("(8,128):(128,1)"))
			x := k.Param("x", dsl.F32)
			return at(func() { g.PartitionByTV(tiler, tv, x) })
		}},
	}
	checkMisuses(t, "dsl/partition_test.go", cases)
}
