package jit

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// TestStartup: 2 emulated ranks initialise NVSHMEM, load a module and launch twice; each
// rank's Startup accounts for the open, the init, one load and the first launch, and
// $KGEN_STARTUP prints one line per rank.
func TestStartup(t *testing.T) {
	mod := bumpKernel(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	t.Setenv(StartupEnv, "1")
	got := make([]Startup, 2)
	err = RunRanks(RanksOptions{Backend: Emulator, World: 2, NVSHMEM: true}, func(rk *Rank) error {
		if s := rk.Device.Startup(); s.FirstLaunch != 0 || s.Init <= 0 || s.Loads != 0 {
			t.Errorf("rank %d before any launch: %+v", rk.Rank, s)
		}
		m, err := rk.Device.Load(Source{Module: mod})
		if err != nil {
			return err
		}
		fn, _ := m.Function("bump")
		buf, err := Alloc[uint32](rk.Device, 1)
		if err != nil {
			return err
		}
		time.Sleep(2 * time.Millisecond)
		for i := 0; i < 2; i++ {
			if err := fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(1)}, buf, uint32(1), uint32(1)); err != nil {
				return err
			}
		}
		got[rk.Rank] = rk.Device.Startup()
		return nil
	})
	os.Stderr = stderr
	w.Close()
	var out bytes.Buffer
	out.ReadFrom(r)
	if err != nil {
		t.Fatal(err)
	}
	for rank, s := range got {
		if s.Label != "rank "+string(rune('0'+rank)) || s.Loads != 1 || s.Init <= 0 || s.Load <= 0 || s.FirstLaunch < 2*time.Millisecond || s.FirstLaunch < s.Init {
			t.Errorf("rank %d: %+v", rank, s)
		}
		if !strings.Contains(out.String(), "kgen: rank "+string(rune('0'+rank))+": first launch ") {
			t.Errorf("stderr lacks rank %d's line:\n%s", rank, out.String())
		}
	}
	if n := strings.Count(out.String(), "first launch"); n != 2 {
		t.Errorf("%d startup lines, want 2 (one per rank, at the first launch only):\n%s", n, out.String())
	}
	t.Log(strings.TrimSpace(out.String()))
}
