package jit_test

import (
	"fmt"

	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
)

// NewTensorMap describes a 256 x 64 bf16 matrix (rows of 128 bytes) for TMA copies of 64 x
// 64 tiles into shared memory with the 128-byte swizzle; a kernel takes the map as a
// dsl.TensorMap parameter and the launch as a jit.TensorMap field. A box whose rows are wider
// than the swizzle's span is refused on either backend, naming the field.
func ExampleNewTensorMap() {
	d, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	a, err := jit.Alloc[fp.BF16](d, 256*64)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Free()
	tm, err := jit.NewTensorMap(a, []uint64{64, 256}, []uint64{128}, []uint32{64, 64}, jit.Swizzle128B)
	fmt.Println(tm.Elem(), err)
	_, err = jit.NewTensorMap(a, []uint64{64, 256}, []uint64{128}, []uint32{64, 64}, jit.Swizzle64B)
	fmt.Println(err)
	// Output:
	// bf16 <nil>
	// jit: NewTensorMap over emu device 0 (kgen emulator (GPU 0 of 1)): the box's inner dimension (box[0] = 64) is 128 bytes, more than the 64-byte swizzle span
}
