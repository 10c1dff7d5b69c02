package jit

import (
	"strings"
	"testing"
)

// TestRunRanksNilFunction: a nil rank function is an error naming it, on every backend,
// not a panic in each rank's goroutine.
func TestRunRanksNilFunction(t *testing.T) {
	for _, b := range []Backend{Emulator, GPU, ""} {
		err := RunRanks(RanksOptions{Backend: b, World: 2}, nil)
		if err == nil || !strings.Contains(err.Error(), "rank function is nil") {
			t.Errorf("backend %q: err %v, want one naming the nil rank function", b, err)
		}
	}
}

// TestEmuNVSHMEMFree: freeing an NVSHMEM allocation on the emulator (a collective call)
// frees every PE's copy through emu's FreeSymmetric (emu.System.Free refuses symmetric
// addresses).
func TestEmuNVSHMEMFree(t *testing.T) {
	err := RunRanks(RanksOptions{Backend: Emulator, World: 2, NVSHMEM: true}, func(r *Rank) error {
		m, err := r.NVSHMEM.Malloc(256)
		if err != nil {
			return err
		}
		return m.Free()
	})
	if err != nil {
		t.Fatal(err)
	}
}
