package doccheck

import (
	"context"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ops"
	"github.com/kgen-dev/kgen/ptx"
)

// pipelineKernel is docs/dsl.md's "The pipeline": kernels/gemm.go's main loop for a bf16
// 64x64x32 tile on 4 warps (A M x K and B N x K, K contiguous), accumulating into registers.
func pipelineKernel(k *dsl.Kernel) {
	const BM, BN, BK, stages, nt = 64, 64, 32, 3, 128
	type args struct {
		A, B    dsl.Ptr
		M, N, K dsl.Value `kgen:"u32"`
	}
	a := dsl.Params[args](k, dsl.BF16)
	for _, v := range []dsl.Value{a.M, a.N, a.K} {
		k.Assume(v, 8) // 16-byte runs for cp.async
	}
	tid := k.ThreadIdx(dsl.X)
	bm, bn := k.BlockIdx(dsl.X).To(dsl.I32), k.BlockIdx(dsl.Y).To(dsl.I32)
	gA := k.MakeTensorDyn(a.A, []any{a.M, a.K}, []any{a.K, 1})
	gB := k.MakeTensorDyn(a.B, []any{a.N, a.K}, []any{a.K, 1})
	smem := k.DynamicShared(dsl.BF16, 128)
	tile := func(p dsl.Ptr, rows int) dsl.Tensor {
		return k.MakeSwizzledTensor(p, layout.Swizzle{B: 2, M: 3, S: 3}, layout.Must(layout.New(layout.Ints(rows, BK), layout.Ints(BK, 1))))
	}
	sA, sB := tile(smem, BM), tile(smem.At(stages*BM*BK), BN)
	thrs := layout.Must(layout.New(layout.Ints(nt/(BK/8), BK/8), layout.Ints(BK/8, 1)))
	cpA := dsl.MakeTiledCopy(dsl.CpAsync16, thrs, []int{1, 8}).Slice(tid)
	cpB := dsl.MakeTiledCopy(dsl.CpAsync16, thrs, []int{1, 8}).Slice(tid)
	kTiles := a.K.Add(uint32(BK - 1)).Div(uint32(BK)).To(dsl.I32)
	mma := dsl.MakeTiledMMA(dsl.MMA_16x8x16_F32BF16BF16F32, layout.Must(layout.New(layout.Ints(2, 2, 1), layout.Ints(1, 2, 0))), nil)
	thr := mma.Slice(tid)
	tCrA, tCrB := thr.PartitionFragmentA(sA), thr.PartitionFragmentB(sB)
	tCrC := thr.PartitionFragmentC(gA.LocalTile([]int{BM, BN}, bm, bn))
	ldA := dsl.MakeTiledCopyA(dsl.LdMatrixX4, mma).Slice(tid)
	ldB := dsl.MakeTiledCopyB(dsl.LdMatrixX4, mma).Slice(tid)
	tCsA, tCsB := ldA.PartitionS(sA), ldB.PartitionS(sB)

	stageOf := func(t dsl.Tensor, elems int, st dsl.Value) dsl.Tensor { // stage st of a multistage buffer
		return t.ShiftBase(k.Assume(st.Mul(int32(elems)), elems))
	}
	pipe := k.CpAsyncPipeline(stages, kTiles, func(st, t dsl.Value) {
		cpA.Copy(cpA.PartitionS(gA.LocalTile([]int{BM, BK}, bm, t)), cpA.PartitionD(stageOf(sA, BM*BK, st)))
		cpB.Copy(cpB.PartitionS(gB.LocalTile([]int{BN, BK}, bn, t)), cpB.PartitionD(stageOf(sB, BN*BK, st)))
	})
	pipe.Start() // tiles 0..stages-2, one commit group each
	k.For(int32(0), kTiles, int32(1), func(t dsl.Value) {
		pipe.Wait(t)                         // tile t landed; everyone is done with tile t-1's stage
		pipe.Issue(t.Add(int32(stages - 1))) // so the next load goes there, behind this tile's math
		st := pipe.Stage(t)
		sAt, sBt := stageOf(tCsA, BM*BK, st), stageOf(tCsB, BN*BK, st)
		for kb := 0; kb < BK/16; kb++ { // unrolled
			ldA.Copy(sAt.Slice(2, kb), tCrA.Slice(2, kb))
			ldB.Copy(sBt.Slice(2, kb), tCrB.Slice(2, kb))
			k.Gemm(mma, tCrA.Slice(2, kb), tCrB.Slice(2, kb), tCrC)
		}
	})
	pipe.Drain()
}

// TestPipelineSnippet builds pipelineKernel: the snippet is real API that builds.
func TestPipelineSnippet(t *testing.T) {
	k := dsl.New("pipeline_snippet", dsl.WithTarget(ptx.SM80))
	pipelineKernel(k)
	if _, err := k.Build(); err != nil {
		t.Fatal(err)
	}
}

// SoftCapArgs are the soft cap's own parameters (docs/dsl.md, "GEMM epilogues").
type SoftCapArgs struct {
	Cap dsl.Value `kgen:"f32"`
}

func softCap(k *dsl.Kernel, out dsl.Type) kernels.EpilogueFunc {
	a := dsl.Params[SoftCapArgs](k, out) // after the gemm's parameters
	inv := a.Cap.RcpApprox()
	return func(f *kernels.EpilogueFrag) []dsl.Value {
		v := make([]dsl.Value, len(f.V))
		for i, x := range f.V {
			v[i] = x.Mul(inv).Tanh().Mul(a.Cap) // cap * tanh(v / cap)
		}
		return v
	}
}

// TestEpilogueSnippet builds both gemms with docs/dsl.md's hook.
func TestEpilogueSnippet(t *testing.T) {
	k := dsl.New("gemm_softcap", dsl.WithTarget(ptx.SM90a))
	k2 := dsl.New("gemm_softcap_mma", dsl.WithTarget(ptx.SM80))
	kernels.GemmSM90With(k, kernels.DefaultGemmSM90Config(dsl.BF16), softCap)
	kernels.GemmWith(k2, kernels.DefaultGemmConfig(dsl.BF16), softCap) // the same hook
	for _, k := range []*dsl.Kernel{k, k2} {
		if _, err := k.Build(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpsSoftmaxSnippet runs docs/ops.md's first snippet on the emulator.
func TestOpsSoftmaxSnippet(t *testing.T) {
	t.Setenv("KGEN_BACKEND", "emu")
	ctx := context.Background()
	var stream *jit.Stream
	dev, _ := jit.Open(0) // a GPU if there is one, else the emulator
	buf, _ := jit.Alloc[float32](dev, 64*128)
	x, _ := ops.New(buf, 64, 128)               // 64 x 128, row-major
	left, _ := x.Narrow(1, 0, 100)              // a view: the first 100 columns, rows 128 apart
	err := ops.Softmax(ctx, stream, left, left) // in place, over the view
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	host := make([]float32, 64*128)
	if err := buf.CopyToHost(host); err != nil {
		t.Fatal(err)
	}
	if got := host[0] * 100; got < 0.999 || got > 1.001 { // softmax of zeros: 1/100 each
		t.Errorf("softmax of a zero row: %g per element, want 0.01", host[0])
	}
}

// opsMLPSnippet is docs/ops.md's MLP block (ExampleMatmul_mlp runs it with a check).
func opsMLPSnippet(ctx context.Context, s *jit.Stream, x, w1, h, w2, y ops.Tensor[fp.BF16], b1 ops.Tensor[float32]) {
	ops.Matmul(ctx, s, h, x, w1, &ops.MatmulOptions[fp.BF16]{Alpha: 1, Bias: b1, Act: kernels.SiLU})
	ops.Matmul(ctx, s, y, h, w2, &ops.MatmulOptions[fp.BF16]{Alpha: 1, Residual: x})
}

var _ = opsMLPSnippet
