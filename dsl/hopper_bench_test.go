package dsl_test

import (
	"testing"

	"github.com/kgen-dev/kgen/dsl"
)

// BenchmarkHopperTileBuild builds and prints the warp-specialized tile of two consumer
// warpgroups (bf16 128x32, 64-column K tiles, 2 stages, one wgmma group in flight): the
// descriptors and TMA boxes are checked element by element at build time.
func BenchmarkHopperTileBuild(b *testing.B) {
	c := hopperTile{dsl.BF16, 32, 64, 256, 2, 2, false, true}
	for i := 0; i < b.N; i++ {
		k, _, _, _ := c.build(b)
		m, err := k.Build()
		if err != nil {
			b.Fatal(err)
		}
		if len(m.String()) == 0 {
			b.Fatal("empty PTX")
		}
	}
}

// BenchmarkMakeGMMAOperand finds the descriptors of a 128x64 A and a 256x64 B (bf16, K-major
// 128-byte swizzle); after the first call they come from the cache.
func BenchmarkMakeGMMAOperand(b *testing.B) {
	atom, _ := dsl.MakeGMMAAtom(dsl.BF16, 256)
	la, _ := dsl.GMMALayoutAtom(dsl.BF16, dsl.KMajor, 128)
	lA, _ := dsl.TileToShape(la, 128, 64)
	lB, _ := dsl.TileToShape(la, 256, 64)
	for i := 0; i < b.N; i++ {
		if _, err := dsl.MakeGMMAOperand(atom, dsl.OperandA, lA); err != nil {
			b.Fatal(err)
		}
		if _, err := dsl.MakeGMMAOperand(atom, dsl.OperandB, lB); err != nil {
			b.Fatal(err)
		}
	}
}
