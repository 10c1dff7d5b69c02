package ref

import (
	"fmt"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
)

// TestChosenRowKernels runs the kernel kernels.ChooseRowKernel picks for the emulated
// device on each side of its boundaries and checks it against the Go reference: rows of
// 16383 (too short to split) and 16384 elements (two segments) with the most rows that
// still split (softmax: one fewer than the emulator's SMs; row_sum: a quarter of them) and
// one row more, and rows of 32768 and 32769 elements with as many rows as SMs.
func TestChosenRowKernels(t *testing.T) {
	d, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	sms := d.Info().Multiproc
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	type shape struct {
		rows, cols int
		split      bool
	}
	cases := map[kernels.Family][]shape{
		kernels.FamilySoftmax: {{sms - 1, 16383, false}, {sms - 1, 16384, true}, {sms, 16384, false}, {sms, 32768, false}, {sms, 32769, false}},
		kernels.FamilyRowSum:  {{sms / 4, 16383, false}, {sms / 4, 16384, true}, {sms/4 + 1, 16384, false}, {sms, 32769, false}},
	}
	for f, shapes := range cases {
		for _, dt := range []dsl.Type{dsl.F32, dsl.F16, dsl.BF16} {
			for _, c := range shapes {
				t.Run(fmt.Sprintf("%s/%s/%dx%d", f, dt, c.rows, c.cols), func(t *testing.T) {
					t.Parallel()
					l, err := kernels.ChooseRowKernel(f, dt, c.rows, c.cols, sms)
					if err != nil {
						t.Fatal(err)
					}
					if l.Split != c.split {
						t.Fatalf("chose %s (%s), want split = %v", l.ID, l.Why, c.split)
					}
					s, err := kernels.Find(l.ID)
					if err != nil {
						t.Fatal(err)
					}
					res, err := Run(Problem{Kernel: s.Name, DType: dt, Size: c.rows * c.cols, Cols: c.cols, Seed: int64(c.cols)})
					if err != nil {
						t.Fatal(err)
					}
					if res.Checked == 0 {
						t.Fatal("nothing was checked")
					}
					t.Logf("%s: %s", l.Why, res)
				})
			}
		}
	}
}
