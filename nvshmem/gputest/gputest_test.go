package gputest

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/emu"

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

// TestKnownBugTolerated replays NVSHMEM 3.4.5's nvshmem_double_atomic_swap bug (the old
// value's bits converted by uitofp) on the emulator: RunAll reports it as a known bug and
// passes; any other wrong result still fails.
func TestKnownBugTolerated(t *testing.T) {
	m, err := NewEmuMachine(2)
	if err != nil {
		t.Fatal(err)
	}
	bug := func(wrong bool) emu.ExternFunc {
		return func(c *emu.ExternCall) error {
			a, err := m.Sys.Peer(c.Args[0], int(int32(uint32(c.Args[2]))))
			if err != nil {
				return err
			}
			old, err := c.Atomic(a, 8, func(uint64) uint64 { return c.Args[1] })
			if err != nil {
				return err
			}
			v := float64(old) // uitofp of the bits
			if wrong {
				v *= 2
			}
			c.Rets[0] = math.Float64bits(v)
			return nil
		}
	}
	m.Sys.RegisterExtern("nvshmem_double_atomic_swap", bug(false))
	var notes []string
	if err := RunAll(m, ptx.SM90, func(f string, a ...any) { notes = append(notes, fmt.Sprintf(f, a...)) }); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "known NVSHMEM bug") {
		t.Errorf("no known-bug note in %q", notes)
	}
	m2, _ := NewEmuMachine(2)
	m = m2
	m.Sys.RegisterExtern("nvshmem_double_atomic_swap", bug(true))
	if err := RunAll(m, ptx.SM90, func(string, ...any) {}); err == nil {
		t.Error("a wrong swap result passed")
	}
}
