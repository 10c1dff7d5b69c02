package fp

import (
	"math"
	"testing"
)

// TestFP8 checks every code of both formats: decoding and encoding round-trips, the
// midpoint between neighbours rounds to the even code, and the known extremes.
func TestFP8(t *testing.T) {
	for _, c := range []struct {
		name string
		enc  func(float64) (uint8, bool)
		dec  func(uint8) float64
		max  float64
		minS float64 // smallest subnormal
	}{
		{"e4m3", F64ToE4M3, E4M3ToF64, 448, 0x1p-9},
		{"e5m2", F64ToE5M2, E5M2ToF64, 57344, 0x1p-16},
	} {
		t.Run(c.name, func(t *testing.T) {
			var finite []uint8 // positive finite codes in increasing order
			for b := 0; b < 256; b++ {
				v := c.dec(uint8(b))
				if math.IsNaN(v) {
					continue
				}
				got, ok := c.enc(v)
				if !ok || got != uint8(b) {
					t.Errorf("%#02x = %v encodes as %#02x, %v", b, v, got, ok)
				}
				if b < 0x80 && !math.IsInf(v, 0) {
					finite = append(finite, uint8(b))
				}
			}
			for i := 0; i+1 < len(finite); i++ {
				lo, hi := c.dec(finite[i]), c.dec(finite[i+1])
				if !(lo < hi) {
					t.Fatalf("codes %#02x, %#02x not increasing", finite[i], finite[i+1])
				}
				want := finite[i]
				if want&1 != 0 {
					want = finite[i+1]
				}
				if got, _ := c.enc((lo + hi) / 2); got != want {
					t.Errorf("midpoint of %v and %v: %#02x, want %#02x", lo, hi, got, want)
				}
				if got, _ := c.enc(-(lo + hi) / 2); got != want|0x80 {
					t.Errorf("midpoint of -%v and -%v: %#02x, want %#02x", lo, hi, got, want|0x80)
				}
			}
			if m := c.dec(finite[len(finite)-1]); m != c.max {
				t.Errorf("largest finite %v, want %v", m, c.max)
			}
			if s := c.dec(1); s != c.minS {
				t.Errorf("smallest subnormal %v, want %v", s, c.minS)
			}
			if _, ok := c.enc(c.max * 1.2); ok {
				t.Errorf("%v did not overflow", c.max*1.2)
			}
			if b, ok := c.enc(c.minS / 2); !ok || b != 0 {
				t.Errorf("half the smallest subnormal: %#02x, %v; want 0 (ties to even)", b, ok)
			}
			if b, _ := c.enc(math.NaN()); !math.IsNaN(c.dec(b)) {
				t.Errorf("NaN encodes as %#02x", b)
			}
		})
	}
	if b, ok := F64ToE4M3(math.Inf(1)); ok || !math.IsNaN(E4M3ToF64(b)) {
		t.Errorf("e4m3 +Inf: %#02x, %v", b, ok)
	}
	if b, ok := F64ToE5M2(math.Inf(-1)); !ok || b != 0xfc {
		t.Errorf("e5m2 -Inf: %#02x, %v", b, ok)
	}
	if b, _ := F64ToE4M3(1); b != 0x38 {
		t.Errorf("e4m3 1.0 = %#02x, want 0x38", b)
	}
	if b, _ := F64ToE5M2(1); b != 0x3c {
		t.Errorf("e5m2 1.0 = %#02x, want 0x3c", b)
	}
}
