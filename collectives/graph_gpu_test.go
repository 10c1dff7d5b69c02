//go:build cuda && cgo

package collectives

import (
	"fmt"
	"os"
	"testing"

	"github.com/kgen-dev/kgen/jit"
)

// TestGPUGraphHostCost is issue 17's acceptance on one GPU (1 rank): host time per
// all-reduce call (1024 f32, default Options) replayed 1000 times from a graph of 1 and of
// 8 calls, against direct calls, every output and the device epoch checked after the
// replays (graphHostCost). It prints TIMING lines. Without a GPU it skips, unless
// KGEN_REQUIRE_GPU=1.
func TestGPUGraphHostCost(t *testing.T) {
	if b, err := jit.DefaultBackend(); err != nil || b != jit.GPU {
		if os.Getenv("KGEN_REQUIRE_GPU") == "1" {
			t.Fatalf("default backend %s (%v), want the GPU", b, err)
		}
		t.Skipf("default backend %s (%v): no GPU", b, err)
	}
	for _, per := range []int{1, 8} {
		err := jit.RunRanks(jit.RanksOptions{Backend: jit.GPU, World: 1, NVSHMEM: true}, func(r *jit.Rank) error {
			cost, err := graphHostCost(r, Options{}, 1024, per, 1000)
			if err != nil {
				return err
			}
			fmt.Printf("TIMING graphcoll calls_per_graph=%d algorithm=%s graph_us_per_call=%.3f direct_us_per_call=%.3f (1000 replays, results checked)\n",
				per, cost.algorithm, float64(cost.graph.Nanoseconds())/1e3, float64(cost.direct.Nanoseconds())/1e3)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
