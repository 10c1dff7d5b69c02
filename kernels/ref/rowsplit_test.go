package ref

import (
	"fmt"
	"testing"

	"github.com/kgen-dev/kgen/kernels"
)

// TestSplitRows runs the split-row kernels on the emulator against their Go references at
// odd row lengths: 40000 (vectors for f32 and 16-bit types, segments in registers), 40001
// and 100003 (element accesses), 100000 (more parts than the length needs, to fill the
// device) and 1000001 (more parts than the emulated device holds: segments read twice), over
// 3, 2 and 1 rows, and grids with fewer row slots than rows (20x40000: 12 slots; 2x1000001:
// 1), whose blocks reuse the slot's barrier and alternate its partial buffers.
func TestSplitRows(t *testing.T) {
	for _, name := range []string{"softmax_split", "row_sum_split"} {
		s, err := kernels.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, dt := range s.DTypes {
			// (No weak-mode cases: the emulator's weak mode buffers stores to other GPUs' and
			// symmetric memory only; a split kernel's scratch is private, so it changed
			// nothing, and Run now refuses Weak for a single-GPU kernel.)
			for _, c := range []struct{ rows, cols int }{{3, 40000}, {2, 40001}, {2, 100000}, {1, 100003}, {1, 1000001}, {5, 40000}, {3, 100003}, {20, 40000}, {2, 1000001}} {
				rows, cols := c.rows, c.cols
				p := Problem{Kernel: name, DType: dt, Size: rows * cols, Cols: cols, Seed: int64(cols)}
				t.Run(fmt.Sprintf("%s/%s/%dx%d", name, dt, rows, cols), func(t *testing.T) {
					t.Parallel()
					res, err := Run(p)
					if err != nil {
						t.Fatal(err)
					}
					if res.Checked == 0 {
						t.Fatal("nothing was checked")
					}
					t.Log(res.Shape)
				})
			}
		}
	}
}
