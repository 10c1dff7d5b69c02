package ops

import (
	"context"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
)

// TestProbe10SwiGLURows: hostile row counts and Rows tensors. A count below 0 computes no
// row, one past the rows computes them all (nothing past out is written); Rows freed,
// overlapping out, 2-D, or a cancelled context is an error naming it.
func TestProbe10SwiGLURows(t *testing.T) {
	ctx := context.Background()
	d := emuDevice(t)
	const rows, f = 3, 8
	gu := make([]float64, rows*2*f)
	for i := range gu {
		gu[i] = 1
	}
	gb := upload[fp.BF16](t, d, gu)
	in, _ := New(gb, rows, 2*f)
	for _, c := range []struct {
		count int32
		want  int
	}{{-5, 0}, {-1 << 31, 0}, {1000, rows}, {1<<31 - 1, rows}, {2, 2}} {
		init := make([]float64, rows*f+8) // 8 guard elements past out
		for i := range init {
			init[i] = 7
		}
		ob := upload[fp.BF16](t, d, init)
		whole, _ := New(ob, rows*f+8)
		head, _ := whole.Narrow(0, 0, rows*f)
		out, _ := head.View(rows, f)
		cb := uploadInts(t, d, []int32{c.count})
		cnt, _ := New(cb, 1)
		if err := SwiGLU(ctx, nil, out, in, &SwiGLUOptions{Rows: cnt}); err != nil {
			t.Fatalf("count %d: %v", c.count, err)
		}
		got := download(t, ob)
		for i, v := range got {
			computed := i < c.want*f
			if computed && (v < 0.72 || v > 0.74) || !computed && v != 7 {
				t.Fatalf("count %d: element %d = %v (computed rows %d; want silu(1)=0.731 there, 7 elsewhere)", c.count, i, v, c.want)
			}
		}
	}

	ob := upload[fp.BF16](t, d, make([]float64, rows*f))
	out, _ := New(ob, rows, f)
	freed := uploadInts(t, d, []int32{1})
	fr, _ := New(freed, 1)
	if err := freed.Free(); err != nil {
		t.Fatal(err)
	}
	sq := uploadInts(t, d, []int32{1})
	sq2, _ := New(sq, 1, 1)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"freed Rows", SwiGLU(ctx, nil, out, in, &SwiGLUOptions{Rows: fr}), "Rows"},
		{"2-D Rows", SwiGLU(ctx, nil, out, in, &SwiGLUOptions{Rows: sq2}), "Rows has shape [1 1]; want [1]"},
		{"cancelled", SwiGLU(cancelled, nil, out, in, nil), "canceled"},
		{"out is gateUp", SwiGLU(ctx, nil, mustView(t, in, rows, 2*f), in, nil), "out has shape"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v; want an error containing %q", c.name, c.err, c.want)
		}
	}
}

func mustView[T jit.Elem](t *testing.T, x Tensor[T], shape ...int) Tensor[T] {
	t.Helper()
	v, err := x.View(shape...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
