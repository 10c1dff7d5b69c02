package jit

import (
	"strings"
	"testing"
)

// TestProbe20NodeMulticastPtrNamed: NodeMulticastPtr of memory outside the symmetric heap
// was refused as "jit: MulticastPtr: address ... is not in a live allocation", naming the
// other method. Probe 20.
func TestProbe20NodeMulticastPtrNamed(t *testing.T) {
	err := RunRanks(RanksOptions{Backend: Emulator, World: 2, NVSHMEM: true}, func(r *Rank) error {
		b, err := Alloc[float32](r.Device, 16) // private, not symmetric
		if err != nil {
			return err
		}
		defer b.Free()
		sh := r.Device.NVSHMEM()
		if _, err := sh.NodeMulticastPtr(b.Ptr()); err == nil || !strings.Contains(err.Error(), "jit: NodeMulticastPtr: address") {
			t.Errorf("NodeMulticastPtr of private memory: %v; want an error naming NodeMulticastPtr", err)
		}
		if _, err := sh.MulticastPtr(b.Ptr()); err == nil || !strings.Contains(err.Error(), "jit: MulticastPtr: address") {
			t.Errorf("MulticastPtr of private memory: %v; want an error naming MulticastPtr", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
