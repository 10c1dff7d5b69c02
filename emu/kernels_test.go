package emu_test

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// elemwiseRef computes the reference of the element-wise library kernels in float64 and
// returns, per output buffer index, the expected values.
type refFn func(scalars []float64, in [][]float64, n int) (outIdx int, want []float64)

var references = map[string]refFn{
	"vector_add": func(_ []float64, in [][]float64, n int) (int, []float64) {
		out := make([]float64, n)
		for i := range out {
			out[i] = in[0][i] + in[1][i]
		}
		return 2, out
	},
	"axpy": func(s []float64, in [][]float64, n int) (int, []float64) {
		out := make([]float64, n)
		for i := range out {
			out[i] = s[0]*in[0][i] + in[1][i]
		}
		return 1, out
	},
}

func roundTo(dt ptx.Type, v float64) float64 {
	switch dt {
	case ptx.F16:
		return float64(fp.F16ToF32(fp.F32ToF16(float32(v))))
	case ptx.BF16:
		return float64(fp.BF16ToF32(fp.F32ToBF16(float32(v))))
	case ptx.F32:
		return float64(float32(v))
	}
	return v
}

func writeElems(t *testing.T, s *emu.System, addr uint64, dt ptx.Type, v []float64) {
	t.Helper()
	var err error
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = float32(x)
	}
	switch dt {
	case ptx.F32:
		err = emu.WriteSlice(s, addr, f)
	case ptx.F16:
		err = emu.WriteF16(s, addr, f)
	case ptx.BF16:
		err = emu.WriteBF16(s, addr, f)
	case ptx.F64:
		err = emu.WriteSlice(s, addr, v)
	default:
		t.Fatalf("no writer for %s", dt)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func readElems(t *testing.T, s *emu.System, addr uint64, dt ptx.Type, n int) []float64 {
	t.Helper()
	var f []float32
	var err error
	switch dt {
	case ptx.F32:
		f, err = emu.ReadSlice[float32](s, addr, n)
	case ptx.F16:
		f, err = emu.ReadF16(s, addr, n)
	case ptx.BF16:
		f, err = emu.ReadBF16(s, addr, n)
	case ptx.F64:
		v, err := emu.ReadSlice[float64](s, addr, n)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float64, n)
	for i, x := range f {
		out[i] = float64(x)
	}
	return out
}

func ulp(dt ptx.Type, v float64) float64 {
	bits := map[ptx.Type]int{ptx.F16: 10, ptx.BF16: 7, ptx.F32: 23, ptx.F64: 52}[dt]
	e := math.Ilogb(math.Abs(v))
	if v == 0 {
		e = -14
	}
	return math.Ldexp(1, e-bits)
}

func scalarArg(dt ptx.Type, v float64) any {
	switch dt {
	case ptx.F16:
		return fp.F32ToF16(float32(v))
	case ptx.BF16:
		return fp.F32ToBF16(float32(v))
	case ptx.F32:
		return float32(v)
	case ptx.F64:
		return v
	}
	return nil
}

// TestLibraryKernels runs every library kernel variant at several sizes (including sizes that
// are not multiples of the block size) and checks it against a Go reference.
func TestLibraryKernels(t *testing.T) {
	sizes := []int{1, 31, 32, 33, 255, 1000, 4099}
	for _, spec := range kernels.All() {
		ref, ok := references[spec.Name]
		if !ok {
			t.Logf("kernel %s has no reference in the emulator tests yet; skipped", spec.Name)
			continue
		}
		for _, dt := range spec.DTypes {
			for _, target := range []ptx.Target{ptx.SM80, ptx.SM90} {
				m, err := spec.Build(kernels.Config{Target: target, DType: dt})
				if err != nil {
					t.Fatalf("%s %s: %v", spec.Name, dt, err)
				}
				for _, n := range sizes {
					name := fmt.Sprintf("%s/%s/%s/n=%d", spec.Name, dt, target, n)
					t.Run(name, func(t *testing.T) { runElementwise(t, m, spec, dt, n, ref) })
				}
			}
		}
	}
}

func runElementwise(t *testing.T, m *ptx.Module, spec *kernels.Spec, dt dsl.Type, n int, ref refFn) {
	s, err := emu.New(1)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(int64(n)))
	entry := spec.VariantName(dt)
	var fn *ptx.Func
	for _, f := range m.Funcs {
		if f.Name == entry {
			fn = f
		}
	}
	var args []any
	var scalars []float64
	var bufs []uint64
	var ins [][]float64
	for _, p := range fn.Params {
		switch {
		case p.Name == "n":
			args = append(args, uint32(n))
		case p.Type == ptx.U64:
			a, err := s.Malloc(0, n*dt.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			v := make([]float64, n)
			for i := range v {
				v[i] = roundTo(dt, rng.Float64()*8-4)
			}
			writeElems(t, s, a, dt, v)
			bufs = append(bufs, a)
			ins = append(ins, v)
			args = append(args, a)
		default:
			v := roundTo(dt, rng.Float64()*4-2)
			scalars = append(scalars, v)
			args = append(args, scalarArg(dt, v))
		}
	}
	outIdx, want := ref(scalars, ins, n)
	block := 128
	grid := (n + block - 1) / block
	if spec.Name == "axpy" {
		grid = max(1, grid/3) // exercise the grid-stride loop
	}
	if err := s.Launch(emu.Launch{Module: m, Entry: entry, Grid: emu.D1(grid), Block: emu.D1(block), Args: args}); err != nil {
		t.Fatal(err)
	}
	got := readElems(t, s, bufs[outIdx], dt, n)
	for i := range want {
		w := roundTo(dt, want[i])
		if got[i] != w && math.Abs(got[i]-want[i]) > ulp(dt, want[i]) {
			t.Fatalf("element %d: got %v, want %v", i, got[i], w)
		}
	}
}
