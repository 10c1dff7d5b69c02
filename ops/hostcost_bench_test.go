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

// loop runs call b.N times on s capturing, the timer stopped to begin a new capture every
// 1024 calls (a capture that keeps growing would time its own growth).
func loop(b *testing.B, s *jit.Stream, call func() error) {
	b.Helper()
	if err := s.BeginCapture(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%1024 == 1023 {
			b.StopTimer()
			g, err := s.EndCapture()
			if err != nil {
				b.Fatal(err)
			}
			g.Close()
			if err := s.BeginCapture(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHostCostSoftmaxOps(b *testing.B) {
	d, s := captured(b)
	buf, _ := jit.Alloc[float32](d, 8*32)
	x, _ := New(buf, 8, 32)
	ctx := context.Background()
	if err := Softmax(ctx, s, x, x); err != nil { // the plan
		b.Fatal(err)
	}
	loop(b, s, func() error { return Softmax(ctx, s, x, x) })
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
	loop(b, s, func() error { return fn.Launch(lc, p, p, uint32(8), uint32(32)) })
}

func BenchmarkHostCostMatmulOps(b *testing.B) {
	d, s := captured(b)
	ab, _ := jit.Alloc[fp.BF16](d, 64*64)
	db, _ := jit.Alloc[fp.BF16](d, 64*64)
	x, _ := New(ab, 64, 64)
	y, _ := New(db, 64, 64) // D apart from A and B
	ctx := context.Background()
	if err := Matmul(ctx, s, y, x, x, nil); err != nil {
		b.Fatal(err)
	}
	loop(b, s, func() error { return Matmul(ctx, s, y, x, x, nil) })
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
	loop(b, s, func() error {
		return fn.Launch(lc, tmA, tmB, uint32(64), uint32(64), uint32(64), float32(1), float32(0), p, p)
	})
}

// The view cases: an 8 x 24 view (columns 0 to 23) of an 8 x 32 matrix, which runs
// softmax_strided.

func BenchmarkHostCostSoftmaxViewOps(b *testing.B) {
	d, s := captured(b)
	buf, _ := jit.Alloc[float32](d, 8*32)
	x, _ := Strided(buf, 0, []int{8, 24}, []int{32, 1})
	ctx := context.Background()
	if err := Softmax(ctx, s, x, x); err != nil {
		b.Fatal(err)
	}
	loop(b, s, func() error { return Softmax(ctx, s, x, x) })
}

func BenchmarkHostCostSoftmaxViewLaunch(b *testing.B) {
	d, s := captured(b)
	buf, _ := jit.Alloc[float32](d, 8*32)
	k := dsl.New("softmax_strided_f32", dsl.WithTarget(ptx.SM90))
	kernels.SoftmaxStrided(k, dsl.F32)
	k.LaunchBounds(1024, 0)
	mod, err := k.Build()
	if err != nil {
		b.Fatal(err)
	}
	m, err := d.Load(jit.Source{Module: mod, Params: map[string][]jit.ParamInfo{"softmax_strided_f32": jit.ParamInfos(k.Params())}})
	if err != nil {
		b.Fatal(err)
	}
	fn, _ := m.Function("softmax_strided_f32")
	sh := kernels.SoftmaxShape(8, 24)
	lc := jit.LaunchConfig{Grid: jit.D1(sh.Grid), Block: jit.D1(sh.Block), Stream: s}
	args := []any{jit.AnyOf[float32](buf), jit.AnyOf[float32](buf), uint32(8), uint32(24), uint32(32), uint32(32)}
	loop(b, s, func() error { return fn.Launch(lc, args...) })
}

func BenchmarkHostCostAddOps(b *testing.B) {
	d, s := captured(b)
	buf, _ := jit.Alloc[float32](d, 1024)
	x, _ := New(buf, 1024)
	ctx := context.Background()
	if err := Add(ctx, s, x, x, x); err != nil {
		b.Fatal(err)
	}
	loop(b, s, func() error { return Add(ctx, s, x, x, x) })
}

func BenchmarkHostCostAddLaunch(b *testing.B) {
	d, s := captured(b)
	buf, _ := jit.Alloc[float32](d, 1024)
	spec, _ := kernels.Find(kernels.ID{Family: kernels.FamilyVectorAdd, DType: dsl.F32})
	v, err := spec.BuildVariant(kernels.Config{Target: ptx.SM90, DType: dsl.F32})
	if err != nil {
		b.Fatal(err)
	}
	m, err := d.Load(jit.Source{Module: v.Module, Params: map[string][]jit.ParamInfo{v.Entry: jit.ParamInfos(v.Params)}})
	if err != nil {
		b.Fatal(err)
	}
	fn, _ := m.Function(v.Entry)
	sh := kernels.StreamShape(1024, dsl.F32)
	lc := jit.LaunchConfig{Grid: jit.D1(sh.Grid), Block: jit.D1(sh.Block), Stream: s}
	p := jit.AnyOf[float32](buf)
	args := []any{p, p, p, uint32(1024)}
	loop(b, s, func() error { return fn.Launch(lc, args...) })
}

// The epilogue cases: a 64 x 64 x 64 bf16 Matmul with a Bias and ReLU.

func BenchmarkHostCostMatmulEpilogueOps(b *testing.B) {
	d, s := captured(b)
	ab, _ := jit.Alloc[fp.BF16](d, 64*64)
	bias, _ := jit.Alloc[float32](d, 64)
	x, _ := New(ab, 64, 64)
	db, _ := jit.Alloc[fp.BF16](d, 64*64)
	y, _ := New(db, 64, 64) // D apart from A and B
	tb, _ := New(bias, 64)
	o := &MatmulOptions[fp.BF16]{Alpha: 1, Bias: tb, Act: kernels.ReLU}
	ctx := context.Background()
	if err := Matmul(ctx, s, y, x, x, o); err != nil {
		b.Fatal(err)
	}
	loop(b, s, func() error { return Matmul(ctx, s, y, x, x, o) })
}

func BenchmarkHostCostMatmulEpilogueLaunch(b *testing.B) {
	d, s := captured(b)
	ab, _ := jit.Alloc[fp.BF16](d, 64*64)
	bias, _ := jit.Alloc[float32](d, 64)
	cfg, err := kernels.GemmSM90For(dsl.BF16, dsl.BF16, 64, 64, 64, d.Info().Multiproc)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Epilogue = kernels.Epilogue{Bias: true, Act: kernels.ReLU}
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
	null := jit.AnyPtr{Elem: ptx.F32}
	args := []any{tmA, tmB, uint32(64), uint32(64), uint32(64), float32(1), float32(0), p, p}
	if l.HasD {
		tmD, _ := jit.NewTensorMap(ab, l.D.Dims[:], l.D.Strides[:], l.D.Box[:], jit.Swizzle(l.D.Swizzle))
		args = append(args, tmD)
	}
	args = append(args, jit.AnyOf[float32](bias), null, null, jit.AnyPtr{Elem: ptx.BF16})
	loop(b, s, func() error { return fn.Launch(lc, args...) })
}
