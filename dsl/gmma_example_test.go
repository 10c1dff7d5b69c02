package dsl_test

import (
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
)

// The descriptor of a 64x64 bf16 A tile built from CuTe's K-major 128-byte swizzle atom:
// 8-row groups 1024 bytes apart (SBO), LBO unused (16), each K block of 16 elements 32 bytes
// further along the swizzled rows.
func ExampleMakeGMMAOperand() {
	atom, _ := dsl.MakeGMMAAtom(dsl.BF16, 64)
	sw128, _ := dsl.GMMALayoutAtom(dsl.BF16, dsl.KMajor, 128)
	tile, _ := dsl.TileToShape(sw128, 64, 64)
	op, err := dsl.MakeGMMAOperand(atom, dsl.OperandA, tile)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(atom, tile)
	fmt.Printf("%s-major, %d-byte swizzle, LBO %d, SBO %d, K blocks at %v\n", op.Desc.Major, op.Desc.Swizzle, op.Desc.LBO, op.Desc.SBO, op.KBlocks)
	fmt.Printf("descriptor at 0x400: %#x\n", op.Desc.Bits(0x400))
	// Output:
	// SM90_64x64x16_F32BF16BF16_SS Sw<3,3,3> o 0 o ((8,8),(64,1)):((64,512),(1,4096))
	// K-major, 128-byte swizzle, LBO 16, SBO 1024, K blocks at [0 32 64 96]
	// descriptor at 0x400: 0x4000004000010040
}
