package main

import (
	"context"
	"testing"
)

// TestRun runs the block end to end (on the emulator without the cuda tag) at an odd token
// count, and refuses bad sizes.
func TestRun(t *testing.T) {
	if err := run(context.Background(), 37, 64, 136, 1); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), 0, 64, 64, 1); err == nil {
		t.Fatal("-tokens 0 accepted")
	}
}
