package ops

import (
	"reflect"
	"testing"

	"github.com/kgen-dev/kgen/jit"
)

// TestViews checks the views' shapes, strides, offsets and contiguity.
func TestViews(t *testing.T) {
	d := emuDevice(t)
	buf, err := jit.Alloc[float32](d, 4*6*5)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	x, err := New(buf, 4, 6, 5)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, v Tensor[float32], off int, shape, strides []int, contig bool) {
		t.Helper()
		if v.Offset() != off || !reflect.DeepEqual(v.Shape(), shape) || !reflect.DeepEqual(v.Strides(), strides) || v.IsContiguous() != contig {
			t.Errorf("%s: offset %d shape %v strides %v contiguous %v; want %d %v %v %v", what, v.Offset(), v.Shape(), v.Strides(), v.IsContiguous(), off, shape, strides, contig)
		}
	}
	check("New", x, 0, []int{4, 6, 5}, []int{30, 5, 1}, true)
	s, _ := x.Slice(1, 2, 5)
	check("Slice", s, 10, []int{4, 3, 5}, []int{30, 5, 1}, false)
	r, _ := x.Narrow(0, 1, 2)
	check("Narrow rows", r, 30, []int{2, 6, 5}, []int{30, 5, 1}, true)
	v, _ := r.View(12, 5)
	check("View", v, 30, []int{12, 5}, []int{5, 1}, true)
	tr, _ := v.Transpose()
	check("Transpose", tr, 30, []int{5, 12}, []int{1, 5}, false)
	c, _ := ColMajor(buf, 3, 7)
	check("ColMajor", c, 0, []int{3, 7}, []int{1, 3}, false)
	ct, _ := c.Transpose()
	check("ColMajor^T", ct, 0, []int{7, 3}, []int{3, 1}, true)
	if x.Len() != 120 || x.Rank() != 3 || x.Dim(2) != 5 || x.Stride(0) != 30 || x.Dim(3) != 0 {
		t.Errorf("Len %d Rank %d Dim(2) %d Stride(0) %d Dim(3) %d", x.Len(), x.Rank(), x.Dim(2), x.Stride(0), x.Dim(3))
	}
	if got, want := s.Ptr(), buf.DevPtr().Add(40); got != want {
		t.Errorf("Ptr %#x; want %#x", got, want)
	}
	// Views past the buffer, bad extents and strides.
	for name, err := range map[string]error{
		"rank 0":         func() error { _, err := New(buf); return err }(),
		"rank 5":         func() error { _, err := New(buf, 1, 1, 1, 1, 1); return err }(),
		"zero extent":    func() error { _, err := New(buf, 0, 4); return err }(),
		"negative off":   func() error { _, err := Strided(buf, -1, []int{2}, []int{1}); return err }(),
		"negative str":   func() error { _, err := Strided(buf, 8, []int{2}, []int{-1}); return err }(),
		"past the end":   func() error { _, err := Strided(buf, 100, []int{3, 8}, []int{8, 1}); return err }(),
		"strides count":  func() error { _, err := Strided(buf, 0, []int{3, 8}, []int{8}); return err }(),
		"nil buffer":     func() error { _, err := New[float32](nil, 4); return err }(),
		"empty slice":    func() error { _, err := x.Slice(0, 2, 2); return err }(),
		"bad dim":        func() error { _, err := x.Slice(3, 0, 1); return err }(),
		"narrow length":  func() error { _, err := x.Narrow(0, 0, 0); return err }(),
		"transpose 3-D":  func() error { _, err := x.Transpose(); return err }(),
		"view count":     func() error { _, err := x.View(7, 7); return err }(),
		"view overflows": func() error { _, err := x.View(1<<62, 1<<62); return err }(),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
