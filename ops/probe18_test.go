package ops

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/jit"
)

// TestProbe18StreamAndClosedErrors: a zero jit.Stream (not made by Device.NewStream) is
// refused as such (it read "the stream belongs to , the operands to kgen emulator"), a
// stream of a second Open of the same GPU is named so (it read "belongs to X, the
// operands to X"), and an op on a closed device says "ops: Softmax:" once (it read "ops:
// Softmax: the device is closed (ops: Softmax: jit: ...)"); probe 18.
func TestProbe18StreamAndClosedErrors(t *testing.T) {
	ctx := context.Background()
	d := emuDevice(t)
	other := emuDevice(t)
	s2, err := other.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	dc, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	mat := func(d *jit.Device) Tensor[float32] {
		b, err := jit.Alloc[float32](d, 16*64)
		if err != nil {
			t.Fatal(err)
		}
		x, err := New(b, 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	x, y := mat(d), mat(d)
	xc, yc := mat(dc), mat(dc)
	if err := Softmax(ctx, nil, yc, xc); err != nil { // a plan cached before the close
		t.Fatal(err)
	}
	if err := dc.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"zero stream", Softmax(ctx, &jit.Stream{}, y, x), "ops: Softmax: the stream is a zero jit.Stream, not made by Device.NewStream"},
		{"second open", Softmax(ctx, s2, y, x), "ops: Softmax: the stream belongs to another *jit.Device than the operands (both kgen emulator"},
		{"closed device", Softmax(ctx, nil, yc, xc), "ops: Softmax: the device is closed (jit: "},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) || strings.Count(c.err.Error(), "ops: ") != 1 {
			t.Errorf("%s: %v; want one error holding %q, prefixed once", c.name, c.err, c.want)
		}
	}
	if err := Softmax(ctx, nil, yc, xc); !errors.Is(err, jit.ErrClosed) {
		t.Errorf("closed device: %v; want an error wrapping jit.ErrClosed", err)
	}
}
