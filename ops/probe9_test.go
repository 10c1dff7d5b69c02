package ops

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
)

// probe9Call runs f, failing on a panic or after a minute, and returns its error.
func probe9Call(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("PANIC %v", p)
			}
		}()
		done <- f()
	}()
	select {
	case err := <-done:
		if err != nil && strings.HasPrefix(err.Error(), "PANIC") {
			t.Fatalf("%s: %v", what, err)
		}
		if err != nil && len(err.Error()) > 600 {
			t.Errorf("%s: error of %d bytes", what, len(err.Error()))
		}
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s: no answer in a minute", what)
		return nil
	}
}

// TestProbe9MatmulOptions: epilogue operands of the wrong shape, stride or device, a scale
// without its partner, C of the wrong shape, tensors of a closed device and empty shapes
// are errors naming the operand. An operand of another Device of the same GPU (a second
// Open, since closed) was said to live on "kgen emulator (GPU 0 of 1), the other operands
// on kgen emulator (GPU 0 of 1)": the message now says they are two Devices.
func TestProbe9MatmulOptions(t *testing.T) {
	d := emuDevice(t)
	const m, n, k = 64, 64, 64
	mk := func(t *testing.T, dev *jit.Device, shape ...int) Tensor[fp.BF16] {
		size := 1
		for _, e := range shape {
			size *= e
		}
		x, err := New(upload[fp.BF16](t, dev, make([]float64, max(size, 1))), shape...)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	vec := func(t *testing.T, dev *jit.Device, shape ...int) Tensor[float32] {
		size := 1
		for _, e := range shape {
			size *= e
		}
		x, err := New(upload[float32](t, dev, make([]float64, max(size, 1))), shape...)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	a, b, out := mk(t, d, m, k), mk(t, d, k, n), mk(t, d, m, n)
	strided, err := Strided(upload[float32](t, d, make([]float64, 2*n)), 0, []int{n}, []int{2})
	if err != nil {
		t.Fatal(err)
	}
	other, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	foreignBias := vec(t, other, n)
	foreignA := mk(t, other, m, k)
	other.Close()
	ctx := context.Background()
	for _, c := range []struct {
		name string
		o    *MatmulOptions[fp.BF16]
		a    Tensor[fp.BF16]
		want []string
	}{
		{"bias N+8", &MatmulOptions[fp.BF16]{Alpha: 1, Bias: vec(t, d, n+8)}, a, []string{"Bias"}},
		{"bias N-8", &MatmulOptions[fp.BF16]{Alpha: 1, Bias: vec(t, d, n-8)}, a, []string{"Bias"}},
		{"bias 2-D", &MatmulOptions[fp.BF16]{Alpha: 1, Bias: vec(t, d, 1, n)}, a, []string{"Bias"}},
		{"bias strided", &MatmulOptions[fp.BF16]{Alpha: 1, Bias: strided}, a, []string{"Bias"}},
		{"bias of a closed device", &MatmulOptions[fp.BF16]{Alpha: 1, Bias: foreignBias}, a, []string{"Bias lives on another *jit.Device", "a second Open of that GPU, or one since closed"}},
		{"residual transposed shape", &MatmulOptions[fp.BF16]{Alpha: 1, Residual: mk(t, d, n*2, m/2)}, a, []string{"Residual"}},
		{"residual 3-D", &MatmulOptions[fp.BF16]{Alpha: 1, Residual: mk(t, d, 1, m, n)}, a, []string{"Residual"}},
		{"ScaleA alone", &MatmulOptions[fp.BF16]{Alpha: 1, ScaleA: vec(t, d, m)}, a, []string{"Scale"}},
		{"ScaleB wrong length", &MatmulOptions[fp.BF16]{Alpha: 1, ScaleA: vec(t, d, m), ScaleB: vec(t, d, n+1)}, a, []string{"Scale"}},
		{"C wrong shape", &MatmulOptions[fp.BF16]{Alpha: 1, Beta: 1, C: mk(t, d, m, n+8)}, a, []string{"C"}},
		{"C unset with Beta", &MatmulOptions[fp.BF16]{Alpha: 1, Beta: 1}, a, []string{"C"}},
		{"A of a closed device", nil, foreignA, []string{"A lives on another *jit.Device"}},
		{"bad activation", &MatmulOptions[fp.BF16]{Alpha: 1, Act: kernels.Activation(99)}, a, []string{"99"}},
		{"target nonsense", &MatmulOptions[fp.BF16]{Alpha: 1, Target: "sm_1"}, a, []string{"sm_1"}},
	} {
		err := probe9Call(t, c.name, func() error { return Matmul(ctx, nil, out, c.a, b, c.o) })
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v; want it to name %q", c.name, err, w)
			}
		}
	}
	// Empty shapes never reach an op: New refuses an extent of 0.
	if _, err := New(upload[fp.BF16](t, d, make([]float64, 8)), 0, 8); err == nil || !strings.Contains(err.Error(), "extent 0") {
		t.Errorf("New with an extent of 0: %v", err)
	}
}

// TestProbe9GroupedOffsets: GroupedMatmul's offsets of the wrong length, rank, stride or
// device are errors naming offsets (nothing found).
func TestProbe9GroupedOffsets(t *testing.T) {
	d := emuDevice(t)
	const rows, n, k, groups = 64, 64, 64, 2
	a, err := New(upload[fp.BF16](t, d, make([]float64, rows*k)), rows, k)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(upload[fp.BF16](t, d, make([]float64, groups*k*n)), groups, k, n)
	if err != nil {
		t.Fatal(err)
	}
	out, err := New(upload[fp.BF16](t, d, make([]float64, rows*n)), rows, n)
	if err != nil {
		t.Fatal(err)
	}
	ints := func(shape []int, strides []int, v ...int32) Tensor[int32] {
		tt, err := Strided(uploadInts(t, d, v), 0, shape, strides)
		if err != nil {
			t.Fatal(err)
		}
		return tt
	}
	for _, c := range []struct {
		name string
		off  Tensor[int32]
	}{
		{"groups", ints([]int{2}, []int{1}, 0, 64)},
		{"groups+2", ints([]int{4}, []int{1}, 0, 32, 64, 64)},
		{"2-D", ints([]int{1, 3}, []int{3, 1}, 0, 32, 64)},
		{"strided", ints([]int{3}, []int{2}, 0, 0, 32, 0, 64, 0)},
		{"zero", Tensor[int32]{}},
	} {
		err := probe9Call(t, c.name, func() error { return GroupedMatmul(context.Background(), nil, out, a, b, c.off, nil) })
		if err == nil || !strings.Contains(err.Error(), "offsets") {
			t.Errorf("offsets %s: %v; want an error naming offsets", c.name, err)
		}
	}
}
