package ref

import (
	"math"
	"testing"
)

// TestProbe19GroupedRefNoGroups: GroupedMatmulRef and MaskedGroupedMatmulRef with no group
// (offs of fewer than two entries, no counts) bound n by no slice, and allocated m*n rows of
// NaN whatever n: an n of 2^31 with two values of A died of a fatal out of memory, which no
// recover catches. No group is an extent below 1 now: nil, nil. Probe 19.
func TestProbe19GroupedRefNoGroups(t *testing.T) {
	a := make([]float64, 2)
	huge := 1 << 40
	for _, c := range []struct {
		name string
		run  func() ([]float64, []float64)
	}{
		{"no offs", func() ([]float64, []float64) { return GroupedMatmulRef(a, nil, nil, nil, 2, huge, 1, 1, 0, nil, nil) }},
		{"one offs", func() ([]float64, []float64) {
			return GroupedMatmulRef(a, nil, nil, []int32{0}, 2, huge, 1, 1, 0, nil, nil)
		}},
		{"scaled", func() ([]float64, []float64) {
			return GroupedMatmulRef(a, nil, nil, []int32{0}, 2, math.MaxInt/2, 1, 1, 0, a, nil)
		}},
		{"masked, no counts", func() ([]float64, []float64) {
			return MaskedGroupedMatmulRef(a, nil, nil, nil, 4, 2, huge, 1, 1, 0, nil, nil)
		}},
	} {
		if d, s := c.run(); d != nil || s != nil {
			t.Errorf("%s: %d and %d values; want nil, nil", c.name, len(d), len(s))
		}
	}
	// One group still computes: [1 2] x [[3]] ... a 2x1 by 1x1 product.
	d, _ := GroupedMatmulRef([]float64{1, 2}, []float64{3}, nil, []int32{0, 2}, 2, 1, 1, 1, 0, nil, nil)
	if len(d) != 2 || d[0] != 3 || d[1] != 6 {
		t.Errorf("one group: %v, want [3 6]", d)
	}
}
