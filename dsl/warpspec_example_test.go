package dsl_test

import (
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// The accumulators of an m64n16k16 wgmma: each thread holds two rows, 8 apart, and in each
// pairs of adjacent columns every 8; AccToA packs consecutive pairs as the next GEMM's A.
func ExampleTiledGMMA_AccView() {
	k := dsl.New("k", dsl.WithTarget(ptx.SM90a))
	atom, _ := dsl.MakeGMMAAtom(dsl.BF16, 16)
	m := dsl.MakeTiledGMMA(atom, 1)
	v := m.AccView(k, k.ThreadIdx(dsl.X).And(uint32(127)))
	for i := range v.RowOff {
		fmt.Printf("register %d: row +%d, column +%d\n", i, v.RowOff[i], v.ColOff[i])
	}
	fmt.Println("rows:", v.Rows())
	a := m.AccToA(k, m.Accumulators(k), dsl.BF16)
	fmt.Println("A fragment:", a.Shape(), a.Elem())
	// Output:
	// register 0: row +0, column +0
	// register 1: row +0, column +1
	// register 2: row +8, column +0
	// register 3: row +8, column +1
	// register 4: row +0, column +8
	// register 5: row +0, column +9
	// register 6: row +8, column +8
	// register 7: row +8, column +9
	// rows: [[0 1 4 5] [2 3 6 7]]
	// A fragment: [4 1] bf16x2
}

// Barriers named by role get ids 1, 2, ... at their first use; a name used again is the
// same barrier.
func ExampleKernel_NamedBarrierFor() {
	k := dsl.New("k", dsl.WithTarget(ptx.SM90a))
	epi := k.NamedBarrierFor("epilogue", 256)
	prod := k.NamedBarrierFor("producer", 128)
	again := k.NamedBarrierFor("epilogue", 256)
	fmt.Println(epi.ID, prod.ID, again.ID)
	// Output: 1 2 1
}
