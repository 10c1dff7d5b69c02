package dsl_test

import (
	"fmt"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// TestAccView: on the emulator, every thread of two warpgroups stores (RowFrom(100) +
// RowOff[i], ColFrom(1000) + ColOff[i]) for each register; they are the atom's C layout
// coordinates (GMMAAtom.Coord) shifted by the origin, plus 64 rows for the second warpgroup
// when the view takes the thread index unmasked (whole); Rows groups the registers by row.
func TestAccView(t *testing.T) {
	for _, c := range []struct {
		n     int
		whole bool
	}{{8, false}, {64, false}, {256, false}, {64, true}} {
		n := c.n
		t.Run(fmt.Sprint("N", n, map[bool]string{true: "_whole"}[c.whole]), func(t *testing.T) {
			atom, err := dsl.MakeGMMAAtom(dsl.BF16, n)
			if err != nil {
				t.Fatal(err)
			}
			m := dsl.MakeTiledGMMA(atom, 2)
			k := dsl.New("view", dsl.WithTarget(ptx.SM90a))
			out := k.PtrParam("out", dsl.U32)
			tid := k.ThreadIdx(dsl.X)
			ti := tid.And(uint32(127))
			if c.whole {
				ti = tid
			}
			v := m.AccView(k, ti)
			row, col := v.RowFrom(k.Const(dsl.U32, 100)), v.ColFrom(k.Const(dsl.U32, 1000))
			base := tid.Mul(uint32(2 * atom.AccRegs()))
			for i := 0; i < atom.AccRegs(); i++ {
				k.Store(out.At(base.Add(uint32(2*i))), row.Add(uint32(v.RowOff[i])))
				k.Store(out.At(base.Add(uint32(2*i+1))), col.Add(uint32(v.ColOff[i])))
			}
			mod, sys := onOneGPU(t, k)
			p, err := sys.Malloc(0, 4*256*2*atom.AccRegs())
			if err != nil {
				t.Fatal(err)
			}
			if err := sys.Launch(emu.Launch{Module: mod, Entry: "view", Grid: emu.D1(1), Block: emu.D1(256), Args: []any{p}}); err != nil {
				t.Fatal(err)
			}
			got, err := emu.ReadSlice[uint32](sys, p, 256*2*atom.AccRegs())
			if err != nil {
				t.Fatal(err)
			}
			for th := 0; th < 256; th++ {
				for i := 0; i < atom.AccRegs(); i++ {
					r, col := atom.Coord(th%128, i)
					if c.whole {
						r += 64 * (th / 128)
					}
					g := got[th*2*atom.AccRegs()+2*i:]
					if int(g[0]) != 100+r || int(g[1]) != 1000+col {
						t.Fatalf("thread %d register %d at (%d, %d), want (%d, %d)", th, i, g[0], g[1], 100+r, 1000+col)
					}
				}
			}
			rows := v.Rows()
			if len(rows) != 2 || len(rows[0]) != n/4 {
				t.Fatalf("Rows: %v; want 2 rows of %d registers", rows, n/4)
			}
			for r, regs := range rows {
				for j, i := range regs {
					if v.RowOff[i] != 8*r || (j > 0 && v.ColOff[i] <= v.ColOff[regs[j-1]]) {
						t.Fatalf("Rows()[%d] = %v: register %d at offset (%d, %d)", r, regs, i, v.RowOff[i], v.ColOff[i])
					}
				}
			}
			if v.Reg(8, 1) != 3 || v.Reg(1, 0) != -1 {
				t.Fatalf("Reg(8, 1) = %d, Reg(1, 0) = %d; want 3 and -1", v.Reg(8, 1), v.Reg(1, 0))
			}
		})
	}
}

// TestAccViewMisuse: AccView misuse is reported by Build at the caller's line.
func TestAccViewMisuse(t *testing.T) {
	cases := []misuse{
		{"signed thread index", "AccView: thread index is s32; want U32", func(k *dsl.Kernel) int {
			atom, _ := dsl.MakeGMMAAtom(dsl.BF16, 64)
			tid := k.ThreadIdx(dsl.X).To(dsl.I32)
			return at(func() { dsl.MakeTiledGMMA(atom, 1).AccView(k, tid) })
		}},
		{"zero atom", "AccView: zero GMMA atom", func(k *dsl.Kernel) int {
			tid := k.ThreadIdx(dsl.X)
			return at(func() { dsl.TiledGMMA{}.AccView(k, tid) })
		}},
		{"RowReduce of another fragment", "RowReduce: acc must be a fragment of the view's 32 registers", func(k *dsl.Kernel) int {
			atom, _ := dsl.MakeGMMAAtom(dsl.BF16, 64)
			small, _ := dsl.MakeGMMAAtom(dsl.BF16, 8)
			v := dsl.MakeTiledGMMA(atom, 1).AccView(k, k.ThreadIdx(dsl.X))
			acc := dsl.MakeTiledGMMA(small, 1).Accumulators(k)
			return at(func() { v.RowReduce(acc, dsl.Max) })
		}},
	}
	checkMisuses(t, "dsl/accview_test.go", cases, dsl.WithTarget(ptx.SM90a))
}
