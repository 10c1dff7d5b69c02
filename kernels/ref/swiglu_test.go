package ref

import (
	"testing"

	"github.com/kgen-dev/kgen/dsl"
)

// TestSwiGLUGridStride runs swiglu with grids far smaller than its rows' vectors (each
// thread loops several times, across row boundaries) and rows of F 8 and 136.
func TestSwiGLUGridStride(t *testing.T) {
	for _, p := range []Problem{
		{Kernel: "swiglu", DType: dsl.BF16, Size: 20000, Grid: 1},
		{Kernel: "swiglu", DType: dsl.F16, Size: 20000, Cols: 136, Grid: 3},
		{Kernel: "swiglu", DType: dsl.BF16, Size: 999, Cols: 8, Grid: 2},
	} {
		res, err := Run(p)
		if err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		t.Logf("%s %s grid %d: max error %.3g of the tolerance", res.Shape, p.DType, p.Grid, res.MaxError)
	}
}

// TestSwiGLUMaskedGridStride runs swiglu_masked with grids far smaller than its groups'
// vectors (each thread loops over several groups' rows) and F 8 and 136.
func TestSwiGLUMaskedGridStride(t *testing.T) {
	for _, p := range []Problem{
		{Kernel: "swiglu_masked", DType: dsl.BF16, Size: 20000, Grid: 1},
		{Kernel: "swiglu_masked", DType: dsl.F16, Size: 20000, Cols: 136, Grid: 3},
		{Kernel: "swiglu_masked", DType: dsl.BF16, Size: 999, Cols: 8, Grid: 2},
	} {
		res, err := Run(p)
		if err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		t.Logf("%s %s grid %d: max error %.3g of the tolerance", res.Shape, p.DType, p.Grid, res.MaxError)
	}
}
