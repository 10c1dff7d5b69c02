// Package fp holds the host types of the GPU's narrow floating-point formats (IEEE half,
// bfloat16, OCP FP8 E4M3 and E5M2) and their conversions from and to float32, rounding to
// nearest even, bit-exact with the hardware's cvt.rn. Device buffers of these types
// (jit.Buffer[fp.F16], ...) are distinct Go types, so a launch cannot mix them up.
package fp

import (
	"math"

	ifp "github.com/kgen-dev/kgen/internal/fp"
)

// F16 is an IEEE 754 half-precision value, as its bits.
type F16 uint16

// BF16 is a bfloat16 value (the upper half of a float32), as its bits.
type BF16 uint16

// E4M3 is an OCP FP8 E4M3 value (4 exponent bits, 3 mantissa bits, bias 7, no infinities,
// largest finite 448), as its bits.
type E4M3 uint8

// E5M2 is an OCP FP8 E5M2 value (5 exponent bits, 2 mantissa bits, bias 15, IEEE
// infinities, largest finite 57344), as its bits.
type E5M2 uint8

// F16Of rounds f to half precision (to nearest even; overflow gives an infinity).
func F16Of(f float32) F16 { return F16(ifp.F32ToF16(f)) }

// Float32 returns h's value (exact).
func (h F16) Float32() float32 { return ifp.F16ToF32(uint16(h)) }

// BF16Of rounds f to bfloat16 (to nearest even; NaN stays NaN).
func BF16Of(f float32) BF16 { return BF16(ifp.F32ToBF16(f)) }

// Float32 returns b's value (exact).
func (b BF16) Float32() float32 { return ifp.BF16ToF32(uint16(b)) }

// E4M3Of rounds f to E4M3 (to nearest even). A value that rounds above 448 in magnitude, or
// an infinity, gives NaN (0x7f with f's sign), as cvt.rn without .satfinite does; InE4M3
// tells whether f fits.
func E4M3Of(f float32) E4M3 { b, _ := ifp.F64ToE4M3(float64(f)); return E4M3(b) }

// InE4M3 reports whether f rounds to a finite E4M3 value or is NaN.
func InE4M3(f float32) bool { _, ok := ifp.F64ToE4M3(float64(f)); return ok }

// Float32 returns e's value (exact).
func (e E4M3) Float32() float32 { return float32(ifp.E4M3ToF64(uint8(e))) }

// E5M2Of rounds f to E5M2 (to nearest even). A finite value that rounds above 57344 in
// magnitude gives the infinity of its sign; InE5M2 tells whether f fits.
func E5M2Of(f float32) E5M2 { b, _ := ifp.F64ToE5M2(float64(f)); return E5M2(b) }

// InE5M2 reports whether f is representable after rounding: finite values up to 57344,
// infinities and NaN.
func InE5M2(f float32) bool { _, ok := ifp.F64ToE5M2(float64(f)); return ok }

// Float32 returns e's value (exact).
func (e E5M2) Float32() float32 { return float32(ifp.E5M2ToF64(uint8(e))) }

// Narrow is the narrow float host types.
type Narrow interface {
	F16 | BF16 | E4M3 | E5M2
	Float32() float32
}

// Of rounds f to the format T (see F16Of, BF16Of, E4M3Of, E5M2Of).
func Of[T Narrow](f float32) T {
	var z T
	switch any(z).(type) {
	case F16:
		return T(F16Of(f))
	case BF16:
		return T(BF16Of(f))
	case E4M3:
		return T(E4M3Of(f))
	}
	return T(E5M2Of(f))
}

// From rounds every value of xs to T.
func From[T Narrow](xs []float32) []T {
	out := make([]T, len(xs))
	for i, x := range xs {
		out[i] = Of[T](x)
	}
	return out
}

// Float32s widens every value of xs to float32 (exact).
func Float32s[T Narrow](xs []T) []float32 {
	out := make([]float32, len(xs))
	for i, x := range xs {
		out[i] = x.Float32()
	}
	return out
}

// IsNaN reports whether the value of x is NaN.
func IsNaN[T Narrow](x T) bool { return math.IsNaN(float64(x.Float32())) }
