package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestLibOnEmulator runs gpubench lib on the emulator with every shape divided by 65536:
// every case must pass its check against the host reference and print its timing line.
func TestLibOnEmulator(t *testing.T) {
	t.Setenv("KGEN_BACKEND", "emu")
	var out bytes.Buffer
	if err := lib(&out, []string{"-div", "65536", "-reps", "1"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range libCases() {
		c.dims[0] = max(1, c.dims[0]/65536)
		want := fmt.Sprintf("kgen\t%s\t%s\t%s\t", c.kernel, c.dt, c.shape())
		if !strings.Contains(out.String(), want) {
			t.Errorf("no line for %s %s %s in:\n%s", c.kernel, c.dt, c.shape(), out.String())
		}
	}
	if n := strings.Count(out.String(), "memcpy\t"); n != 5 {
		t.Errorf("%d memcpy lines, want 5", n)
	}
}
