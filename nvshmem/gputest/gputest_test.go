package gputest

import (
	"fmt"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// TestEmulator runs every acceptance case on the emulator at 1 to 8 PEs, with and without
// multicast, and with a randomized schedule.
func TestEmulator(t *testing.T) {
	for _, npes := range []int{1, 2, 3, 4, 8} {
		for _, seed := range []int64{0, 7} {
			t.Run(fmt.Sprintf("pes=%d/seed=%d", npes, seed), func(t *testing.T) {
				t.Parallel()
				m, err := NewEmuMachine(npes)
				if err != nil {
					t.Fatal(err)
				}
				m.Options.Seed = seed
				m.Options.Weak = seed != 0
				m.Emu.NoMulticast = seed != 0
				if err := RunAll(m, ptx.SM90, t.Logf); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}
