package ops

import (
	"math"
	"strings"
	"testing"
)

// TestNarrowOverflowMessage: a Narrow whose end overflows says so (before: "length 1 from
// 9223372036854775807: want a length of at least 1", blaming a valid length).
func TestNarrowOverflowMessage(t *testing.T) {
	d := emuDevice(t)
	x, err := New(upload[float32](t, d, make([]float64, 64)), 8, 8)
	if err != nil {
		t.Fatal(err)
	}
	_, err = x.Narrow(0, math.MaxInt, 1)
	if err == nil || !strings.Contains(err.Error(), "the end overflows") || strings.Contains(err.Error(), "at least 1") {
		t.Errorf("Narrow(0, MaxInt, 1) = %v; want an error saying the end overflows", err)
	}
	if _, err := x.Narrow(0, 2, 0); err == nil || !strings.Contains(err.Error(), "length 0 from 2: want a length of at least 1") {
		t.Errorf("Narrow(0, 2, 0) = %v; want the length named", err)
	}
}
