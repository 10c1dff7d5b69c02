package kernels_test

import (
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe22ExtraBlocks: tiled_copy and transpose given more blocks than their documented
// grids (ceil(n/TiledCopyElems), (ceil(n/32), ceil(m/32))) computed the extra blocks'
// extents as n - start in u32, which wrapped to a whole tile past the end: they read and
// wrote outside the buffers (the emulator reported a data race on the next allocation, and
// an out-of-bounds access). Now a block past the end has an empty tile and the result is
// right for any grid. Probe 22.
func TestProbe22ExtraBlocks(t *testing.T) {
	d, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	fn := func(name string, f func(*dsl.Kernel)) *jit.Function {
		k := dsl.New(name, dsl.WithTarget(ptx.SM90))
		f(k)
		m, err := k.Build()
		if err != nil {
			t.Fatal(err)
		}
		mod, err := d.Load(jit.Source{Module: m})
		if err != nil {
			t.Fatal(err)
		}
		f2, err := mod.Function(name)
		if err != nil {
			t.Fatal(err)
		}
		return f2
	}
	run := func(what string, f *jit.Function, lc jit.LaunchConfig, args ...any) {
		t.Helper()
		err := f.Launch(lc, args...)
		if err == nil {
			err = d.Synchronize()
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	alloc := func(n int, f func(i int) float32) *jit.Buffer[float32] {
		b, err := jit.Alloc[float32](d, n)
		if err != nil {
			t.Fatal(err)
		}
		h := make([]float32, n)
		for i := range h {
			h[i] = f(i)
		}
		if err := b.CopyFromHost(h); err != nil {
			t.Fatal(err)
		}
		return b
	}
	read := func(b *jit.Buffer[float32]) []float32 {
		h := make([]float32, b.Len())
		if err := b.CopyToHost(h); err != nil {
			t.Fatal(err)
		}
		return h
	}

	// tiled_copy: 1.5 tiles (the last partial), 3 blocks more than the 2 needed.
	tile := kernels.TiledCopyElems(dsl.F32)
	n := tile + tile/2
	src := alloc(n, func(i int) float32 { return float32(i) })
	dst := alloc(n, func(int) float32 { return -1 })
	guard := alloc(4*tile, func(int) float32 { return 7 }) // the allocation after dst
	run("tiled_copy on 5 blocks", fn("tiled_copy", func(k *dsl.Kernel) { kernels.TiledCopy(k, dsl.F32) }),
		jit.LaunchConfig{Grid: jit.D1(5), Block: jit.D1(256)}, src, dst, uint32(n))
	for i, v := range read(dst) {
		if v != float32(i) {
			t.Fatalf("tiled_copy: dst[%d] = %v; want %d", i, v, i)
		}
	}
	for i, v := range read(guard) {
		if v != 7 {
			t.Fatalf("tiled_copy: the next allocation's element %d = %v; want 7 (untouched)", i, v)
		}
	}

	// transpose: 40 x 50 (2 x 2 tiles) on a grid of 4 x 3.
	m, c := 40, 50
	in := alloc(m*c, func(i int) float32 { return float32(i) })
	out := alloc(m*c, func(int) float32 { return -1 })
	guard = alloc(4096, func(int) float32 { return 7 })
	run("transpose on a 4 x 3 grid", fn("transpose", func(k *dsl.Kernel) { kernels.Transpose(k, dsl.F32) }),
		jit.LaunchConfig{Grid: jit.Dim3{X: 4, Y: 3, Z: 1}, Block: jit.D1(256)}, in, out, uint32(m), uint32(c))
	o := read(out)
	for i := 0; i < m; i++ {
		for j := 0; j < c; j++ {
			if got := o[j*m+i]; got != float32(i*c+j) {
				t.Fatalf("transpose: out[%d, %d] = %v; want %d", j, i, got, i*c+j)
			}
		}
	}
	for i, v := range read(guard) {
		if v != 7 {
			t.Fatalf("transpose: the next allocation's element %d = %v; want 7 (untouched)", i, v)
		}
	}
}
