package emu

import (
	"math"

	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/ptx"
)

// fmtInfo describes a binary floating-point format narrower than float64.
type fmtInfo struct {
	man    int // fraction bits
	minExp int // exponent of the smallest normal
	bias   int
	ebits  int
	hasInf bool    // e4m3 has no infinities (saturates to NaN)
	max    float64 // the largest finite value
}

var (
	fmtF16  = fmtInfo{man: 10, minExp: -14, bias: 15, ebits: 5, hasInf: true, max: 65504}
	fmtBF16 = fmtInfo{man: 7, minExp: -126, bias: 127, ebits: 8, hasInf: true, max: 0x1.fep127}
	fmtF32  = fmtInfo{man: 23, minExp: -126, bias: 127, ebits: 8, hasInf: true, max: math.MaxFloat32}
	fmtE4M3 = fmtInfo{man: 3, minExp: -6, bias: 7, ebits: 4, hasInf: false, max: 448}
	fmtE5M2 = fmtInfo{man: 2, minExp: -14, bias: 15, ebits: 5, hasInf: true, max: 57344}
)

// rounding modes
const (
	rndNear uint8 = iota
	rndZero
	rndDown
	rndUp
)

func roundMode(x float64, mode uint8) float64 {
	switch mode {
	case rndZero:
		return math.Trunc(x)
	case rndDown:
		return math.Floor(x)
	case rndUp:
		return math.Ceil(x)
	}
	return math.RoundToEven(x)
}

// round rounds x to the format (returns the value, possibly ±Inf on overflow).
func (f *fmtInfo) round(x float64, mode uint8) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	a := math.Abs(x)
	e := math.Ilogb(a)
	if e < f.minExp {
		e = f.minExp
	}
	q := math.Ldexp(1, e-f.man)
	r := roundMode(x/q, mode) * q
	if math.Abs(r) > f.max {
		// Overflow: round-to-nearest goes to infinity beyond max + half an ulp; directed
		// modes toward zero stay at max.
		top := math.Ldexp(1, math.Ilogb(f.max)-f.man)
		switch {
		case mode == rndZero, mode == rndDown && x > 0, mode == rndUp && x < 0:
			return math.Copysign(f.max, x)
		case mode == rndNear && math.Abs(x) < f.max+top/2:
			return math.Copysign(f.max, x)
		}
		return math.Copysign(math.Inf(1), x)
	}
	return r
}

// encode returns the bits of v, which must be representable (or ±Inf/NaN).
func (f *fmtInfo) encode(v float64, satfinite bool) uint64 {
	total := 1 + f.ebits + f.man
	sign := uint64(0)
	if math.Signbit(v) {
		sign = 1 << (total - 1)
	}
	expMask := uint64(1)<<f.ebits - 1
	if math.IsNaN(v) {
		if !f.hasInf { // e4m3: NaN is S.1111.111
			return sign | expMask<<f.man | (1<<f.man - 1)
		}
		return sign | expMask<<f.man | 1<<(f.man-1)
	}
	a := math.Abs(v)
	if math.IsInf(v, 0) || a > f.max {
		if satfinite || !f.hasInf {
			if !f.hasInf && !satfinite {
				return sign | expMask<<f.man | (1<<f.man - 1)
			}
			a = f.max
		} else {
			return sign | expMask<<f.man
		}
	}
	if a == 0 {
		return sign
	}
	e := math.Ilogb(a)
	if e < f.minExp {
		return sign | uint64(a/math.Ldexp(1, f.minExp-f.man))
	}
	m := uint64(a/math.Ldexp(1, e-f.man)) - 1<<f.man
	return sign | uint64(e+f.bias)<<f.man | m
}

// decode widens bits of the format to float64 exactly.
func (f *fmtInfo) decode(b uint64) float64 {
	total := 1 + f.ebits + f.man
	neg := b>>(total-1)&1 == 1
	expMask := uint64(1)<<f.ebits - 1
	e := b >> f.man & expMask
	m := b & (1<<f.man - 1)
	var v float64
	switch {
	case f.hasInf && e == expMask:
		if m != 0 {
			return math.NaN()
		}
		v = math.Inf(1)
	case !f.hasInf && e == expMask && m == 1<<f.man-1:
		return math.NaN()
	case e == 0:
		v = float64(m) * math.Ldexp(1, f.minExp-f.man)
	default:
		v = float64(1<<f.man|m) * math.Ldexp(1, int(e)-f.bias-f.man)
	}
	if neg {
		v = -v
	}
	return v
}

func f32(x uint64) float32  { return math.Float32frombits(uint32(x)) }
func bf32(f float32) uint64 { return uint64(math.Float32bits(f)) }
func f64(x uint64) float64  { return math.Float64frombits(x) }
func bf64(f float64) uint64 { return math.Float64bits(f) }
func h2f(x uint64) float64  { return float64(fp.F16ToF32(uint16(x))) }
func bh2f(x uint64) float64 { return float64(fp.BF16ToF32(uint16(x))) }
func f2h(v float64) uint64  { return fmtF16.encode(fmtF16.round(v, rndNear), false) }
func f2bh(v float64) uint64 { return fmtBF16.encode(fmtBF16.round(v, rndNear), false) }

// f2f32 rounds v to f32 and returns its bits.
func f2f32(v float64) uint64 { return bf32(float32(v)) }

// roundOdd returns x+y rounded to odd: correct for a later rounding to any format with at
// most 51 fraction bits (no double-rounding error).
func addOdd(x, y float64) float64 {
	s := x + y
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return s
	}
	bb := s - x
	e := (x - (s - bb)) + (y - bb)
	if e == 0 {
		return s
	}
	b := math.Float64bits(s)
	if (e > 0) != (s > 0) {
		// The exact value is smaller in magnitude than s: truncation is the next value toward 0.
		if b&1 == 1 {
			return s
		}
		b--
	}
	return math.Float64frombits(b | 1)
}

// toFloat widens a value of float type t (bits) to float64.
func toFloat(t ptx.Type, x uint64) float64 {
	switch t {
	case ptx.F32:
		return float64(f32(x))
	case ptx.F64:
		return f64(x)
	case ptx.F16:
		return h2f(x)
	case ptx.BF16:
		return bh2f(x)
	case ptx.E4M3:
		return fmtE4M3.decode(x & 0xff)
	case ptx.E5M2:
		return fmtE5M2.decode(x & 0xff)
	}
	return 0
}

// fromFloat rounds v to float type t.
func fromFloat(t ptx.Type, v float64, mode uint8) uint64 {
	switch t {
	case ptx.F32:
		if mode == rndNear {
			return bf32(float32(v))
		}
		return bf32(float32(fmtF32.round(v, mode)))
	case ptx.F64:
		return bf64(v)
	case ptx.F16:
		return fmtF16.encode(fmtF16.round(v, mode), false)
	case ptx.BF16:
		return fmtBF16.encode(fmtBF16.round(v, mode), false)
	case ptx.E4M3:
		return fmtE4M3.encode(fmtE4M3.round(v, mode), false)
	case ptx.E5M2:
		return fmtE5M2.encode(fmtE5M2.round(v, mode), false)
	}
	return 0
}

func ftz32(x float32) float32 {
	if x != 0 && math.Abs(float64(x)) < 0x1p-126 {
		return float32(math.Copysign(0, float64(x)))
	}
	return x
}
