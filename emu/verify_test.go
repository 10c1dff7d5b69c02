package emu_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// TestLaunchRefusesUnverifiedModule: a module ptxas would refuse (here bar.sync with a
// thread count that is not a multiple of 32, which ptx.Parse reads) is refused by Launch,
// Start and Load, as a GPU's loader would refuse it, instead of running.
func TestLaunchRefusesUnverifiedModule(t *testing.T) {
	m, err := ptx.Parse(`.version 8.0
.target sm_90
.address_size 64
.visible .entry k()
{
	bar.sync 1, 48;
	ret;
}
`)
	if err != nil {
		t.Fatal(err)
	}
	if ptx.Verify(m) == nil {
		t.Fatal("the test's module passes ptx.Verify")
	}
	s, err := emu.New(1)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "ptx.Verify") || !strings.Contains(err.Error(), "multiple of 32") {
			t.Errorf("%s: got %v, want the module's ptx.Verify error", what, err)
		}
	}
	check("Load", s.Load(m))
	check("Launch", s.Launch(emu.Launch{Module: m, Entry: "k", Grid: emu.D1(1), Block: emu.D1(64)}))
	_, err = s.Start(emu.Launch{Module: m, Entry: "k", Grid: emu.D1(1), Block: emu.D1(64)})
	check("Start", err)
}
