package jit

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/emu"
)

// TestProbe9SharedLimit: dynamic shared memory of -1, one byte past the device's per-block
// limit, or 2^31 is refused naming the size and the limit; the limit itself is taken
// (nothing found).
func TestProbe9SharedLimit(t *testing.T) {
	d, fn, buf := emuBump(t)
	limit := emu.MaxSharedBytes
	for _, n := range []int{-1, limit + 1, 1 << 31} {
		err := safely(func() error {
			return fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(4), SharedMem: n}, buf, uint32(4), uint32(1))
		})
		if err == nil || !strings.Contains(err.Error(), "shared") || strings.HasPrefix(err.Error(), "panic") {
			t.Errorf("SharedMem %d: %v; want an error naming shared memory", n, err)
		}
	}
	if err := fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(4), SharedMem: limit}, buf, uint32(4), uint32(1)); err != nil {
		t.Errorf("SharedMem %d (the limit): %v", limit, err)
	}
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
}
