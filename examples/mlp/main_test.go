package main

import (
	"context"
	"errors"
	"testing"
)

// TestRun runs the block end to end (on the emulator without the cuda tag) at an odd token
// count, and refuses bad sizes.
func TestRun(t *testing.T) {
	if err := run(context.Background(), 37, 64, 136, 1); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][4]int{{0, 64, 64, 1}, {8, 64, 64, -1}, {3037000500, 3037000500, 8, 1}, {100000, 100000, 8, 1}, {1 << 62, 4, 8, 1}} {
		err := run(context.Background(), c[0], c[1], c[2], c[3])
		if !errors.As(err, new(usageError)) {
			t.Errorf("-tokens %d -hidden %d -ff %d -reps %d: %v; want a usage error", c[0], c[1], c[2], c[3], err)
		}
	}
}
