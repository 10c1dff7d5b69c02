package dsl_test

import (
	"math"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/layout"
)

// TestMMAOneWarp runs one m16n8k16 MMA written with the DSL on the emulator: A (16x16,
// row-major) and B (stored N x K, K contiguous) through shared memory, ldmatrix into the
// fragments, Gemm, and an epilogue on fragments with a bias broadcast along M (a stride-0
// tensor): D = 2*A*B + bias.
func TestMMAOneWarp(t *testing.T) {
	k := dsl.New("mma1")
	pa, pb := k.PtrParam("a", dsl.BF16), k.PtrParam("b", dsl.BF16)
	pbias, pd := k.PtrParam("bias", dsl.F32), k.PtrParam("d", dsl.F32)
	tid := k.ThreadIdx(dsl.X)
	mma := dsl.MakeTiledMMA(dsl.MMA_16x8x16_F32BF16BF16F32, layout.MustParse("(1,1,1)"), nil)
	gA := k.MakeTensor(pa, layout.MustParse("(16,16):(16,1)"))
	gB := k.MakeTensor(pb, layout.MustParse("(8,16):(16,1)"))
	sA := k.MakeTensor(k.SharedArray(dsl.BF16, 256), layout.MustParse("(16,16):(16,1)"))
	sB := k.MakeTensor(k.SharedArray(dsl.BF16, 128), layout.MustParse("(8,16):(16,1)"))
	thr32 := layout.MustParse("(8,4):(4,1)")
	for _, c := range [][2]dsl.Tensor{{gA, sA}, {gB, sB}} {
		cp := dsl.MakeTiledCopy(dsl.UniversalCopy, thr32, []int{1, 4}).Slice(tid)
		cp.Copy(cp.PartitionS(c[0]), cp.PartitionD(c[1]))
	}
	k.SyncThreads()
	thr := mma.Slice(tid)
	fa, fb := thr.PartitionFragmentA(sA), thr.PartitionFragmentB(sB)
	ldA := dsl.MakeTiledCopyA(dsl.LdMatrixX4, mma).Slice(tid)
	ldB := dsl.MakeTiledCopyB(dsl.LdMatrixX2, mma).Slice(tid)
	ldA.Copy(ldA.PartitionS(sA), fa)
	ldB.Copy(ldB.PartitionS(sB), fb)
	acc := thr.PartitionFragmentC(k.MakeTensor(pd, layout.MustParse("(16,8):(8,1)")))
	k.Gemm(mma, fa, fb, acc)
	gD := k.MakeTensor(pd, layout.MustParse("(16,8):(8,1)"))
	bias := k.LoadFragment(thr.PartitionC(k.MakeTensor(pbias, layout.MustParse("(16,8):(0,1)"))))
	k.Copy(acc.Scale(2.0).Add(bias), thr.PartitionC(gD))
	m, sys := onOneGPU(t, k)

	a, b, bias32 := make([]float32, 256), make([]float32, 128), make([]float32, 8)
	for i := range a {
		a[i] = fp.BF16ToF32(fp.F32ToBF16(float32(i%13) - 6))
	}
	for i := range b {
		b[i] = fp.BF16ToF32(fp.F32ToBF16(float32(i%7)*0.5 - 1.5))
	}
	for i := range bias32 {
		bias32[i] = float32(i) * 0.25
	}
	alloc := func(n int) uint64 {
		p, err := sys.Malloc(0, n)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	da, db, dbias, dd := alloc(512), alloc(256), alloc(32), alloc(512)
	if err := emu.WriteBF16(sys, da, a); err != nil {
		t.Fatal(err)
	}
	if err := emu.WriteBF16(sys, db, b); err != nil {
		t.Fatal(err)
	}
	if err := emu.WriteSlice(sys, dbias, bias32); err != nil {
		t.Fatal(err)
	}
	if err := sys.Launch(emu.Launch{Module: m, Entry: "mma1", Grid: emu.D1(1), Block: emu.D1(32), Args: []any{da, db, dbias, dd}}); err != nil {
		t.Fatal(err)
	}
	got, err := emu.ReadSlice[float32](sys, dd, 128)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 16; i++ {
		for j := 0; j < 8; j++ {
			s := 0.0
			for l := 0; l < 16; l++ {
				s += float64(a[i*16+l]) * float64(b[j*16+l]) // B stored N x K
			}
			want := 2*s + float64(bias32[j])
			if math.Abs(float64(got[i*8+j])-want) > 1e-4*math.Max(1, math.Abs(want)) {
				t.Fatalf("D[%d,%d] = %v, want %v", i, j, got[i*8+j], want)
			}
		}
	}
}
