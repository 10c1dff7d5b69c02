package dsl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// hopperParts builds the operands of a bf16 64x64x64 tile: K-major 128-byte swizzled
// SharedTiles, their TMA copies and a 2-stage pipeline.
func hopperParts(k *dsl.Kernel) (dsl.TiledGMMA, dsl.SharedTile, dsl.SharedTile, *dsl.TMACopy, *dsl.TMACopy, *dsl.TMAPipeline) {
	atom, _ := dsl.MakeGMMAAtom(dsl.BF16, 64)
	la, _ := dsl.GMMALayoutAtom(dsl.BF16, dsl.KMajor, 128)
	l, _ := dsl.TileToShape(la, 64, 64)
	sA, sB := k.SharedTile(dsl.BF16, l, 2), k.SharedTile(dsl.BF16, l, 2)
	cA, cB := k.MakeTMACopy(k.TensorMapPtrParam("tma"), sA), k.MakeTMACopy(k.TensorMapPtrParam("tmb"), sB)
	return dsl.MakeTiledGMMA(atom, 1), sA, sB, cA, cB, k.MakeTMAPipeline(2, 128, cA, cB)
}

// TestHopperMisuse: Hopper misuse is reported by Build at the caller's line.
func TestHopperMisuse(t *testing.T) {
	cases := []misuse{
		{"descriptor for a row-major tile", "no wgmma descriptor reads layout", func(k *dsl.Kernel) int {
			m, _, sB, _, _, _ := hopperParts(k)
			rowMajor := k.SharedTile(dsl.BF16, layout.ComposedLayout{Inner: layout.MustParse("(64,64):(64,1)")}, 1)
			acc := m.Accumulators(k)
			return at(func() { m.Gemm(k, 0, rowMajor, sB, 0, acc) })
		}},
		{"dynamic shared tile off the swizzle's repeat", "offset 100 is not a non-negative multiple of 1024", func(k *dsl.Kernel) int {
			la, _ := dsl.GMMALayoutAtom(dsl.BF16, dsl.KMajor, 128)
			l, _ := dsl.TileToShape(la, 64, 64)
			return at(func() { k.DynamicSharedTile(dsl.BF16, l, 2, 100) })
		}},
		{"wrong expect_tx", "the stage's loads bring 8192 bytes; its full barrier expects 16384", func(k *dsl.Kernel) int {
			_, _, _, cA, _, p := hopperParts(k)
			st := p.ProducerState()
			p.ProducerAcquire(st)
			p.Load(st, cA, 0, 0) // B's load is missing
			return at(func() { p.ProducerCommit(st) })
		}},
		{"TMA box at a misaligned inner coordinate", "the inner coordinate 4 is 8 bytes, not a multiple of 16", func(k *dsl.Kernel) int {
			_, _, _, cA, _, p := hopperParts(k)
			st := p.ProducerState()
			p.ProducerAcquire(st)
			return at(func() { p.Load(st, cA, 0, 4) }) // K-major: K is the inner coordinate
		}},
		{"wait_group out of range", "wgmma.wait_group takes 0 to 7", func(k *dsl.Kernel) int {
			return at(func() { k.WaitGroup(8) })
		}},
		{"setmaxnreg not a multiple of 8", "24 to 256 in steps of 8", func(k *dsl.Kernel) int {
			return at(func() { k.WarpgroupRegAlloc(250) })
		}},
		{"accumulators of another atom", "the 32 f32 registers", func(k *dsl.Kernel) int {
			m, sA, sB, _, _, _ := hopperParts(k)
			small, _ := dsl.MakeGMMAAtom(dsl.BF16, 8)
			acc := dsl.MakeTiledGMMA(small, 1).Accumulators(k)
			return at(func() { m.Gemm(k, 0, sA, sB, 0, acc) })
		}},
		{"TMA box for a padded layout", "no TMA boxes write layout", func(k *dsl.Kernel) int {
			s := k.SharedTile(dsl.BF16, layout.ComposedLayout{Inner: layout.MustParse("(64,64):(72,1)")}, 1)
			tm := k.TensorMapPtrParam("tm")
			return at(func() { k.MakeTMACopy(tm, s) })
		}},
		{"mbarrier count", "arrival count 0", func(k *dsl.Kernel) int {
			b := k.Mbarriers(1).At(0)
			return at(func() { b.Init(0) })
		}},
		{"tensor map of another type", "the tensor map is over f16, the tile holds bf16", func(k *dsl.Kernel) int {
			la, _ := dsl.GMMALayoutAtom(dsl.BF16, dsl.KMajor, 128)
			l, _ := dsl.TileToShape(la, 64, 64)
			s := k.SharedTile(dsl.BF16, l, 1)
			tm := k.TensorMapParam("tm", dsl.F16)
			return at(func() { k.MakeTMACopy(tm, s) })
		}},
		{"stage out of range", "is not a stage 0..1", func(k *dsl.Kernel) int {
			_, sA, _, _, _, _ := hopperParts(k)
			return at(func() { sA.Stage(2) })
		}},
	}
	checkMisuses(t, "dsl/hopper_misuse_test.go", cases, dsl.WithTarget(ptx.SM90a))
	sm90 := []misuse{
		{"wgmma on sm_90 without a", "wgmma needs sm_90a", func(k *dsl.Kernel) int {
			m, sA, sB, _, _, _ := hopperParts(k)
			return at(func() { m.Gemm(k, 0, sA, sB, 0, m.Accumulators(k)) })
		}},
		{"multicast on sm_90", ".multicast::cluster needs sm_90a", func(k *dsl.Kernel) int {
			_, _, _, cA, _, p := hopperParts(k)
			st := p.ProducerState()
			p.ProducerAcquire(st)
			mask := k.Const(dsl.U16, 3)
			return at(func() { p.LoadMulticast(st, cA, 0, 0, mask) })
		}},
	}
	checkMisuses(t, "dsl/hopper_misuse_test.go", sm90, dsl.WithTarget(ptx.SM90))
}

// TestHopperWrongExpectTxDeadlock: a barrier armed for more bytes than the TMA load brings
// never completes; the emulator reports the deadlock naming the barrier's phase, the
// missing bytes and the Go line of the wait.
func TestHopperWrongExpectTxDeadlock(t *testing.T) {
	k := dsl.New("wrongtx", dsl.WithTarget(ptx.SM90a))
	tm := k.TensorMapPtrParam("tma")
	la, _ := dsl.GMMALayoutAtom(dsl.BF16, dsl.KMajor, 128)
	l, _ := dsl.TileToShape(la, 64, 64)
	s := k.SharedTile(dsl.BF16, l, 1)
	c := k.MakeTMACopy(tm, s)
	bar := k.Mbarriers(1).At(0)
	tid := k.ThreadIdx(dsl.X)
	k.If(tid.Eq(uint32(0)), func() { bar.Init(1) })
	k.SyncThreads()
	k.If(tid.Eq(uint32(0)), func() {
		bar.ArriveExpectTx(c.Bytes + 16)
		c.Load(bar, 0, 0, 0)
	})
	waitLine := at(func() { bar.Wait(0) })
	m, sys := onOneGPU(t, k)
	g, err := sys.Malloc(0, 64*64*2)
	if err != nil {
		t.Fatal(err)
	}
	tmap := emu.TensorMap{Elem: ptx.BF16, Rank: 2, Global: g, Dims: [5]uint64{64, 64}, Strides: [5]uint64{0, 128},
		Box: [5]uint32{uint32(c.Box[0]), uint32(c.Box[1])}, Swizzle: c.SwizzleBytes}
	enc := tmap.Encode()
	pm, err := sys.Malloc(0, len(enc))
	if err != nil {
		t.Fatal(err)
	}
	if err := emu.WriteSlice(sys, pm, enc[:]); err != nil {
		t.Fatal(err)
	}
	err = sys.Launch(emu.Launch{Module: m, Entry: "wrongtx", Grid: emu.D1(1), Block: emu.D1(32), Args: []any{pm}})
	var e *emu.Error
	if !errors.As(err, &e) || e.Kind != emu.KindDeadlock {
		t.Fatalf("got %v, want a deadlock", err)
	}
	for _, w := range []string{"never completes its phase (parity 0)", "16 transaction bytes expected and not arrived"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("report %q lacks %q", err, w)
		}
	}
	if !strings.HasSuffix(e.Pos.File, "dsl/hopper_misuse_test.go") || e.Pos.Line != waitLine {
		t.Errorf("the report names %s:%d, not the wait at line %d", e.Pos.File, e.Pos.Line, waitLine)
	}
}
