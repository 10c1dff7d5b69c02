package kernels

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/ptx"
)

// TestTransposeShapes runs transpose on the emulator over shapes kernels/ref's square-ish
// problems miss: non-square matrices whose extents are multiples of 4 (the vector path,
// with partial tiles at both edges), and others (the scalar path). Elements are distinct
// bit patterns, so any misplaced, missing or extra write shows.
func TestTransposeShapes(t *testing.T) {
	shapes := [][2]int{{4, 8}, {8, 4}, {36, 100}, {100, 36}, {64, 96}, {96, 4}, {32, 32},
		{1, 1}, {3, 5}, {33, 65}, {65, 2}, {4, 6}}
	transposeShapes(t, dsl.F32, shapes, func(b uint32) float32 { return math.Float32frombits(b &^ (1 << 30)) },
		func(x float32) uint32 { return math.Float32bits(x) })
	transposeShapes(t, dsl.F16, shapes, func(b uint32) fp.F16 { return fp.F16(b &^ (1 << 14)) },
		func(x fp.F16) uint32 { return uint32(x) })
}

// transposeShapes runs transpose of T (the host type of dt) over the shapes; from makes the
// element of a bit pattern (finite, so the test reads as values), bits reads it back.
func transposeShapes[T jit.Elem](t *testing.T, dt dsl.Type, shapes [][2]int, from func(uint32) T, bits func(T) uint32) {
	b, err := Find(ID{Family: FamilyTranspose, DType: dt})
	if err != nil {
		t.Fatal(err)
	}
	v, err := b.BuildVariant(Config{Target: ptx.SM90, DType: dt})
	if err != nil {
		t.Fatal(err)
	}
	params := jit.ParamInfos(v.Params)
	for _, sh := range shapes {
		m, n := sh[0], sh[1]
		t.Run(fmt.Sprintf("%s/%dx%d", dt, m, n), func(t *testing.T) {
			d, err := jit.OpenBackend(jit.Emulator, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			mod, err := d.Load(jit.Source{Module: v.Module, Params: map[string][]jit.ParamInfo{v.Entry: params}})
			if err != nil {
				t.Fatal(err)
			}
			fn, err := mod.Function(v.Entry)
			if err != nil {
				t.Fatal(err)
			}
			in := make([]T, m*n)
			for i := range in {
				in[i] = from(uint32(i*2654435761>>7) | 1)
			}
			pi, err := jit.Alloc[T](d, m*n)
			if err != nil {
				t.Fatal(err)
			}
			po, err := jit.Alloc[T](d, m*n+64) // a canary after the end
			if err != nil {
				t.Fatal(err)
			}
			if err := pi.CopyFromHost(in); err != nil {
				t.Fatal(err)
			}
			if err := po.CopyFromHost(make([]T, m*n+64)); err != nil {
				t.Fatal(err)
			}
			cfg := jit.LaunchConfig{Grid: jit.Dim3{X: (n + 31) / 32, Y: (m + 31) / 32, Z: 1}, Block: jit.D1(256)}
			if err := fn.LaunchArgs(cfg, launch.Transpose[T]{In: pi, Out: po, M: uint32(m), N: uint32(n)}); err != nil {
				t.Fatal(err)
			}
			out := make([]T, m*n+64)
			if err := po.CopyToHost(out); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					if got, want := bits(out[j*m+i]), bits(in[i*n+j]); got != want {
						t.Fatalf("out(%d,%d): got %#x, want %#x", j, i, got, want)
					}
				}
			}
			for i := m * n; i < len(out); i++ {
				if bits(out[i]) != 0 {
					t.Fatalf("write past the end at element %d", i)
				}
			}
		})
	}
}

// TestTransposeVectorAccesses checks that transpose's global accesses are 128-bit for f32
// and 64-bit (256 threads x 4 halves fill the 32x32 tile) for f16, and that ptx.Verify
// accepts every target's variant.
func TestTransposeVectorAccesses(t *testing.T) {
	s, err := Find(ID{Family: FamilyTranspose, DType: dsl.F32})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dt         dsl.Type
		load, stor string
	}{
		{dsl.F32, "ld.global.v4.f32", "st.global.v4.f32"},
		{dsl.F16, "ld.global.v4.b16", "st.global.v4.b16"},
	} {
		for _, tg := range s.Targets {
			mod, err := s.Build(Config{Target: tg, DType: c.dt})
			if err != nil {
				t.Fatal(err)
			}
			p := mod.String()
			if !strings.Contains(p, c.load) || !strings.Contains(p, c.stor) {
				t.Errorf("%s %s: no %s / %s", c.dt, tg, c.load, c.stor)
			}
		}
	}
}
