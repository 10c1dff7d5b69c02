package main

import (
	"testing"

	"github.com/kgen-dev/kgen/jit"
)

// TestLaunchCostOnEmulator runs every jit series on the emulator (20 launches each): each
// series checks the counter the kernel adds to.
func TestLaunchCostOnEmulator(t *testing.T) {
	d, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := run(d, 20); err != nil {
		t.Fatal(err)
	}
}
