package ref

import (
	"fmt"
	"testing"
)

// TestMoELLPipeline runs the low-latency MoE check on 1..8 emulated GPUs, strict and weak,
// grids of 1 to 3 blocks, and from call counts just below the u32 wrap of the counters.
func TestMoELLPipeline(t *testing.T) {
	for _, c := range []struct {
		kernel string
		gpus   int
		size   int
		weak   bool
		epoch  uint32
	}{
		{"moe_ll_dispatch", 1, 40, false, 0},
		{"moe_ll_dispatch", 2, 100, true, 0},
		{"moe_ll_combine", 3, 161, true, 0},
		{"moe_ll_dispatch", 4, 250, true, 0},
		{"moe_ll_combine", 8, 35, false, 0},
		{"moe_ll_combine", 3, 77, true, 0xfffffffe / 3}, // (calls+1)*grid crosses the u32 wrap
	} {
		t.Run(fmt.Sprintf("%s/g%d/n%d/weak%v/epoch%#x", c.kernel, c.gpus, c.size, c.weak, c.epoch), func(t *testing.T) {
			t.Parallel()
			res, err := Run(Problem{Kernel: c.kernel, Size: c.size, Ranks: c.gpus, Seed: int64(c.size), Weak: c.weak, Epoch: c.epoch})
			if err != nil {
				t.Fatal(err)
			}
			if res.Checked == 0 {
				t.Fatal("nothing was checked")
			}
			t.Log(res)
		})
	}
}
