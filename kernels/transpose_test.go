package kernels

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// TestTransposeShapes runs transpose on the emulator over shapes kernels/ref's square-ish
// problems miss: non-square matrices whose extents are multiples of 4 (the vector path,
// with partial tiles at both edges), and others (the scalar path). Elements are distinct
// bit patterns, so any misplaced, missing or extra write shows.
func TestTransposeShapes(t *testing.T) {
	shapes := [][2]int{{4, 8}, {8, 4}, {36, 100}, {100, 36}, {64, 96}, {96, 4}, {32, 32},
		{1, 1}, {3, 5}, {33, 65}, {65, 2}, {4, 6}}
	for _, dt := range []dsl.Type{dsl.F32, dsl.F16} {
		s, _ := Lookup("transpose")
		mod, err := s.Build(Config{Target: ptx.SM90, DType: dt})
		if err != nil {
			t.Fatal(err)
		}
		for _, sh := range shapes {
			m, n := sh[0], sh[1]
			t.Run(fmt.Sprintf("%s/%dx%d", dt, m, n), func(t *testing.T) {
				sys, err := emu.New(1)
				if err != nil {
					t.Fatal(err)
				}
				sz := dt.Bytes()
				pi, _ := sys.Malloc(0, m*n*sz)
				po, _ := sys.Malloc(0, (m*n+64)*sz) // a canary after the end
				in := make([]uint16, m*n*sz/2)      // f32 as pairs of halves
				for i := range in {
					in[i] = uint16(i*2654435761>>7) | 1
				}
				if err := emu.WriteSlice(sys, pi, in); err != nil {
					t.Fatal(err)
				}
				err = sys.Launch(emu.Launch{Module: mod, Entry: s.VariantName(dt),
					Grid: emu.Dim3{X: (n + 31) / 32, Y: (m + 31) / 32, Z: 1}, Block: emu.D1(256),
					Args: []any{pi, po, uint32(m), uint32(n)}})
				if err != nil {
					t.Fatal(err)
				}
				w := sz / 2 // halves per element
				out, _ := emu.ReadSlice[uint16](sys, po, (m*n+64)*w)
				for i := 0; i < m; i++ {
					for j := 0; j < n; j++ {
						for h := 0; h < w; h++ {
							if got, want := out[(j*m+i)*w+h], in[(i*n+j)*w+h]; got != want {
								t.Fatalf("out(%d,%d): got %#x, want %#x", j, i, got, want)
							}
						}
					}
				}
				for i := m * n * w; i < len(out); i++ {
					if out[i] != 0 {
						t.Fatalf("write past the end at half %d", i)
					}
				}
			})
		}
	}
}

// TestTransposeVectorAccesses checks that transpose's global accesses are 128-bit for f32
// and 64-bit (256 threads x 4 halves fill the 32x32 tile) for f16, and that ptx.Verify
// accepts every target's variant.
func TestTransposeVectorAccesses(t *testing.T) {
	s, _ := Lookup("transpose")
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
