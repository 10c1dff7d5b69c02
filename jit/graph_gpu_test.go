//go:build cuda && cgo

package jit

import "testing"

// TestGPUGraphReplay runs the emulator's graph program on GPU 0: 3 captured launches
// replayed 1000 times, SetLaunchArgs/SetArgs on nodes read back from the capture, a second
// executable with the captured arguments; every element checked.
func TestGPUGraphReplay(t *testing.T) {
	d := openGPUOrSkip(t, 0, WithCache(NewCache(t.TempDir())))
	defer d.Close()
	if err := graphProgram(d, bumpKernel(t), 1000); err != nil {
		t.Fatal(err)
	}
}
