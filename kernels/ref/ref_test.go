package ref

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// sizes are the problem sizes each kernel runs at: tiny, not a multiple of any vector or
// tile width (4096 makes 64 x 64 matrices: the row kernels' vector path), and a few tiles.
var sizes = []int{1, 7, 257, 4096, 4099}

// TestEveryKernelOnTheEmulator runs every library kernel, dtype and size on the emulator
// and checks it against its Go reference.
func TestEveryKernelOnTheEmulator(t *testing.T) {
	for _, s := range kernels.All() {
		if _, ok := harnesses[s.Name]; !ok {
			t.Errorf("kernel %s has no emulator check", s.Name)
			continue
		}
		for _, dt := range s.DTypes {
			for _, n := range sizes {
				t.Run(fmt.Sprintf("%s/%s/%d", s.Name, dt, n), func(t *testing.T) {
					t.Parallel()
					res, err := Run(Problem{Kernel: s.Name, DType: dt, Size: n, Seed: int64(n)})
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

func TestSM80Variants(t *testing.T) {
	for _, name := range Kernels() {
		if s, err := kernels.Lookup(name); err == nil && !slices.Contains(s.Targets, ptx.SM80) {
			continue // sm_90-only kernels (multimem)
		}
		res, err := Run(Problem{Kernel: name, Target: ptx.SM80, Size: 300})
		if err != nil {
			t.Fatal(err)
		}
		t.Log(res)
	}
}

func TestBadProblems(t *testing.T) {
	if _, err := Run(Problem{Kernel: "nosuch"}); err == nil {
		t.Error("unknown kernel accepted")
	}
	if _, err := Run(Problem{Kernel: "vector_add", Size: -1}); err == nil {
		t.Error("negative size accepted")
	}
}
