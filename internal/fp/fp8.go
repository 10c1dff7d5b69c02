package fp

import "math"

// fp8 describes an 8-bit float format: 1 sign bit, ebits exponent bits, mbits mantissa bits.
type fp8 struct {
	ebits, mbits int
	bias         int
	max          float64 // largest finite magnitude
	inf          bool    // whether the format has infinities (E5M2) or not (E4M3)
	nan          uint8   // the canonical positive NaN
}

var (
	e4m3 = fp8{ebits: 4, mbits: 3, bias: 7, max: 448, nan: 0x7f}
	e5m2 = fp8{ebits: 5, mbits: 2, bias: 15, max: 57344, inf: true, nan: 0x7e}
)

// F64ToE4M3 rounds f to the OCP FP8 E4M3 format (4 exponent bits, 3 mantissa bits, bias 7,
// no infinities, largest finite 448) to nearest even. ok is false when f is infinite or
// rounds to a magnitude above 448 (E4M3 cannot represent it; the bits are then the NaN that
// cvt without .satfinite would give). NaN gives the canonical NaN 0x7f.
func F64ToE4M3(f float64) (bits uint8, ok bool) { return e4m3.encode(f) }

// F64ToE5M2 rounds f to the OCP FP8 E5M2 format (5 exponent bits, 2 mantissa bits, bias
// 15, IEEE infinities, largest finite 57344) to nearest even. ok is false when a finite f
// rounds to a magnitude above 57344 (the bits are then the infinity of its sign); infinities
// and NaN (0x7e) are representable.
func F64ToE5M2(f float64) (bits uint8, ok bool) { return e5m2.encode(f) }

// E4M3ToF64 returns the value of the E4M3 bits (exact).
func E4M3ToF64(b uint8) float64 { return e4m3.decode(b) }

// E5M2ToF64 returns the value of the E5M2 bits (exact).
func E5M2ToF64(b uint8) float64 { return e5m2.decode(b) }

func (t fp8) encode(f float64) (uint8, bool) {
	sign := uint8(0)
	if math.Signbit(f) {
		sign = 0x80
	}
	a := math.Abs(f)
	switch {
	case math.IsNaN(f):
		return t.nan, true
	case math.IsInf(f, 0):
		if t.inf {
			return sign | t.infBits(), true
		}
		return sign | t.nan, false
	case a == 0:
		return sign, true
	}
	emin := 1 - t.bias // exponent of the smallest normal
	e := emin
	if _, x := math.Frexp(a); x-1 > emin {
		e = x - 1 // a = m * 2^e with 1 <= m < 2
	}
	q := math.Ldexp(1, e-t.mbits) // the spacing of representable values around a
	r := math.RoundToEven(a/q) * q
	if r > t.max {
		if t.inf {
			return sign | t.infBits(), false
		}
		return sign | t.nan, false
	}
	if r < math.Ldexp(1, emin) { // subnormal (or rounded to zero)
		return sign | uint8(r/math.Ldexp(1, emin-t.mbits)), true
	}
	_, x := math.Frexp(r)
	e = x - 1
	m := r/math.Ldexp(1, e-t.mbits) - math.Ldexp(1, t.mbits)
	return sign | uint8(e+t.bias)<<t.mbits | uint8(m), true
}

func (t fp8) infBits() uint8 { return uint8(1<<t.ebits-1) << t.mbits }

func (t fp8) decode(b uint8) float64 {
	s := 1.0
	if b&0x80 != 0 {
		s = -1
	}
	exp := int(b>>t.mbits) & (1<<t.ebits - 1)
	man := float64(b & (1<<t.mbits - 1))
	switch {
	case t.inf && exp == 1<<t.ebits-1:
		if man != 0 {
			return math.NaN()
		}
		return math.Inf(int(s))
	case !t.inf && b&0x7f == 0x7f:
		return math.NaN()
	case exp == 0:
		return s * math.Ldexp(man, 1-t.bias-t.mbits)
	}
	return s * math.Ldexp(1+man/math.Ldexp(1, t.mbits), exp-t.bias)
}
