package fp_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/kgen-dev/kgen/fp"
)

// Round to nearest even at each format's halfway points, the edges of range and the
// special values.
func TestRounding(t *testing.T) {
	for _, c := range []struct {
		in   float32
		f16  fp.F16
		bf16 fp.BF16
		e4   fp.E4M3
		e5   fp.E5M2
	}{
		{1, 0x3c00, 0x3f80, 0x38, 0x3c},
		{-2, 0xc000, 0xc000, 0xc0, 0xc0},
		{0, 0, 0, 0, 0},
		{float32(math.Copysign(0, -1)), 0x8000, 0x8000, 0x80, 0x80},
		{1 + 1.0/2048, 0x3c00, 0x3f80, 0x38, 0x3c}, // f16 halfway, ties to even (down)
		{1 + 3.0/2048, 0x3c02, 0x3f80, 0x38, 0x3c}, // f16 halfway, ties to even (up)
		{1 + 1.0/256, 0x3c04, 0x3f80, 0x38, 0x3c},  // bf16 halfway (1 + 2^-8): to even, down
		{1.0625, 0x3c40, 0x3f88, 0x38, 0x3c},       // e4m3 halfway between 1 and 1.125: even is 1
		{448, 0x5f00, 0x43e0, 0x7e, 0x5f},          // e4m3's largest finite
		{65520, 0x7c00, 0x4780, 0x7f, 0x7c},        // f16 overflow; e4m3 NaN; e5m2 rounds to inf
		{float32(math.Inf(1)), 0x7c00, 0x7f80, 0x7f, 0x7c},
	} {
		if got := fp.F16Of(c.in); got != c.f16 {
			t.Errorf("F16Of(%v) = %#x, want %#x", c.in, got, c.f16)
		}
		if got := fp.BF16Of(c.in); got != c.bf16 {
			t.Errorf("BF16Of(%v) = %#x, want %#x", c.in, got, c.bf16)
		}
		if got := fp.E4M3Of(c.in); got != c.e4 {
			t.Errorf("E4M3Of(%v) = %#x, want %#x", c.in, got, c.e4)
		}
		if got := fp.E5M2Of(c.in); got != c.e5 {
			t.Errorf("E5M2Of(%v) = %#x, want %#x", c.in, got, c.e5)
		}
	}
	if fp.InE4M3(465) || !fp.InE4M3(463) || !fp.InE4M3(448) || fp.InE4M3(float32(math.Inf(-1))) || !fp.InE5M2(float32(math.Inf(-1))) || fp.InE5M2(61440) {
		t.Error("InE4M3/InE5M2 disagree with the formats' ranges")
	}
}

// Every value of every format survives a round trip through float32.
func TestRoundTrip(t *testing.T) {
	for b := range 1 << 16 {
		h, bf := fp.F16(b), fp.BF16(b)
		if !fp.IsNaN(h) && fp.F16Of(h.Float32()) != h {
			t.Fatalf("f16 %#x does not round-trip", b)
		}
		if !fp.IsNaN(bf) && fp.BF16Of(bf.Float32()) != bf {
			t.Fatalf("bf16 %#x does not round-trip", b)
		}
	}
	for b := range 1 << 8 {
		e4, e5 := fp.E4M3(b), fp.E5M2(b)
		if !fp.IsNaN(e4) && fp.E4M3Of(e4.Float32()) != e4 {
			t.Fatalf("e4m3 %#x does not round-trip", b)
		}
		if !fp.IsNaN(e5) && fp.E5M2Of(e5.Float32()) != e5 {
			t.Fatalf("e5m2 %#x does not round-trip", b)
		}
	}
}

func TestSlices(t *testing.T) {
	xs := []float32{0.5, -3, 1e-3, 240}
	for i, x := range fp.Float32s(fp.From[fp.BF16](xs)) {
		if want := fp.BF16Of(xs[i]).Float32(); x != want {
			t.Errorf("bf16 slice [%d] = %v, want %v", i, x, want)
		}
	}
	if got := fp.Of[fp.E5M2](-3); got != fp.E5M2Of(-3) {
		t.Errorf("Of[E5M2](-3) = %#x", got)
	}
	if got := fp.Of[fp.F16](0.5); got != 0x3800 {
		t.Errorf("Of[F16](0.5) = %#x, want 0x3800", got)
	}
}

// Host data for an f16 buffer is converted once, both ways.
func ExampleFrom() {
	h := fp.From[fp.F16]([]float32{1, 0.1, 65504})
	fmt.Println(fp.Float32s(h))
	// Output: [1 0.099975586 65504]
}
