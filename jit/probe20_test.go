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

// TestProbe20StartupEnvChecked: $KGEN_STARTUP took any value but 0, off, false and no as
// on, so a typo ("of", "flase") printed the report silently; other values are an error of
// OpenBackend and RunRanks naming the variable, as $KGEN_EMU_WEAK's are. Probe 20.
func TestProbe20StartupEnvChecked(t *testing.T) {
	for _, v := range []string{"of", "flase", "2"} {
		t.Setenv(StartupEnv, v)
		if d, err := OpenBackend(Emulator, 0); err == nil || !strings.Contains(err.Error(), "jit: KGEN_STARTUP=") {
			if d != nil {
				d.Close()
			}
			t.Errorf("KGEN_STARTUP=%q: OpenBackend: %v; want an error naming the variable", v, err)
		}
		if err := RunRanks(RanksOptions{Backend: Emulator, World: 1}, func(*Rank) error { return nil }); err == nil || !strings.Contains(err.Error(), "jit: KGEN_STARTUP=") {
			t.Errorf("KGEN_STARTUP=%q: RunRanks: %v; want an error naming the variable", v, err)
		}
	}
	for _, v := range []string{"", "0", " OFF ", "1", "Yes"} {
		t.Setenv(StartupEnv, v)
		d, err := OpenBackend(Emulator, 0)
		if err != nil {
			t.Errorf("KGEN_STARTUP=%q: %v", v, err)
			continue
		}
		d.Close()
	}
}
