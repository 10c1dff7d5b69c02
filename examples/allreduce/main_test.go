package main

import (
	"testing"

	"github.com/kgen-dev/kgen/jit"
)

// TestTrain runs the example's ranks on simulated GPUs (with NVLink multicast and without).
func TestTrain(t *testing.T) {
	for _, world := range []int{1, 2, 4} {
		if err := jit.RunRanks(jit.RanksOptions{Backend: jit.Emulator, World: world, NVSHMEM: true}, func(r *jit.Rank) error {
			return train(r, 3000, 4)
		}); err != nil {
			t.Fatalf("%d ranks: %v", world, err)
		}
	}
	t.Setenv("NVSHMEM_DISABLE_NVLS", "1") // peer-to-peer all-reduce
	if err := jit.RunRanks(jit.RanksOptions{Backend: jit.Emulator, World: 3, NVSHMEM: true}, func(r *jit.Rank) error {
		return train(r, 1000, 3)
	}); err != nil {
		t.Fatal(err)
	}
}
