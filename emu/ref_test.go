package emu_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/ref"
)

// TestLibraryKernelsRandomSchedules runs every library kernel that kernels/ref can check
// (the library's own Go references) under randomized schedules and the weak-memory mode,
// at sizes that are not multiples of any block or vector width. (kernels/ref's own tests
// cover the deterministic schedule and more sizes.)
func TestLibraryKernelsRandomSchedules(t *testing.T) {
	checkable := map[string]bool{}
	for _, n := range ref.Kernels() {
		checkable[n] = true
	}
	for _, s := range kernels.All() {
		if !checkable[s.Name] {
			t.Logf("kernel %s has no Go reference in kernels/ref yet", s.Name)
			continue
		}
		sizes := []int{33, 1000}
		if testing.Short() {
			sizes = sizes[:1]
		}
		for _, dt := range s.DTypes {
			for i, n := range sizes {
				seed := int64(17 + i)
				t.Run(fmt.Sprintf("%s/%s/%d", s.Name, dt, n), func(t *testing.T) {
					t.Parallel()
					ranks := 1
					if strings.HasPrefix(s.Name, "p2p_") || strings.Contains(s.Name, "multimem") {
						ranks = 3 + i
					}
					// Weak mode buffers stores to other GPUs' and symmetric memory only: ref.Run
					// refuses it for a single-GPU kernel, whose check it would not exercise.
					weak := i == 1 && !ref.SingleGPU(s.Name)
					if _, err := ref.Run(ref.Problem{Kernel: s.Name, DType: dt, Size: n, Seed: seed, Weak: weak, Ranks: ranks}); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}
