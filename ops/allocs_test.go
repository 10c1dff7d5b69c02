package ops

import (
	"context"
	"testing"

	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
)

// TestCallAllocs bounds the Go allocations of an op call whose plan and arguments are cached
// (the emulator, the stream capturing: what is counted is ops' and jit's host side). The
// bounds are what the calls take now: jit's Launch of the same kernel with its arguments
// boxed once takes as many (BenchmarkHostCost*), so ops adds none.
func TestCallAllocs(t *testing.T) {
	d, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	f32, _ := jit.Alloc[float32](d, 8*32)
	dense, _ := New(f32, 8, 32)
	view, _ := Strided(f32, 0, []int{8, 24}, []int{32, 1})
	vec, _ := New(f32, 256)
	bf, _ := jit.Alloc[fp.BF16](d, 64*64)
	x, _ := New(bf, 64, 64)
	bfD, _ := jit.Alloc[fp.BF16](d, 64*64)
	y, _ := New(bfD, 64, 64) // D apart from A and B
	bias, _ := New(f32, 64)
	epi := &MatmulOptions[fp.BF16]{Alpha: 1, Bias: bias, Act: kernels.ReLU}
	cases := []struct {
		name string
		max  float64
		call func() error
	}{
		{"Softmax", 7, func() error { return Softmax(ctx, s, dense, dense) }},
		{"Softmax view", 9, func() error { return Softmax(ctx, s, view, view) }},
		{"Add", 6, func() error { return Add(ctx, s, vec, vec, vec) }},
		{"Matmul", 13, func() error { return Matmul(ctx, s, y, x, x, nil) }},
		// 64 x 64 tiles with an epilogue store D with TMA (kernels.GemmSM90Config.WithEpilogue):
		// D's tensor map is one argument more than the register store's.
		{"Matmul epilogue", 14, func() error { return Matmul(ctx, s, y, x, x, epi) }},
	}
	for _, c := range cases {
		if err := c.call(); err != nil { // the plan and the arguments
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if g, err := s.EndCapture(); err == nil {
			g.Close()
		}
	}()
	for _, c := range cases {
		var err error
		n := testing.AllocsPerRun(100, func() {
			if e := c.call(); e != nil {
				err = e
			}
		})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		t.Logf("%s: %.1f allocations a call", c.name, n)
		if n > c.max {
			t.Errorf("%s: %.1f allocations a call; want at most %.0f", c.name, n, c.max)
		}
	}
}
