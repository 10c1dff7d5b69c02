package jit_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ptx"
)

// scaleArgs is the kernel's declaration: y[i] = alpha * x[i] for i < n, x and y of dt.
type scaleArgs struct {
	X, Y  dsl.Ptr
	Alpha dsl.Value `kgen:"f32"`
	N     dsl.Value `kgen:"u32"`
}

// scaleHost is scaleArgs on the host.
type scaleHost[T jit.Elem] struct {
	X, Y  jit.Ptr[T]
	Alpha float32
	N     uint32
}

// loadScale builds scale for dt and loads it on the emulator, with its declared parameters
// when info is set.
func loadScale(t *testing.T, dt dsl.Type, info bool) (*jit.Device, *jit.Function) {
	t.Helper()
	k := dsl.New("scale", dsl.WithTarget(ptx.SM90))
	a := dsl.Params[scaleArgs](k, dt)
	i := k.GlobalThreadIdx(dsl.X)
	k.If(i.Lt(a.N), func() { k.Store(a.Y.At(i), k.Load(a.X.At(i)).To(dsl.F32).Mul(a.Alpha).To(dt)) })
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	src := jit.Source{Module: m}
	if info {
		src.Params = map[string][]jit.ParamInfo{"scale": paramInfo(k)}
	}
	mod, err := d.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	fn, err := mod.Function("scale")
	if err != nil {
		t.Fatal(err)
	}
	return d, fn
}

func paramInfo(k *dsl.Kernel) []jit.ParamInfo { return jit.ParamInfos(k.Params()) }

func TestLaunchArgs(t *testing.T) {
	d, fn := loadScale(t, dsl.F16, true)
	const n = 100
	x, err := jit.Alloc[fp.F16](d, n)
	if err != nil {
		t.Fatal(err)
	}
	y, err := jit.Alloc[fp.F16](d, n+1)
	if err != nil {
		t.Fatal(err)
	}
	in := make([]float32, n)
	for i := range in {
		in[i] = float32(i) - 50.25
	}
	if err := x.CopyFromHost(fp.From[fp.F16](in)); err != nil {
		t.Fatal(err)
	}
	cfg := jit.LaunchConfig{Grid: jit.D1(1), Block: jit.D1(128)}
	// y[1:] through a typed offset pointer.
	if err := fn.LaunchArgs(cfg, scaleHost[fp.F16]{X: x, Y: y.At(1), Alpha: 2, N: n}); err != nil {
		t.Fatal(err)
	}
	got := make([]fp.F16, n+1)
	if err := y.CopyToHost(got); err != nil {
		t.Fatal(err)
	}
	for i, v := range fp.Float32s(got[1:]) {
		if want := fp.F16Of(2 * fp.F16Of(in[i]).Float32()).Float32(); v != want {
			t.Fatalf("y[%d] = %v, want %v", i+1, v, want)
		}
	}
	// A runtime-typed pointer of the right element type is accepted.
	type anyHost struct {
		X, Y  jit.AnyPtr
		Alpha float32
		N     uint32
	}
	ax := jit.AnyOf[fp.F16](x)
	if err := fn.LaunchArgs(cfg, &anyHost{X: ax, Y: jit.AnyOf[fp.F16](y), Alpha: 1, N: n}); err != nil {
		t.Fatal(err)
	}
	// ... and one of another is refused, naming the field.
	wrong := jit.AnyPtr{Addr: y.DevPtr(), Elem: ptx.BF16}
	err = fn.LaunchArgs(cfg, anyHost{X: ax, Y: wrong, Alpha: 1, N: n})
	if err == nil || !strings.Contains(err.Error(), "field Y (parameter y): an AnyPtr to bf16, but the kernel's parameter points to f16") {
		t.Fatalf("AnyPtr of the wrong type: %v", err)
	}
}

// Every way a host struct can disagree with the kernel is an error naming the field.
func TestLaunchArgsErrors(t *testing.T) {
	d, fn := loadScale(t, dsl.F32, true)
	buf, err := jit.Alloc[float32](d, 4)
	if err != nil {
		t.Fatal(err)
	}
	f16, err := jit.Alloc[fp.F16](d, 4)
	if err != nil {
		t.Fatal(err)
	}
	cfg := jit.LaunchConfig{Grid: jit.D1(1), Block: jit.D1(32)}
	type (
		missing struct {
			X, Y  jit.Ptr[float32]
			Alpha float32
		}
		extra struct {
			X, Y  jit.Ptr[float32]
			Alpha float32
			N     uint32
			M     uint32
		}
		swapped struct {
			X, Y  jit.Ptr[float32]
			N     uint32
			Alpha float32
		}
		renamed struct {
			X     jit.Ptr[float32]
			Out   jit.Ptr[float32] `kgen:"name=y"`
			Alpha float32
			Count uint32 `kgen:"name=n"`
		}
		wrongScalar struct {
			X, Y  jit.Ptr[float32]
			Alpha float64
			N     uint32
		}
		platformInt struct {
			X, Y  jit.Ptr[float32]
			Alpha float32
			N     int
		}
		untyped struct {
			X, Y  jit.Pointer
			Alpha float32
			N     uint32
		}
		devPtr struct {
			X     jit.DevicePtr
			Y     jit.Ptr[float32]
			Alpha float32
			N     uint32
		}
		unexported struct {
			X, Y  jit.Ptr[float32]
			Alpha float32
			n     uint32 //lint:ignore U1000 the misuse under test
		}
	)
	for _, c := range []struct {
		args any
		want string
	}{
		{missing{X: buf, Y: buf}, "no field for parameter .u32 n"},
		{extra{X: buf, Y: buf}, "field M: the kernel has no parameter m"},
		{swapped{X: buf, Y: buf}, "field N is parameter n, number 3, but is field number 2"},
		{wrongScalar{X: buf, Y: buf}, "field Alpha (parameter .f32 alpha): float64 (f64), but the kernel's parameter is f32"},
		{platformInt{X: buf, Y: buf}, "field N (parameter .u32 n): type int has a platform-dependent size"},
		{untyped{X: buf, Y: buf}, "field X (parameter .u64 x): type jit.Pointer is an untyped pointer"},
		{unexported{X: buf, Y: buf}, "field n is unexported"},
		{devPtr{X: buf.DevPtr(), Y: buf}, "field X (parameter .u64 x): type jit.DevicePtr is an untyped pointer"},
		{scaleHost[fp.F16]{X: f16, Y: f16}, "field X (parameter .u64 x): a pointer to f16, but the kernel's parameter points to f32"},
		{scaleHost[float32]{X: buf}, "field Y (parameter y): nil"},
		{42, "not a struct"},
		{nil, "no arguments"},
	} {
		err := fn.LaunchArgs(cfg, c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%T: got %v\nwant it to contain %q", c.args, err, c.want)
		}
	}
	if err := fn.LaunchArgs(cfg, renamed{X: buf, Out: buf, Alpha: 1, Count: 4}); err != nil {
		t.Errorf("tagged names: %v", err)
	}
	if err := buf.Free(); err != nil {
		t.Fatal(err)
	}
	if err := fn.LaunchArgs(cfg, scaleHost[float32]{X: buf, Y: buf, N: 4}); err == nil || !strings.Contains(err.Error(), "field X (parameter x): a *jit.Buffer[float32] that was freed") {
		t.Errorf("freed buffer: %v", err)
	}
}

// Without the builder's declarations, typed pointers are taken on their word and AnyPtr is
// refused (it could not be checked).
func TestLaunchArgsWithoutInfo(t *testing.T) {
	d, fn := loadScale(t, dsl.F32, false)
	buf, err := jit.Alloc[float32](d, 4)
	if err != nil {
		t.Fatal(err)
	}
	cfg := jit.LaunchConfig{Grid: jit.D1(1), Block: jit.D1(32)}
	if err := fn.LaunchArgs(cfg, scaleHost[float32]{X: buf, Y: buf, Alpha: 1, N: 4}); err != nil {
		t.Fatal(err)
	}
	type anyHost struct {
		X, Y  jit.AnyPtr
		Alpha float32
		N     uint32
	}
	a := jit.AnyOf[float32](buf)
	if err := fn.LaunchArgs(cfg, anyHost{X: a, Y: a, N: 4}); err == nil || !strings.Contains(err.Error(), "load the module with Source.Params") {
		t.Fatalf("AnyPtr without declarations: %v", err)
	}
}

func TestLoadChecksParams(t *testing.T) {
	k := dsl.New("k")
	dsl.Params[scaleArgs](k, dsl.F32)
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	info := paramInfo(k)
	info[1].Name = "z"
	_, err = d.Load(jit.Source{Module: m, Params: map[string][]jit.ParamInfo{"k": info}})
	if err == nil || !strings.Contains(err.Error(), "kernel k: parameter 1 is y, declared as z") {
		t.Fatalf("mismatched declarations: %v", err)
	}
}

func BenchmarkLaunchArgs(b *testing.B) {
	t := &testing.T{}
	d, fn := loadScale(t, dsl.F32, true)
	buf, err := jit.Alloc[float32](d, 1)
	if err != nil {
		b.Fatal(err)
	}
	args := scaleHost[float32]{X: buf, Y: buf, Alpha: 1, N: 0}
	cfg := jit.LaunchConfig{Grid: jit.D1(1), Block: jit.D1(1)}
	b.ReportAllocs()
	for b.Loop() {
		if err := fn.LaunchArgs(cfg, args); err != nil {
			b.Fatal(err)
		}
	}
}

// The positional launch of the same kernel, to compare with BenchmarkLaunchArgs.
func BenchmarkLaunchPositional(b *testing.B) {
	t := &testing.T{}
	d, fn := loadScale(t, dsl.F32, true)
	buf, err := jit.Alloc[float32](d, 1)
	if err != nil {
		b.Fatal(err)
	}
	cfg := jit.LaunchConfig{Grid: jit.D1(1), Block: jit.D1(1)}
	b.ReportAllocs()
	for b.Loop() {
		if err := fn.Launch(cfg, buf, buf, float32(1), uint32(0)); err != nil {
			b.Fatal(err)
		}
	}
}
