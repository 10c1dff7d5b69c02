package dsl_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// TestTMALoadOuter loads, through a TMAPipeline, a 64 x 64 K-major tile at row 3 of batch 1
// of a rank-3 map (64 columns, 5 rows, 2 batches; boxes of extent 1 along the batch): rows
// 0..1 of the tile are the batch's rows 3..4, the rest TMA's zeros (not batch 2's rows,
// which a rank-2 map over the same memory would read). It also assembles for sm_90a.
func TestTMALoadOuter(t *testing.T) {
	k := dsl.New("outer", dsl.WithTarget(ptx.SM90a))
	src := k.TensorMapParam("src", dsl.BF16)
	out := k.PtrParam("out", dsl.F32)
	la, _ := dsl.GMMALayoutAtom(dsl.BF16, dsl.KMajor, 128)
	l, _ := dsl.TileToShape(la, 64, 64)
	s := k.SharedTile(dsl.BF16, l, 1)
	c := k.MakeTMACopy(src, s)
	pipe := k.MakeTMAPipeline(1, 1, c)
	tid := k.ThreadIdx(dsl.X)
	st := pipe.ConsumerState()
	k.If(tid.Eq(uint32(0)), func() {
		ps := pipe.ProducerState()
		pipe.ProducerAcquire(ps)
		pipe.LoadOuter(ps, c, 3, 0, k.Const(dsl.U32, 1))
		pipe.ProducerCommit(ps)
	})
	pipe.ConsumerWait(st)
	view := s.Tensor(0)
	for j := 0; j < 64*64/128; j++ {
		i := tid.Add(uint32(128 * j))
		k.Store(out.At(i), view.Load(i.Shr(uint32(6)), i.And(uint32(63))).To(dsl.F32))
	}
	m, sys := onOneGPU(t, k)
	if !strings.Contains(m.String(), "cp.async.bulk.tensor.3d") {
		t.Fatal("no 3-d TMA load in the PTX")
	}
	assemble(t, m)
	vals, raw := elems(dsl.BF16, 2*5*64, 6)
	g, _ := sys.Malloc(0, len(raw))
	gout, _ := sys.Malloc(0, 4*64*64)
	tm := emu.TensorMap{Elem: ptx.BF16, Rank: 3, Global: g, Dims: [5]uint64{64, 5, 2}, Strides: [5]uint64{0, 128, 5 * 128},
		Box: [5]uint32{uint32(c.Box[0]), uint32(c.Box[1]), 1}, Swizzle: c.SwizzleBytes}
	for _, err := range []error{emu.WriteSlice(sys, g, raw),
		sys.Launch(emu.Launch{Module: m, Entry: "outer", Grid: emu.D1(1), Block: emu.D1(128), Args: []any{tm, gout}})} {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := emu.ReadSlice[float32](sys, gout, 64*64)
	if err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 64; r++ {
		for col := 0; col < 64; col++ {
			want := 0.0
			if r < 2 {
				want = vals[(5+3+r)*64+col]
			}
			if f := float64(got[r*64+col]); f != want {
				t.Fatalf("tile[%d][%d] = %g, want %g", r, col, f, want)
			}
		}
	}
}

// TestTMALoadOuterMisuse: more than three outer coordinates, or one of a float type, are
// build errors naming the rule.
func TestTMALoadOuterMisuse(t *testing.T) {
	for _, c := range []struct {
		outer []any
		want  string
	}{
		{[]any{1, 2, 3, 4}, "at most 5 dimensions"},
		{[]any{float32(1)}, "outer coordinate 0 is f32"},
	} {
		k := dsl.New("outer", dsl.WithTarget(ptx.SM90a))
		src := k.TensorMapParam("src", dsl.BF16)
		la, _ := dsl.GMMALayoutAtom(dsl.BF16, dsl.KMajor, 128)
		l, _ := dsl.TileToShape(la, 64, 64)
		s := k.SharedTile(dsl.BF16, l, 1)
		cp := k.MakeTMACopy(src, s)
		bar := k.Mbarriers(1).At(0)
		outer := c.outer
		for i, x := range outer {
			if f, ok := x.(float32); ok {
				outer[i] = k.Const(dsl.F32, f)
			}
		}
		cp.LoadOuter(bar, 0, 0, 0, outer...)
		if _, err := k.Build(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("outer %v: %v, want an error naming %q", c.outer, err, c.want)
		}
	}
}
