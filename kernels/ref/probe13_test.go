package ref

import (
	"math"
	"strings"
	"testing"
)

// TestProbe13RefShapes: the exported float64 references given inputs that do not match
// their shapes return an error (AttentionOut.Err) or nil results instead of panicking.
// Before: AttentionRef of a short k panicked in one of its goroutines (index out of range:
// the process died, no recover could catch it), AttentionVarLenRef of 0 heads divided by
// zero, and GroupedMatmulRef/MaskedGroupedMatmulRef indexed past short slices (probe 13).
func TestProbe13RefShapes(t *testing.T) {
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v", r)
		}
	}()
	q := make([]float64, 4*4)
	for name, c := range map[string]struct {
		out  AttentionOut
		want string
	}{
		"short k":        {AttentionRef(q, nil, nil, 1, 1, 1, 4, 4, 4, 1, false), "k has 0 values"},
		"short q":        {AttentionRef(q[:3], q, q, 1, 1, 1, 4, 4, 4, 1, false), "q has 3 values"},
		"kvHeads 0":      {AttentionRef(q, q, q, 1, 1, 0, 1, 1, 1, 1, false), "want extents"},
		"heads 3 of 2":   {AttentionRef(q, q, q, 1, 3, 2, 1, 1, 1, 1, false), "not a multiple"},
		"negative seqK":  {AttentionRef(q, q, q, 1, 1, 1, 4, -1, 4, 1, false), "want extents"},
		"huge batch":     {AttentionRef(q, q, q, math.MaxInt, 2, 1, 2, 2, 4, 1, false), "q has 16 values"},
		"varlen heads 0": {AttentionVarLenRef(q, q, q, []int32{0, 4}, []int32{0, 4}, 0, 1, 4, 1, false), "want extents"},
		"varlen v short": {AttentionVarLenRef(q, q, q[:8], []int32{0, 4}, []int32{0, 4}, 1, 1, 4, 1, false), "v has 8 values"},
	} {
		if c.out.Err == nil || !strings.Contains(c.out.Err.Error(), c.want) || c.out.O != nil {
			t.Errorf("%s: Err %v, %d O values; want an error holding %q and no O", name, c.out.Err, len(c.out.O), c.want)
		}
	}
	if d, s := GroupedMatmulRef(nil, nil, nil, []int32{0, 4}, 4, 4, 4, 1, 0, nil, nil); d != nil || s != nil {
		t.Errorf("GroupedMatmulRef of empty operands: %d values", len(d))
	}
	a, b := make([]float64, 16), make([]float64, 16)
	if d, _ := GroupedMatmulRef(a, b, nil, []int32{0, 9}, 4, 4, 4, 1, 0, nil, nil); d != nil {
		t.Errorf("GroupedMatmulRef of rows past m: %d values", len(d))
	}
	if d, _ := MaskedGroupedMatmulRef(a, b, nil, []int32{4, 4}, 4, 4, 4, 4, 1, 0, nil, nil); d != nil {
		t.Errorf("MaskedGroupedMatmulRef of a group past m: %d values", len(d))
	}
	// Matching inputs still compute: a 4x4 identity group.
	for i := 0; i < 4; i++ {
		a[i*4+i], b[i*4+i] = 1, 1
	}
	d, _ := GroupedMatmulRef(a, b, nil, []int32{0, 4}, 4, 4, 4, 1, 0, nil, nil)
	if len(d) != 16 || d[5] != 1 || d[6] != 0 {
		t.Errorf("GroupedMatmulRef of identities = %v", d)
	}
	if r := AttentionRef(q, q, q, 1, 1, 1, 4, 4, 4, 1, false); r.Err != nil || len(r.O) != 16 {
		t.Errorf("AttentionRef of matching inputs: %v, %d O values", r.Err, len(r.O))
	}
}

// TestProbe13DefaultTargetNil: DefaultTarget of a nil Spec is "" (it panicked: nil pointer;
// probe 13).
func TestProbe13DefaultTargetNil(t *testing.T) {
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v", r)
		}
	}()
	if got := DefaultTarget(nil); got != "" {
		t.Errorf("DefaultTarget(nil) = %q", got)
	}
}
