package main

import (
	"testing"

	"github.com/kgen-dev/kgen/jit"
)

// TestGraphBenchOnEmulator runs the graph measurement on the emulator: graphs of 1 and 8
// launches replayed 20 times, every element checked against the launches made.
func TestGraphBenchOnEmulator(t *testing.T) {
	d, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := graphBench(d, 20); err != nil {
		t.Fatal(err)
	}
}

// TestFiveBuilds: the 5-call kernel declares exactly 5 NVSHMEM functions.
func TestFiveBuilds(t *testing.T) {
	m, err := five()
	if err != nil {
		t.Fatal(err)
	}
	if c := calls(m); len(c) != 5 {
		t.Fatalf("five_calls calls %d NVSHMEM functions: %v", len(c), c)
	}
}
