package ref

import (
	"fmt"
	"testing"
)

// TestMoEPipeline runs the MoE pipeline's check (token buffers holding each token bound for
// a GPU once included) on 1..8 emulated GPUs, strict and weak, at shapes of k 1..4 and
// hidden 8, 16, 24, and from an epoch just below the u32 wrap.
func TestMoEPipeline(t *testing.T) {
	for _, c := range []struct {
		kernel string
		gpus   int
		size   int
		weak   bool
		epoch  uint32
	}{
		{"moe_dispatch_count", 2, 100, false, 0},
		{"moe_dispatch_layout", 3, 161, true, 0},
		{"moe_dispatch_send", 4, 250, true, 0},
		{"moe_combine", 5, 35, false, 0},
		{"moe_combine", 8, 200, true, 0},
		{"moe_dispatch_expand", 6, 323, true, 0},
		{"moe_dispatch_send", 3, 77, true, 0xfffffffd}, // the barriers' targets cross the u32 wrap
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
