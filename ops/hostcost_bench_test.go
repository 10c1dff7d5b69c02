package ops

import (
	"context"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// The host cost of an op call against jit's Function.Launch of the same kernel with the
// same arguments, on the emulator with the stream capturing (captured launches are recorded,
// not run, so the loop measures the host side only): go test ./ops -bench HostCost
// -benchmem. gpubench ops measures the same on a GPU.

// captured returns an emulated device and a stream capturing until the benchmark ends.
func captured(b *testing.B) (*jit.Device, *jit.Stream) {
	d, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		b.Fatal(err)
	}
	s, err := d.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if g, err := s.EndCapture(); err == nil {
			g.Close()
		}
		s.Close()
		d.Close()
	})
	return d, s
}

func BenchmarkHostCostSoftmaxOps(b *testing.B) {
	d, s := captured(b)
	buf, _ := jit.Alloc[float32](d, 8*32)
	x, _ := New(buf, 8, 32)
	ctx := context.Background()
	if err := Softmax(ctx, s, x, x); err != nil { // the plan
		b.Fatal(err)
	}
	if err := s.BeginCapture(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := Softmax(ctx, s, x, x); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHostCostSoftmaxLaunch(b *testing.B) {
	d, s := captured(b)
	buf, _ := jit.Alloc[float32](d, 8*32)
	spec, _ := kernels.Find(kernels.ID{Family: kernels.FamilySoftmax, DType: dsl.F32})
	v, err := spec.BuildVariant(kernels.Config{Target: ptx.SM90, DType: dsl.F32})
	if err != nil {
		b.Fatal(err)
	}
	m, err := d.Load(jit.Source{Module: v.Module, Params: map[string][]jit.ParamInfo{v.Entry: jit.ParamInfos(v.Params)}})
	if err != nil {
		b.Fatal(err)
	}
	fn, _ := m.Function(v.Entry)
	sh := kernels.SoftmaxShape(8, 32)
	lc := jit.LaunchConfig{Grid: jit.D1(sh.Grid), Block: jit.D1(sh.Block), Stream: s}
	p := jit.AnyOf[float32](buf)
	if err := s.BeginCapture(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := fn.Launch(lc, p, p, uint32(8), uint32(32)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHostCostMatmulOps(b *testing.B) {
	d, s := captured(b)
	ab, _ := jit.Alloc[fp.BF16](d, 64*64)
	x, _ := New(ab, 64, 64)
	ctx := context.Background()
	if err := Matmul(ctx, s, x, x, x, nil); err != nil {
		b.Fatal(err)
	}
	if err := s.BeginCapture(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := Matmul(ctx, s, x, x, x, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHostCostMatmulLaunch(b *testing.B) {
	d, s := captured(b)
	ab, _ := jit.Alloc[fp.BF16](d, 64*64)
	cfg, err := kernels.GemmSM90For(dsl.BF16, dsl.BF16, 64, 64, 64, d.Info().Multiproc)
	if err != nil {
		b.Fatal(err)
	}
	l, _ := cfg.Launch(64, 64, 64, d.Info().Multiproc)
	k := dsl.New(cfg.Name(), dsl.WithTarget(ptx.SM90a))
	kernels.GemmSM90(k, cfg)
	mod, err := k.Build()
	if err != nil {
		b.Fatal(err)
	}
	m, err := d.Load(jit.Source{Module: mod, Params: map[string][]jit.ParamInfo{cfg.Name(): jit.ParamInfos(k.Params())}})
	if err != nil {
		b.Fatal(err)
	}
	fn, _ := m.Function(cfg.Name())
	tmA, err := jit.NewTensorMap(ab, l.A.Dims[:], l.A.Strides[:], l.A.Box[:], jit.Swizzle(l.A.Swizzle))
	if err != nil {
		b.Fatal(err)
	}
	tmB, _ := jit.NewTensorMap(ab, l.B.Dims[:], l.B.Strides[:], l.B.Box[:], jit.Swizzle(l.B.Swizzle))
	lc := jit.LaunchConfig{Grid: jit.D1(l.Grid), Block: jit.D1(l.Block), SharedMem: l.SharedBytes, Stream: s}
	p := jit.AnyOf[fp.BF16](ab)
	if err := s.BeginCapture(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := fn.Launch(lc, tmA, tmB, uint32(64), uint32(64), uint32(64), float32(1), float32(0), p, p); err != nil {
			b.Fatal(err)
		}
	}
}
