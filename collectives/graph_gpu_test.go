//go:build cuda && cgo

package collectives

import (
	"fmt"
	"os"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/jit"
)

// TestGPUGraphHostCost is issue 17's acceptance on one GPU (1 rank): host time per
// all-reduce call (1024 f32, default Options) replayed 1000 times from a graph of 1 and of
// 8 calls, against direct calls, every output and the device epoch checked after the
// replays (graphHostCost), with the GPU's time for the same calls. It prints TIMING lines.
// KGEN_GRAPHCOLL_CPUPROFILE=FILE writes a CPU profile of the first series of direct calls.
// Without a GPU it skips, unless KGEN_REQUIRE_GPU=1.
func TestGPUGraphHostCost(t *testing.T) {
	if b, err := jit.DefaultBackend(); err != nil || b != jit.GPU {
		if os.Getenv("KGEN_REQUIRE_GPU") == "1" {
			t.Fatalf("default backend %s (%v), want the GPU", b, err)
		}
		t.Skipf("default backend %s (%v): no GPU", b, err)
	}
	if path := os.Getenv("KGEN_GRAPHCOLL_CPUPROFILE"); path != "" {
		// The direct calls of the graph of 1 (the first run), profiled.
		profileDirect = func() func() {
			f, err := os.Create(path)
			if err != nil {
				t.Error(err)
				return func() {}
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				t.Error(err)
				f.Close()
				return func() {}
			}
			profileDirect = nil
			return func() {
				pprof.StopCPUProfile()
				if err := f.Close(); err != nil {
					t.Error(err)
				}
			}
		}
		defer func() { profileDirect = nil }()
	}
	for _, per := range []int{1, 8} {
		err := jit.RunRanks(jit.RanksOptions{Backend: jit.GPU, World: 1, NVSHMEM: true}, func(r *jit.Rank) error {
			cost, err := graphHostCost(r, Options{}, 1024, per, 1000)
			if err != nil {
				return err
			}
			fmt.Printf("TIMING graphcoll calls_per_graph=%d algorithm=%s graph_us_per_call=%.3f direct_us_per_call=%.3f gpu_us_per_call graph=%.3f direct=%.3f (1000 replays, results checked)\n",
				per, cost.algorithm, us(cost.graph), us(cost.direct), us(cost.graphGPU), us(cost.directGPU))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
