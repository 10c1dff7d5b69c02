package main

import "testing"

// TestRun runs the example end to end (on the emulator without the cuda tag).
func TestRun(t *testing.T) {
	for _, n := range []int{1, 1000, 70_001} {
		if err := run(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := run(0); err == nil {
		t.Fatal("n=0 accepted")
	}
}
