package jit

import (
	"strings"
	"testing"
)

// TestRunRanksNilFunction: a nil rank function is an error naming it, on every backend,
// not a panic in each rank's goroutine.
func TestRunRanksNilFunction(t *testing.T) {
	for _, b := range []Backend{Emulator, GPU, ""} {
		err := RunRanks(RanksOptions{Backend: b, World: 2}, nil)
		if err == nil || !strings.Contains(err.Error(), "rank function is nil") {
			t.Errorf("backend %q: err %v, want one naming the nil rank function", b, err)
		}
	}
}
