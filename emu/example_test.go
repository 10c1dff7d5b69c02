package emu_test

import (
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
)

// A kernel built with the DSL, run on a simulated GPU.
func ExampleSystem_Launch() {
	k := dsl.New("scale")
	x := k.PtrParam("x", dsl.F32)
	n := k.Param("n", dsl.U32)
	i := k.GlobalThreadIdx(dsl.X)
	k.If(i.Lt(n), func() { k.Store(x.At(i), k.Load(x.At(i)).Mul(float32(2))) })
	m, err := k.Build()
	if err != nil {
		panic(err)
	}

	sys, _ := emu.New(1)
	buf, _ := sys.Malloc(0, 4*5)
	_ = emu.WriteSlice(sys, buf, []float32{1, 2, 3, 4, 5})
	err = sys.Launch(emu.Launch{Module: m, Entry: "scale", Grid: emu.D1(1), Block: emu.D1(32),
		Args: []any{buf, uint32(5)}})
	out, _ := emu.ReadSlice[float32](sys, buf, 5)
	fmt.Println(out, err)
	// Output: [2 4 6 8 10] <nil>
}

// A fault names the kernel, the thread, the instruction and the Go line that built it.
func ExampleError() {
	k := dsl.New("oops")
	x := k.PtrParam("x", dsl.F32)
	k.Store(x.At(k.ThreadIdx(dsl.X)), float32(1)) // no bounds check
	m, _ := k.Build()

	sys, _ := emu.New(1)
	buf, _ := sys.Malloc(0, 4*8)
	err := sys.Launch(emu.Launch{Module: m, Entry: "oops", Grid: emu.D1(1), Block: emu.D1(16), Args: []any{buf}})
	e := err.(*emu.Error)
	fmt.Println(e.Kind, e.Kernel, e.Thread, e.Pos.Line > 0)
	// Output: out-of-bounds access oops [8 0 0] true
}
