package ref

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/kernels"
)

// hierRuns are the topologies (nodes x GPUs per node) and sizes the hierarchical kernels
// run at: sizes that are no multiple of the vector width or the GPU count, one node and
// one GPU per node as the edge cases, strict and weak memory. The min and max variants
// share the sum kernels' code and run where minMax is set.
var hierRuns = []struct {
	nodes, local, n int
	seed            int64
	weak, minMax    bool
}{
	{2, 2, 37, 1, true, true},
	{2, 4, 1001, 0, false, false},
	{3, 2, 29, 2, true, true},
	{4, 2, 13, 3, false, true},
	{4, 2, 130, 4, true, false},
	{1, 4, 45, 5, true, false},
	{3, 1, 7, 6, false, false},
}

// TestHierOnTheEmulator runs every hierarchical kernel and dtype over hierRuns, each
// harness launching collLaunches times in a row (out of place, then in place for the
// all-reduce) without resets.
func TestHierOnTheEmulator(t *testing.T) {
	for _, s := range kernels.All() {
		if !strings.HasPrefix(s.Name, "hier_") {
			continue
		}
		for _, dt := range s.DTypes {
			for _, c := range hierRuns {
				if (strings.HasSuffix(s.Name, "_min") || strings.HasSuffix(s.Name, "_max")) && !c.minMax {
					continue
				}
				mode := "strict"
				if c.weak {
					mode = fmt.Sprintf("weak%d", c.seed)
				}
				t.Run(fmt.Sprintf("%s/%s/%dx%d/n%d/%s", s.Name, dt, c.nodes, c.local, c.n, mode), func(t *testing.T) {
					t.Parallel()
					res, err := Run(Problem{Kernel: s.Name, DType: dt, Size: c.n, Ranks: c.nodes * c.local, Nodes: c.nodes, Seed: c.seed, Weak: c.weak})
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
