package dsl_test

import (
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
)

// TestTileScheduler: 7 persistent blocks over 5 x 6 tiles in groups of 2 tile rows: every
// tile is visited once, by block t % 7 for linear tile t, at the grouped coordinates.
func TestTileScheduler(t *testing.T) {
	const tm, tn, group, blocks = 5, 6, 2, 7
	k := dsl.New("sched")
	out := k.PtrParam("out", dsl.U32)
	s := k.MakeTileScheduler(k.Param("tm", dsl.U32), tn, group)
	k.If(k.ThreadIdx(dsl.X).Eq(uint32(0)), func() {
		s.ForEach(func(m, n dsl.Value) {
			k.Atomic(dsl.AtomAdd, out.At(m.Mul(uint32(tn)).Add(n)), k.BlockIdx(dsl.X).Add(uint32(1000)))
		})
	})
	m, sys := onOneGPU(t, k)
	po, err := sys.Malloc(0, 4*tm*tn)
	if err != nil {
		t.Fatal(err)
	}
	if err := sys.Launch(emu.Launch{Module: m, Entry: "sched", Grid: emu.D1(blocks), Block: emu.D1(32), Args: []any{po, uint32(tm)}}); err != nil {
		t.Fatal(err)
	}
	got, err := emu.ReadSlice[uint32](sys, po, tm*tn)
	if err != nil {
		t.Fatal(err)
	}
	for lin := 0; lin < tm*tn; lin++ {
		g := lin / (group * tn)
		size := min(tm-g*group, group)
		r := lin % (group * tn)
		mm, nn := g*group+r%size, r/size
		if want := uint32(1000 + lin%blocks); got[mm*tn+nn] != want {
			t.Errorf("tile (%d, %d) (linear %d): %d, want block %d", mm, nn, lin, got[mm*tn+nn], want-1000)
		}
	}
}
