package ref

import (
	"fmt"
	"testing"

	"github.com/kgen-dev/kgen/kernels"
)

// oddLengths are row lengths (and vector lengths) that hit every path of the streaming and
// row kernels: shorter than a vector, a warp's row with a partial last vector group, a
// block's row in registers (1032: vectors, 4099: elements), and rows longer than the
// registers hold (40000: vectors, 40001: elements).
var oddLengths = []int{1, 3, 1000, 1032, 4099, 40000, 40001}

// TestOddShapes runs the streaming and row kernels at odd lengths on the emulator against
// their Go references, with the launch shapes the host uses (kernels.StreamShape,
// SoftmaxShape, RowSumShape): row kernels over 11 rows (a partial block of warp rows) up to
// 4099 columns and 2 rows above.
func TestOddShapes(t *testing.T) {
	for _, name := range []string{"vector_add", "axpy", "softmax", "row_sum"} {
		s, err := kernels.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, dt := range s.DTypes {
			for _, n := range oddLengths {
				p := Problem{Kernel: name, DType: dt, Size: n, Seed: int64(n)}
				if name == "softmax" || name == "row_sum" {
					rows := 11
					if n > 4099 {
						rows = 2
					}
					p.Size, p.Cols = rows*n, n
				}
				t.Run(fmt.Sprintf("%s/%s/%d", name, dt, n), func(t *testing.T) {
					t.Parallel()
					res, err := Run(p)
					if err != nil {
						t.Fatal(err)
					}
					if res.Checked == 0 {
						t.Fatal("nothing was checked")
					}
				})
			}
		}
	}
}

// TestSmallGrids runs the streaming and row kernels with grids smaller than their work (1 and
// 3 blocks): their loops must cover every element and row.
func TestSmallGrids(t *testing.T) {
	for _, name := range []string{"vector_add", "axpy", "softmax", "row_sum"} {
		for _, grid := range []int{1, 3} {
			for _, cols := range []int{1000, 4099} {
				p := Problem{Kernel: name, Size: 5000, Grid: grid, Seed: int64(grid)}
				if name == "softmax" || name == "row_sum" {
					p.Size, p.Cols = 37*cols, cols
				}
				t.Run(fmt.Sprintf("%s/grid=%d/%d", name, grid, cols), func(t *testing.T) {
					t.Parallel()
					res, err := Run(p)
					if err != nil {
						t.Fatal(err)
					}
					if res.Checked == 0 {
						t.Fatal("nothing was checked")
					}
				})
			}
		}
	}
}
