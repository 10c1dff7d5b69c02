package ops

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/jit"
)

// TestProbe13NarrowView: Narrow's refusals name Narrow and the length given (they came from
// Slice: "ops: Slice: [4, 12) along dimension 0 of extent 8", an end the caller never
// gave, and "ops: Slice: dimension 5 of a rank-2 tensor"), and View of the zero Tensor
// says it is the zero Tensor (it read "shape [], strides [] is not contiguous"); probe 13.
func TestProbe13NarrowView(t *testing.T) {
	d := emuDevice(t)
	buf, err := jit.Alloc[float32](d, 64)
	if err != nil {
		t.Fatal(err)
	}
	x, err := New(buf, 8, 8)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dim, start, length int
		want               string
	}{
		{0, 4, 8, "ops: Narrow: length 8 from 4 along dimension 0 of extent 8"},
		{1, -1, 2, "ops: Narrow: length 2 from -1 along dimension 1"},
		{5, 0, 2, "ops: Narrow: dimension 5 of a rank-2 tensor"},
		{-1, 0, 2, "ops: Narrow: dimension -1"},
	} {
		_, err := x.Narrow(c.dim, c.start, c.length)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "Slice") {
			t.Errorf("Narrow(%d, %d, %d): %v; want an error holding %q", c.dim, c.start, c.length, err, c.want)
		}
	}
	if v, err := x.Narrow(1, 2, 6); err != nil || v.Dim(1) != 6 || v.Offset() != 2 {
		t.Errorf("Narrow(1, 2, 6) = %v (dim %d, offset %d), %v", v.Shape(), v.Dim(1), v.Offset(), err)
	}
	var z Tensor[float32]
	if _, err := z.View(1); err == nil || !strings.Contains(err.Error(), "zero Tensor") {
		t.Errorf("View of the zero Tensor: %v; want an error naming the zero Tensor", err)
	}
}
