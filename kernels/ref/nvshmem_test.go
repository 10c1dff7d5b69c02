package ref

import (
	"fmt"
	"testing"
)

// TestNVSHMEMKernelsAtRanks runs the NVSHMEM kernels on 2 to 8 simulated GPUs, with the
// deterministic and a randomized schedule, in the weak-memory mode too.
func TestNVSHMEMKernelsAtRanks(t *testing.T) {
	for _, name := range []string{"nvshmem_ring_signal", "nvshmem_alltoall_put", "nvshmem_ring_get"} {
		for ranks := 2; ranks <= 8; ranks++ {
			for _, seed := range []int64{0, 3} {
				t.Run(fmt.Sprintf("%s/ranks=%d/seed=%d", name, ranks, seed), func(t *testing.T) {
					t.Parallel()
					res, err := Run(Problem{Kernel: name, Ranks: ranks, Size: 77 + ranks, Seed: seed, Weak: seed != 0})
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
