//go:build cuda && cgo

package jit

import "testing"

// TestGPUSemantics runs the special-value cases on GPU 0 and logs every result (SEM lines,
// for docs/facts.md).
func TestGPUSemantics(t *testing.T) {
	d := openGPUOrSkip(t, 0)
	defer d.Close()
	for _, c := range semCases {
		got, err := runSem(d, c)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		for i, g := range got {
			t.Logf("SEM %-18s %#x -> %#x", c.name, c.in[i], g)
		}
	}
	checkSem(t, d)
}
