package jit

import (
	"strings"
	"testing"
)

// TestProbe16InitNVSHMEMUnusableDevice: InitNVSHMEM on a closed, nil or zero Device is an error
// naming it. Before, a closed emulator device initialised NVSHMEM and its Malloc succeeded
// (only Finalize said the device was closed), a zero Device read "the  backend has no
// NVSHMEM host support" and a nil one panicked (nil pointer); probe 16.
func TestProbe16InitNVSHMEMUnusableDevice(t *testing.T) {
	closed, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		d    *Device
		want string
	}{
		{"closed", closed, "InitNVSHMEM: emu device 0"},
		{"nil", nil, "InitNVSHMEM on a nil *Device"},
		{"zero", &Device{}, "InitNVSHMEM on a zero Device, not opened"},
	} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: InitNVSHMEM panicked: %v", c.name, r)
				}
			}()
			rv := &Rendezvous{Rank: 0, WorldSize: 1, Addr: "127.0.0.1:1"}
			s, err := InitNVSHMEM(c.d, InitOptions{Rendezvous: rv})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: InitNVSHMEM: %v, %v; want an error holding %q", c.name, s, err, c.want)
			}
			if c.name == "closed" && (err == nil || !strings.Contains(err.Error(), "closed")) {
				t.Errorf("closed: %v; want it to say closed", err)
			}
		}()
	}
}

// TestProbe16RanksOutOfRange: torchrun's variables and KGEN_EMU_SEED past an int's range are
// refused saying so (they read "is not a non-negative integer" of 99999999999999999999, and
// KGEN_EMU_SEED "want a decimal integer"); RanksOptions.Nodes and World below 0 are refused
// on the GPU path (they were ignored, where the emulator refuses them), and a Nodes whose
// product with LOCAL_WORLD_SIZE wraps to WORLD_SIZE (2^62+1 nodes of 4) no longer passes
// the check; probe 16.
func TestProbe16RanksOutOfRange(t *testing.T) {
	for _, k := range rendezvousEnv {
		t.Setenv(k, "")
	}
	const huge = "99999999999999999999"
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"RANK": huge, "WORLD_SIZE": "2"}, `RANK="99999999999999999999" is not a non-negative integer (out of an int's range)`},
		{map[string]string{"RANK": "0", "WORLD_SIZE": huge}, `WORLD_SIZE="99999999999999999999" is not a non-negative integer (out of an int's range)`},
		{map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "-" + huge}, `LOCAL_RANK="-99999999999999999999" is not a non-negative integer (out of an int's range)`},
	} {
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		if _, err := RendezvousFromEnv(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("RendezvousFromEnv with %v: %v; want %q", c.env, err, c.want)
		}
		for k := range c.env {
			t.Setenv(k, "")
		}
	}
	rv := Rendezvous{Rank: 1, WorldSize: 4, LocalRank: 1}
	for _, c := range []struct {
		nodes      int
		local, grp string
		want       string
	}{
		{-1, "", "", "RanksOptions.Nodes -1"},
		{1<<62 + 1, "4", "", "RunRanks wants 4611686018427387905 nodes, but WORLD_SIZE=4 with LOCAL_WORLD_SIZE=4 makes 1"},
		{3, "3", "", "RunRanks wants 3 nodes, but WORLD_SIZE=4 with LOCAL_WORLD_SIZE=3 makes 1"},
		{0, "", huge, `GROUP_RANK="99999999999999999999" is not a non-negative integer (out of an int's range)`},
		{0, huge, "", `LOCAL_WORLD_SIZE="99999999999999999999" is not a positive integer (out of an int's range)`},
	} {
		t.Setenv("LOCAL_WORLD_SIZE", c.local)
		t.Setenv("GROUP_RANK", c.grp)
		if n, err := gpuNode(c.nodes, rv); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("gpuNode(%d) with LOCAL_WORLD_SIZE=%q GROUP_RANK=%q: %d, %v; want %q", c.nodes, c.local, c.grp, n, err, c.want)
		}
	}
	t.Setenv("LOCAL_WORLD_SIZE", "2")
	t.Setenv("GROUP_RANK", "")
	if n, err := gpuNode(2, rv); n != 0 || err != nil {
		t.Errorf("gpuNode(2) of rank 1 of 4, 2 a node: %d, %v; want node 0", n, err)
	}
	t.Setenv("LOCAL_WORLD_SIZE", "")
	ran := false
	err := RunRanks(RanksOptions{Backend: GPU, World: -1}, func(*Rank) error { ran = true; return nil })
	if err == nil || !strings.Contains(err.Error(), "RanksOptions.World -1") || ran {
		t.Errorf("RunRanks on GPUs with World -1: %v (ran %v); want an error naming RanksOptions.World", err, ran)
	}
	t.Setenv("KGEN_EMU_SEED", huge)
	if d, err := OpenBackend(Emulator, 0); err == nil || !strings.Contains(err.Error(), "(out of an int's range)") {
		if err == nil {
			d.Close()
		}
		t.Errorf("KGEN_EMU_SEED=%s: %v; want it called out of range", huge, err)
	}
}
