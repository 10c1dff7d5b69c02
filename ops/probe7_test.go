package ops

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
)

// TestProbe7HostileViews: views with overflowing or negative extents, strides and offsets,
// and ops on outputs that overlap themselves (a zero stride) or their inputs, are errors
// naming the operand, never a panic or a silent run.
func TestProbe7HostileViews(t *testing.T) {
	d, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	buf, err := jit.Alloc[float32](d, 256)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := New(buf, 16, 16)
	ctx := context.Background()
	out2, _ := jit.Alloc[float32](d, 256)
	o, _ := New(out2, 16, 16)
	hbuf, _ := jit.Alloc[fp.F16](d, 512)
	ha, _ := New(hbuf, 16, 16)
	hb, _ := Strided(hbuf, 256, []int{16, 16}, []int{16, 1})
	for _, tc := range []struct {
		name string
		f    func() error
		want string
	}{
		{"New overflow", func() error { _, err := New(buf, math.MaxInt, 2); return err }, "shape"},
		{"New negative", func() error { _, err := New(buf, -16, -16); return err }, "-16"},
		{"New too big", func() error { _, err := New(buf, 16, 17); return err }, "reach element 271; the buffer holds 256"},
		{"Strided huge stride", func() error { _, err := Strided(buf, 0, []int{2, 2}, []int{1, math.MaxInt}); return err }, "stride"},
		{"Strided overflowing product", func() error {
			_, err := Strided(buf, 0, []int{1 << 32, 1 << 32}, []int{1 << 31, 1 << 31})
			return err
		}, ""},
		{"Strided negative stride", func() error { _, err := Strided(buf, 255, []int{16}, []int{-1}); return err }, "-1"},
		{"Strided offset MaxInt", func() error { _, err := Strided(buf, math.MaxInt, []int{1}, []int{1}); return err }, "offset"},
		{"Strided offset -1", func() error { _, err := Strided(buf, -1, []int{1}, []int{1}); return err }, "offset"},
		{"Strided rank mismatch", func() error { _, err := Strided(buf, 0, []int{2, 2}, []int{1}); return err }, "strides"},
		{"Strided rank 0", func() error { _, err := Strided(buf, 0, nil, nil); return err }, ""},
		{"Narrow overflow", func() error { _, err := x.Narrow(0, math.MaxInt, 2); return err }, ""},
		{"Narrow negative length", func() error { _, err := x.Narrow(0, 2, -1); return err }, ""},
		{"Slice dim -1", func() error { _, err := x.Slice(-1, 0, 1); return err }, "-1"},
		{"Slice end before start", func() error { _, err := x.Slice(0, 5, 3); return err }, ""},
		{"View overflow", func() error { _, err := x.View(1<<32, 1<<32); return err }, ""},
		{"View of a transposed", func() error { tr, _ := x.Transpose(); _, err := tr.View(256); return err }, "contiguous"},
		{"Add into a zero-stride out", func() error {
			bc, err := Strided(out2, 0, []int{16, 16}, []int{0, 1})
			if err != nil {
				return fmt.Errorf("making the view: %w", err)
			}
			return Add(ctx, nil, bc, x, x)
		}, "out"},
		{"Transpose into a zero-stride out", func() error {
			bc, err := Strided(out2, 0, []int{16, 16}, []int{0, 1})
			if err != nil {
				return fmt.Errorf("making the view: %w", err)
			}
			return Transpose(ctx, nil, bc, x)
		}, "out"},
		{"Softmax into a zero-stride out", func() error {
			bc, err := Strided(out2, 0, []int{16, 16}, []int{16, 0})
			if err != nil {
				return fmt.Errorf("making the view: %w", err)
			}
			return Softmax(ctx, nil, bc, x)
		}, "out"},
		{"RowSum into a zero-stride out", func() error {
			bc, err := Strided(out2, 0, []int{16}, []int{0})
			if err != nil {
				return fmt.Errorf("making the view: %w", err)
			}
			return RowSum(ctx, nil, bc, x)
		}, "out"},
		{"Matmul into a zero-stride D", func() error {
			bc, err := Strided(out2, 0, []int{16, 16}, []int{0, 1})
			if err != nil {
				return fmt.Errorf("making the view: %w", err)
			}
			return Matmul(ctx, nil, bc, ha, hb, nil)
		}, "D"},
		{"Matmul from a zero-stride A", func() error {
			bc, err := Strided(hbuf, 0, []int{16, 16}, []int{0, 1})
			if err != nil {
				return fmt.Errorf("making the view: %w", err)
			}
			return Matmul(ctx, nil, o, bc, hb, nil)
		}, "A (neither row- nor column-major: no unit stride whose rows or columns lie apart"},
		{"Transpose in place", func() error { return Transpose(ctx, nil, x, x) }, "overlap"},
		{"Add shapes differ", func() error { y, _ := New(out2, 8, 32); return Add(ctx, nil, o, x, y) }, "shape"},
		{"Add ended context", func() error {
			c, cancel := context.WithCancel(ctx)
			cancel()
			return Add(c, nil, o, x, x)
		}, "cancel"},
		{"Add zero tensor", func() error { return Add(ctx, nil, o, Tensor[float32]{}, x) }, ""},
	} {
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
				}
			}()
			err = tc.f()
		}()
		if err == nil || strings.HasPrefix(err.Error(), "panic") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", tc.name, err, tc.want)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
}
