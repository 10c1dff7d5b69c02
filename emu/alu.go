package emu

import (
	"fmt"
	"math"
	"math/big"
	"math/bits"

	"github.com/kgen-dev/kgen/ptx"
)

// tokens is an instruction's opcode and qualifiers split on dots: "bar.sync" + [aligned]
// gives [bar sync aligned].
type tokens []string

func (t tokens) has(s string) bool {
	for _, x := range t {
		if x == s {
			return true
		}
	}
	return false
}

func (t tokens) any(ss ...string) string {
	for _, x := range t {
		for _, s := range ss {
			if x == s {
				return s
			}
		}
	}
	return ""
}

func widthMask(w int) uint64 {
	if w >= 64 {
		return ^uint64(0)
	}
	return 1<<w - 1
}

func sext(x uint64, w int) int64 {
	if w >= 64 {
		return int64(x)
	}
	s := 64 - w
	return int64(x<<s) >> s
}

func rndOf(t tokens) (uint8, bool) {
	switch t.any("rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi") {
	case "rz", "rzi":
		return rndZero, true
	case "rm", "rmi":
		return rndDown, true
	case "rp", "rpi":
		return rndUp, true
	case "rn", "rni":
		return rndNear, true
	}
	return rndNear, false
}

// floatOps returns widen/narrow functions for a scalar float type.
func floatOps(t ptx.Type, mode uint8) (func(uint64) float64, func(float64) uint64, bool) {
	switch t {
	case ptx.F32:
		if mode == rndNear {
			return func(x uint64) float64 { return float64(f32(x)) }, func(v float64) uint64 { return canon32(bf32(float32(v))) }, true
		}
		return func(x uint64) float64 { return float64(f32(x)) }, func(v float64) uint64 { return canon32(bf32(float32(fmtF32.round(v, mode)))) }, true
	case ptx.F64:
		return f64, bf64, true
	case ptx.F16:
		return h2f, func(v float64) uint64 { return canonF16(fmtF16.encode(fmtF16.round(v, mode), false)) }, true
	case ptx.BF16:
		return bh2f, func(v float64) uint64 { return canonBF16(fmtBF16.encode(fmtBF16.round(v, mode), false)) }, true
	}
	return nil, nil, false
}

// canon32 is an f32 arithmetic result as a GPU gives it: every NaN is the one canonical NaN
// 0x7fffffff, no payload and no sign (docs/facts.md). The host's float32 arithmetic gave
// 0xffc00000 for inf - inf and kept an input NaN's payload.
func canon32(x uint64) uint64 {
	if x&0x7fffffff > 0x7f800000 {
		return 0x7fffffff
	}
	return x
}

// canonF16 and canonBF16 are an f16 or bf16 result as a GPU gives it: every NaN is 0x7fff,
// no payload and no sign (measured on an H200: HADD2, HMUL2, HFMA2, HMNMX2, MUFU.EX2/TANH
// on halves, F2FP from f32, the half atomics; docs/facts.md). The emulator gave the host's
// quiet NaN with the sign, 0x7e00/0xfe00 (f16) or 0x7fc0/0xffc0 (bf16).
func canonF16(x uint64) uint64 {
	if x&0x7fff > 0x7c00 {
		return 0x7fff
	}
	return x
}

func canonBF16(x uint64) uint64 {
	if x&0x7fff > 0x7f80 {
		return 0x7fff
	}
	return x
}

// canonHalf is canonF16 or canonBF16 for scalar half type t, nil for another type.
func canonHalf(t ptx.Type) func(uint64) uint64 {
	switch t {
	case ptx.F16:
		return canonF16
	case ptx.BF16:
		return canonBF16
	}
	return nil
}

// ftzBits returns the function that flushes a subnormal of scalar type t (f32 or f16, the
// types .ftz applies to) to the zero of its sign, or nil for another type. .ftz on f16 and
// f16x2 arithmetic, neg and abs of either, and setp.ftz.f16 were taken as without it: a
// subnormal f16 input went through (mul.ftz.f16 of 0x0003 by 1 gave 0x0003, not 0).
func ftzBits(t ptx.Type) func(uint64) uint64 {
	switch t {
	case ptx.F32:
		return func(x uint64) uint64 {
			if x&0x7f800000 == 0 {
				return x & 0x80000000
			}
			return x
		}
	case ptx.F16:
		return func(x uint64) uint64 {
			if x&0x7c00 == 0 {
				return x & 0x8000
			}
			return x
		}
	}
	return nil
}

// packed lifts a scalar half operation to f16x2/bf16x2.
func packed(f laneFn) laneFn {
	return func(a, b, c, d uint64) uint64 {
		lo := f(a&0xffff, b&0xffff, c&0xffff, d) & 0xffff
		hi := f(a>>16&0xffff, b>>16&0xffff, c>>16&0xffff, d) & 0xffff
		return hi<<16 | lo
	}
}

func scalarHalf(t ptx.Type) ptx.Type {
	switch t {
	case ptx.F16x2:
		return ptx.F16
	case ptx.BF16x2:
		return ptx.BF16
	}
	return t
}

// floatBinary builds a lane function for a binary float operation computed in float64 with
// one final rounding (exact for f16/bf16/f32 add, sub, mul via round-to-odd).
func floatArith(op string, t ptx.Type, q tokens) (laneFn, error) {
	st := scalarHalf(t)
	mode, _ := rndOf(q)
	wid, nar, ok := floatOps(st, mode)
	if !ok {
		return nil, fmt.Errorf("no float type")
	}
	// (rcp and sqrt joined the refused: they rounded to nearest whatever the mode, so
	// sqrt.rz.f64 of 2 gave 0x3ff6a09e667f3bcd, not ...bcc.)
	if st == ptx.F64 && mode != rndNear && (op == "add" || op == "sub" || op == "mul" || op == "fma" || op == "mad" || op == "div" || op == "rcp" || op == "sqrt") {
		return nil, fmt.Errorf("directed rounding of f64 arithmetic")
	}
	sat := q.has("sat")
	relu := q.has("relu")
	flush := ftzBits(st)
	ftz := q.has("ftz") && flush != nil
	var f laneFn
	fin := func(v float64) float64 {
		if relu && v < 0 {
			return 0
		}
		if sat {
			if math.IsNaN(v) {
				return 0
			}
			v = math.Max(0, math.Min(1, v))
		}
		return v
	}
	in := wid
	if ftz {
		w0, n0 := wid, nar
		in = func(x uint64) float64 { return w0(flush(x)) }
		nar = func(v float64) uint64 { return flush(n0(v)) }
	}
	fast := st == ptx.F32 && mode == rndNear && !sat && !ftz && !relu
	switch op {
	case "add":
		if fast {
			f = func(a, b, _, _ uint64) uint64 { return canon32(bf32(f32(a) + f32(b))) }
		} else if st == ptx.F64 {
			f = func(a, b, _, _ uint64) uint64 { return bf64(fin(f64(a) + f64(b))) }
		} else {
			f = func(a, b, _, _ uint64) uint64 { return nar(fin(addOdd(in(a), in(b)))) }
		}
	case "sub":
		if fast {
			f = func(a, b, _, _ uint64) uint64 { return canon32(bf32(f32(a) - f32(b))) }
		} else if st == ptx.F64 {
			f = func(a, b, _, _ uint64) uint64 { return bf64(fin(f64(a) - f64(b))) }
		} else {
			f = func(a, b, _, _ uint64) uint64 { return nar(fin(addOdd(in(a), -in(b)))) }
		}
	case "mul":
		if fast {
			f = func(a, b, _, _ uint64) uint64 { return canon32(bf32(f32(a) * f32(b))) }
		} else if st == ptx.F64 {
			f = func(a, b, _, _ uint64) uint64 { return bf64(fin(f64(a) * f64(b))) }
		} else {
			f = func(a, b, _, _ uint64) uint64 { return nar(fin(in(a) * in(b))) }
		}
	case "fma", "mad":
		if st == ptx.F64 {
			f = func(a, b, c, _ uint64) uint64 { return bf64(fin(math.FMA(f64(a), f64(b), f64(c)))) }
		} else {
			f = func(a, b, c, _ uint64) uint64 { return nar(fin(addOdd(in(a)*in(b), in(c)))) }
		}
	case "div":
		if fast {
			f = func(a, b, _, _ uint64) uint64 { return canon32(bf32(f32(a) / f32(b))) }
		} else if st == ptx.F64 {
			f = func(a, b, _, _ uint64) uint64 { return bf64(f64(a) / f64(b)) }
		} else {
			f = func(a, b, _, _ uint64) uint64 { return nar(fin(in(a) / in(b))) }
		}
	case "min", "max":
		isMax := op == "max"
		nan := q.has("NaN")
		absq := q.has("abs")
		xorsign := q.has("xorsign")
		sb := uint64(1) << (st.Bits() - 1)
		g := func(a, b, _, _ uint64) uint64 {
			x, y := in(a), in(b)
			if absq {
				x, y = math.Abs(x), math.Abs(y)
			}
			xn, yn := math.IsNaN(x), math.IsNaN(y)
			switch {
			case xn && yn || nan && (xn || yn):
				return nar(math.NaN())
			case xn:
				return nar(y)
			case yn:
				return nar(x)
			}
			if x == y { // -0 vs +0
				if isMax == math.Signbit(x) {
					return nar(y)
				}
				return nar(x)
			}
			if (x > y) == isMax {
				return nar(fin(x))
			}
			return nar(fin(y))
		}
		f = g
		if xorsign {
			f = func(a, b, c, d uint64) uint64 { return g(a, b, c, d)&^sb | (a^b)&sb }
		}
	case "neg", "abs":
		// neg and abs flip or clear the sign bit; on f32 ptxas compiles them to an FADD
		// (FADD R, -R0, -RZ; FADD R, |R0|, -RZ), so a NaN comes out canonical (canon32);
		// on f16 to HADD2 R, -R0, -RZ (|R0|), on bf16 to HFMA2.BF16_V2 R, -RZ, RZ, -R0
		// (|R0|), a NaN 0x7fff per half (measured on an H200: neg.f16 of 0x7e01, abs.bf16
		// of 0xffc1 gave 0x7fff; before: the input's bits with the sign changed).
		sb := uint64(1) << (st.Bits() - 1)
		keep := ^uint64(0) // the bits of a kept, sb flipped for neg
		flip := sb
		if op == "abs" {
			keep, flip = ^sb, 0
		}
		if !ftz {
			flush = func(x uint64) uint64 { return x }
		}
		f = func(a, _, _, _ uint64) uint64 { return flush(a)&keep ^ flip }
		switch st {
		case ptx.F32:
			f = func(a, _, _, _ uint64) uint64 { return canon32(flush(a)&keep ^ flip) }
		case ptx.F16, ptx.BF16:
			canon := canonHalf(st)
			f = func(a, _, _, _ uint64) uint64 { return canon(flush(a)&keep ^ flip) }
		}
	case "sqrt":
		f = func(a, _, _, _ uint64) uint64 { return nar(math.Sqrt(in(a))) }
	case "rsqrt":
		f = func(a, _, _, _ uint64) uint64 { return nar(1 / math.Sqrt(in(a))) }
	case "rcp":
		f = func(a, _, _, _ uint64) uint64 { return nar(fin(1 / in(a))) }
	case "ex2":
		f = func(a, _, _, _ uint64) uint64 { return nar(math.Exp2(in(a))) }
	case "lg2":
		f = func(a, _, _, _ uint64) uint64 { return nar(math.Log2(in(a))) }
	case "sin":
		f = func(a, _, _, _ uint64) uint64 { return nar(math.Sin(in(a))) }
	case "cos":
		f = func(a, _, _, _ uint64) uint64 { return nar(math.Cos(in(a))) }
	case "tanh":
		f = func(a, _, _, _ uint64) uint64 { return nar(math.Tanh(in(a))) }
	case "copysign": // b's bits with a's sign, a bit operation (LOP3): a NaN keeps its bits
		sb := uint64(1) << (st.Bits() - 1)
		f = func(a, b, _, _ uint64) uint64 { return b&^sb | a&sb }
	default:
		return nil, fmt.Errorf("no float %s", op)
	}
	if t.IsPacked() {
		return packed(f), nil
	}
	return f, nil
}

// intArith builds a lane function for an integer operation of type t.
func intArith(op string, t ptx.Type, q tokens) (laneFn, error) {
	w := t.Bits()
	mask := widthMask(w)
	signed := t.Kind() == ptx.KindSigned
	mode := q.any("lo", "hi", "wide")
	sat := q.has("sat")
	clampS := func(v int64) uint64 {
		lo, hi := int64(-1)<<(w-1), int64(1)<<(w-1)-1
		if w == 64 {
			return uint64(v)
		}
		return uint64(min(max(v, lo), hi)) & mask
	}
	switch op {
	case "add":
		if sat && signed {
			return func(a, b, _, _ uint64) uint64 {
				x, y := sext(a, w), sext(b, w)
				s := x + y
				if w == 64 {
					if x > 0 && y > 0 && s < 0 {
						return math.MaxInt64
					}
					if x < 0 && y < 0 && s >= 0 {
						return 1 << 63
					}
					return uint64(s)
				}
				return clampS(s)
			}, nil
		}
		return func(a, b, _, _ uint64) uint64 { return (a + b) & mask }, nil
	case "sub":
		if sat && signed {
			return func(a, b, _, _ uint64) uint64 { return clampS(sext(a, w) - sext(b, w)) }, nil
		}
		return func(a, b, _, _ uint64) uint64 { return (a - b) & mask }, nil
	case "mul", "mad":
		add := op == "mad"
		switch mode {
		case "wide":
			w2 := widthMask(2 * w)
			if signed {
				return func(a, b, c, _ uint64) uint64 {
					r := uint64(sext(a, w) * sext(b, w))
					if add {
						r += c
					}
					return r & w2
				}, nil
			}
			return func(a, b, c, _ uint64) uint64 {
				r := (a & mask) * (b & mask)
				if add {
					r += c
				}
				return r & w2
			}, nil
		case "hi":
			return func(a, b, c, _ uint64) uint64 {
				var h uint64
				if w == 64 {
					if signed {
						hi, _ := bits.Mul64(a, b)
						// signed correction
						if int64(a) < 0 {
							hi -= b
						}
						if int64(b) < 0 {
							hi -= a
						}
						h = hi
					} else {
						h, _ = bits.Mul64(a, b)
					}
				} else if signed {
					h = uint64(sext(a, w)*sext(b, w)) >> w
				} else {
					h = (a & mask) * (b & mask) >> w
				}
				if add {
					if sat && signed && w == 32 {
						return clampS(sext(h&mask, w) + sext(c, w))
					}
					h += c
				}
				return h & mask
			}, nil
		default:
			return func(a, b, c, _ uint64) uint64 {
				r := a * b
				if add {
					r += c
				}
				return r & mask
			}, nil
		}
	case "mul24", "mad24":
		add := op == "mad24"
		return func(a, b, c, _ uint64) uint64 {
			var x, y int64
			if signed {
				x, y = sext(a&0xffffff, 24), sext(b&0xffffff, 24)
			} else {
				x, y = int64(a&0xffffff), int64(b&0xffffff)
			}
			r := uint64(x * y)
			if mode == "hi" {
				r >>= 16
			}
			if add {
				r += c
			}
			return r & mask
		}, nil
	case "sad":
		return func(a, b, c, _ uint64) uint64 {
			var d uint64
			if signed {
				x, y := sext(a, w), sext(b, w)
				if x > y {
					d = uint64(x - y)
				} else {
					d = uint64(y - x)
				}
			} else if a&mask > b&mask {
				d = a&mask - b&mask
			} else {
				d = b&mask - a&mask
			}
			return (d + c) & mask
		}, nil
	case "div":
		if signed {
			return func(a, b, _, _ uint64) uint64 {
				y := sext(b, w)
				if y == 0 {
					return mask
				}
				x := sext(a, w)
				if y == -1 {
					return uint64(-x) & mask
				}
				return uint64(x/y) & mask
			}, nil
		}
		return func(a, b, _, _ uint64) uint64 {
			if b&mask == 0 {
				return mask
			}
			return (a & mask) / (b & mask)
		}, nil
	case "rem":
		if signed {
			return func(a, b, _, _ uint64) uint64 {
				y := sext(b, w)
				if y == 0 || y == -1 {
					if y == -1 {
						return 0
					}
					return a & mask
				}
				return uint64(sext(a, w)%y) & mask
			}, nil
		}
		return func(a, b, _, _ uint64) uint64 {
			if b&mask == 0 {
				return a & mask
			}
			return (a & mask) % (b & mask)
		}, nil
	case "min", "max":
		isMax := op == "max"
		relu := q.has("relu")
		if signed {
			return func(a, b, _, _ uint64) uint64 {
				r := b
				if (sext(a, w) > sext(b, w)) == isMax {
					r = a
				}
				if relu && sext(r, w) < 0 {
					return 0
				}
				return r & mask
			}, nil
		}
		return func(a, b, _, _ uint64) uint64 {
			if (a&mask > b&mask) == isMax {
				return a & mask
			}
			return b & mask
		}, nil
	case "neg":
		return func(a, _, _, _ uint64) uint64 { return -a & mask }, nil
	case "abs":
		return func(a, _, _, _ uint64) uint64 {
			x := sext(a, w)
			if x < 0 {
				x = -x
			}
			return uint64(x) & mask
		}, nil
	}
	return nil, fmt.Errorf("no integer %s", op)
}

func bitArith(op string, t ptx.Type, q tokens) (laneFn, error) {
	w := t.Bits()
	mask := widthMask(w)
	if t == ptx.Pred {
		mask = 1
	}
	switch op {
	case "and":
		return func(a, b, _, _ uint64) uint64 { return a & b & mask }, nil
	case "or":
		return func(a, b, _, _ uint64) uint64 { return (a | b) & mask }, nil
	case "xor":
		return func(a, b, _, _ uint64) uint64 { return (a ^ b) & mask }, nil
	case "not":
		return func(a, _, _, _ uint64) uint64 { return ^a & mask }, nil
	case "cnot":
		return func(a, _, _, _ uint64) uint64 {
			if a&mask == 0 {
				return 1
			}
			return 0
		}, nil
	case "shl":
		return func(a, b, _, _ uint64) uint64 {
			s := b & 0xffffffff
			if s >= uint64(w) {
				return 0
			}
			return a << s & mask
		}, nil
	case "shr":
		if t.Kind() == ptx.KindSigned {
			return func(a, b, _, _ uint64) uint64 {
				s := b & 0xffffffff
				if s >= uint64(w) {
					s = uint64(w) - 1
				}
				return uint64(sext(a, w)>>s) & mask
			}, nil
		}
		return func(a, b, _, _ uint64) uint64 {
			s := b & 0xffffffff
			if s >= uint64(w) {
				return 0
			}
			return (a & mask) >> s
		}, nil
	case "popc":
		return func(a, _, _, _ uint64) uint64 { return uint64(bits.OnesCount64(a & mask)) }, nil
	case "clz":
		return func(a, _, _, _ uint64) uint64 { return uint64(bits.LeadingZeros64(a&mask) - (64 - w)) }, nil
	case "brev":
		return func(a, _, _, _ uint64) uint64 { return bits.Reverse64(a) >> (64 - w) }, nil
	case "bfind":
		signed := t.Kind() == ptx.KindSigned
		shiftamt := q.has("shiftamt")
		return func(a, _, _, _ uint64) uint64 {
			x := a & mask
			if signed && sext(x, w) < 0 {
				x = ^x & mask
			}
			if x == 0 {
				return 0xffffffff
			}
			p := uint64(63 - bits.LeadingZeros64(x))
			if shiftamt {
				return uint64(w-1) - p
			}
			return p
		}, nil
	case "bfe":
		signed := t.Kind() == ptx.KindSigned
		return func(a, b, c, _ uint64) uint64 {
			pos, ln := b&0xff, c&0xff
			var sbit uint64
			if signed && ln > 0 {
				p := pos + ln - 1
				if p > uint64(w-1) {
					p = uint64(w - 1)
				}
				sbit = a >> p & 1
			}
			var r uint64
			for i := uint64(0); i < uint64(w); i++ {
				var bit uint64
				if i < ln && pos+i < uint64(w) {
					bit = a >> (pos + i) & 1
				} else {
					bit = sbit
				}
				r |= bit << i
			}
			return r & mask
		}, nil
	case "bfi":
		return func(a, b, c, d uint64) uint64 {
			pos, ln := c&0xff, d&0xff
			r := b & mask
			for i := uint64(0); i < ln && pos+i < uint64(w); i++ {
				r = r&^(1<<(pos+i)) | (a>>i&1)<<(pos+i)
			}
			return r
		}, nil
	}
	return nil, fmt.Errorf("no bit op %s", op)
}

func lop3Fn(lut uint64) laneFn {
	return func(a, b, c, _ uint64) uint64 {
		var r uint64
		for i := 0; i < 8; i++ {
			if lut>>i&1 == 0 {
				continue
			}
			x, y, z := a, b, c
			if i&4 == 0 {
				x = ^a
			}
			if i&2 == 0 {
				y = ^b
			}
			if i&1 == 0 {
				z = ^c
			}
			r |= x & y & z
		}
		return r & 0xffffffff
	}
}

func prmtFn(mode string) laneFn {
	return func(a, b, c, _ uint64) uint64 {
		src := (b&0xffffffff)<<32 | a&0xffffffff
		byteAt := func(i uint64) uint64 { return src >> (8 * (i & 7)) & 0xff }
		var sel [4]uint64
		switch mode {
		case "f4e":
			s := c & 3
			sel = [4]uint64{s, s + 1, s + 2, s + 3}
		case "b4e":
			s := c & 3
			// backward from byte s: d.b0 = s, d.b1 = s-1, ... (mod 8), the ISA's table
			// (b3..b0) 5 6 7 0 / 6 7 0 1 / 7 0 1 2 / 0 1 2 3. It read 8-s, 7-s, ..., right
			// for s = 0 only.
			sel = [4]uint64{s, (s + 7) & 7, (s + 6) & 7, (s + 5) & 7}
		case "rc8":
			s := c & 3
			sel = [4]uint64{s, s, s, s}
		case "ecl":
			s := c & 3
			sel = [4]uint64{s, max(s, 1), max(s, 2), 3}
		case "ecr":
			s := c & 3
			sel = [4]uint64{0, min(s, 1), min(s, 2), s}
		case "rc16":
			s := c & 1
			sel = [4]uint64{2 * s, 2*s + 1, 2 * s, 2*s + 1}
		default:
			var r uint64
			for i := 0; i < 4; i++ {
				s := c >> (4 * i) & 0xf
				v := byteAt(s)
				if s&8 != 0 {
					if v&0x80 != 0 {
						v = 0xff
					} else {
						v = 0
					}
				}
				r |= v << (8 * i)
			}
			return r
		}
		var r uint64
		for i := 0; i < 4; i++ {
			r |= byteAt(sel[i]) << (8 * i)
		}
		return r
	}
}

func shfFn(left, clamp bool) laneFn {
	return func(a, b, c, _ uint64) uint64 {
		n := c & 0xffffffff
		if clamp {
			n = min(n, 32)
		} else {
			n &= 31
		}
		v := (b&0xffffffff)<<32 | a&0xffffffff
		if left {
			return (v << n >> 32) & 0xffffffff
		}
		return (v >> n) & 0xffffffff
	}
}

// compare returns a predicate function for setp's comparison on type t.
func compareFn(cmp string, t ptx.Type, ftz bool) (func(a, b uint64) bool, error) {
	switch {
	case t.IsFloat():
		wid, _, ok := floatOps(t, rndNear)
		if !ok {
			return nil, fmt.Errorf("no float compare on %s", t)
		}
		if flush := ftzBits(t); ftz && flush != nil {
			w0 := wid
			wid = func(x uint64) float64 { return w0(flush(x)) }
		}
		var f func(x, y float64) bool
		switch cmp {
		case "eq":
			f = func(x, y float64) bool { return x == y }
		case "ne":
			f = func(x, y float64) bool { return x != y && !math.IsNaN(x) && !math.IsNaN(y) }
		case "lt":
			f = func(x, y float64) bool { return x < y }
		case "le":
			f = func(x, y float64) bool { return x <= y }
		case "gt":
			f = func(x, y float64) bool { return x > y }
		case "ge":
			f = func(x, y float64) bool { return x >= y }
		case "equ":
			f = func(x, y float64) bool { return !(x < y || x > y) }
		case "neu":
			f = func(x, y float64) bool { return x != y }
		case "ltu":
			f = func(x, y float64) bool { return !(x >= y) }
		case "leu":
			f = func(x, y float64) bool { return !(x > y) }
		case "gtu":
			f = func(x, y float64) bool { return !(x <= y) }
		case "geu":
			f = func(x, y float64) bool { return !(x < y) }
		case "num":
			f = func(x, y float64) bool { return !math.IsNaN(x) && !math.IsNaN(y) }
		case "nan":
			f = func(x, y float64) bool { return math.IsNaN(x) || math.IsNaN(y) }
		default:
			return nil, fmt.Errorf("bad float comparison %s", cmp)
		}
		if t == ptx.F32 && !ftz {
			switch cmp {
			case "lt":
				return func(a, b uint64) bool { return f32(a) < f32(b) }, nil
			case "ge":
				return func(a, b uint64) bool { return f32(a) >= f32(b) }, nil
			}
		}
		return func(a, b uint64) bool { return f(wid(a), wid(b)) }, nil
	default:
		w := t.Bits()
		mask := widthMask(w)
		signed := t.Kind() == ptx.KindSigned
		if signed {
			switch cmp {
			case "eq":
				return func(a, b uint64) bool { return a&mask == b&mask }, nil
			case "ne":
				return func(a, b uint64) bool { return a&mask != b&mask }, nil
			case "lt":
				return func(a, b uint64) bool { return sext(a, w) < sext(b, w) }, nil
			case "le":
				return func(a, b uint64) bool { return sext(a, w) <= sext(b, w) }, nil
			case "gt":
				return func(a, b uint64) bool { return sext(a, w) > sext(b, w) }, nil
			case "ge":
				return func(a, b uint64) bool { return sext(a, w) >= sext(b, w) }, nil
			}
		}
		switch cmp {
		case "eq":
			return func(a, b uint64) bool { return a&mask == b&mask }, nil
		case "ne":
			return func(a, b uint64) bool { return a&mask != b&mask }, nil
		case "lt", "lo":
			return func(a, b uint64) bool { return a&mask < b&mask }, nil
		case "le", "ls":
			return func(a, b uint64) bool { return a&mask <= b&mask }, nil
		case "gt", "hi":
			return func(a, b uint64) bool { return a&mask > b&mask }, nil
		case "ge", "hs":
			return func(a, b uint64) bool { return a&mask >= b&mask }, nil
		}
	}
	return nil, fmt.Errorf("bad comparison %s on %s", cmp, t)
}

// cvtFn builds the lane function of cvt.dt.at.
func cvtFn(dt, at ptx.Type, q tokens) (laneFn, error) {
	if dt == ptx.TF32 {
		return cvtTF32Fn(at, q)
	}
	mode, hasRnd := rndOf(q)
	sat := q.has("sat")
	satfinite := q.has("satfinite")
	ftz := q.has("ftz")
	relu := q.has("relu")
	dw, aw := dt.Bits(), at.Bits()
	dmask := widthMask(dw)
	intRound := q.any("rni", "rzi", "rmi", "rpi") != ""
	fixIn := func(v float64) float64 {
		if ftz && at == ptx.F32 && v != 0 && math.Abs(v) < 0x1p-126 {
			return math.Copysign(0, v)
		}
		return v
	}
	post := func(v float64) float64 {
		if relu && (v < 0 || math.IsNaN(v)) {
			if math.IsNaN(v) {
				return v
			}
			return 0
		}
		if sat {
			if math.IsNaN(v) {
				return 0
			}
			return math.Max(0, math.Min(1, v))
		}
		if ftz && dt == ptx.F32 && v != 0 && math.Abs(v) < 0x1p-126 {
			return math.Copysign(0, v)
		}
		return v
	}
	// Packed fp8 / half forms.
	switch {
	case dt == ptx.F16x2 || dt == ptx.BF16x2 || dt == ptx.E4M3x2 || dt == ptx.E5M2x2:
		lt := scalarHalf(dt)
		switch dt {
		case ptx.E4M3x2:
			lt = ptx.E4M3
		case ptx.E5M2x2:
			lt = ptx.E5M2
		}
		lw := lt.Bits()
		enc := func(v float64) uint64 {
			v = post(v)
			switch lt {
			case ptx.E4M3:
				return fmtE4M3.encode(fmtE4M3.round(v, mode), satfinite)
			case ptx.E5M2:
				return fmtE5M2.encode(fmtE5M2.round(v, mode), satfinite)
			case ptx.F16:
				r := fmtF16.round(v, mode)
				return fmtF16.encode(r, satfinite)
			}
			return fmtBF16.encode(fmtBF16.round(v, mode), satfinite)
		}
		switch at {
		case ptx.F32:
			// cvt.rn.f16x2.f32 d, a, b: d.hi = a, d.lo = b. ptxas compiles the f16x2 and
			// bf16x2 forms to F2FP (...F32.PACK_AB), which gives a NaN as 0x7fff (canonF16;
			// measured on an H200 for .rn and .rz).
			if c := canonHalf(lt); c != nil && canonF2FP(mode, q) {
				e0 := enc
				enc = func(v float64) uint64 { return c(e0(v)) }
			}
			return func(a, b, _, _ uint64) uint64 { return enc(float64(f32(a)))<<lw | enc(float64(f32(b))) }, nil
		case ptx.F16x2, ptx.BF16x2, ptx.E4M3x2, ptx.E5M2x2:
			st := scalarHalf(at)
			switch at {
			case ptx.E4M3x2:
				st = ptx.E4M3
			case ptx.E5M2x2:
				st = ptx.E5M2
			}
			sw := st.Bits()
			sm := widthMask(sw)
			return func(a, _, _, _ uint64) uint64 {
				return enc(toFloat(st, a>>sw&sm))<<lw | enc(toFloat(st, a&sm))
			}, nil
		}
		return nil, fmt.Errorf("cvt to %s from %s", dt, at)
	}
	switch {
	case dt.IsInt() && at.IsInt() || dt.Kind() == ptx.KindBits && at.IsInt() || dt.IsInt() && at.Kind() == ptx.KindBits:
		asigned := at.Kind() == ptx.KindSigned
		dsigned := dt.Kind() == ptx.KindSigned
		return func(a, _, _, _ uint64) uint64 {
			var v int64
			var u uint64
			if asigned {
				v = sext(a, aw)
				u = uint64(v)
			} else {
				u = a & widthMask(aw)
				v = int64(u)
			}
			if sat {
				if dsigned {
					lo, hi := int64(-1)<<(dw-1), int64(1)<<(dw-1)-1
					if dw == 64 {
						if !asigned && u > math.MaxInt64 {
							return math.MaxInt64
						}
						return uint64(v)
					}
					if !asigned && u > uint64(hi) {
						return uint64(hi) & dmask
					}
					return uint64(min(max(v, lo), hi)) & dmask
				}
				if asigned && v < 0 {
					return 0
				}
				if u > dmask {
					return dmask
				}
				return u
			}
			return u & dmask
		}, nil
	case dt.IsFloat() && at.IsFloat():
		wid := func(x uint64) float64 { return fixIn(toFloat(at, x)) }
		if dt == at || intRound {
			_, nar, ok := floatOps(dt, rndNear)
			if !ok {
				return nil, fmt.Errorf("cvt %s.%s", dt, at)
			}
			if dt == ptx.F16 || dt == ptx.BF16 {
				// Not floatOps' canonical NaN: cvt.rni.f16.f16 compiles to FRND.F16, not
				// measured; the NaN stays the host's quiet NaN with its sign.
				nar = func(v float64) uint64 { return fromFloat(dt, v, rndNear) }
			}
			if intRound {
				return func(a, _, _, _ uint64) uint64 { return nar(post(roundMode(wid(a), mode))) }, nil
			}
			return func(a, _, _, _ uint64) uint64 { return nar(post(wid(a))) }, nil
		}
		_ = hasRnd
		f := func(a, _, _, _ uint64) uint64 {
			v := post(wid(a))
			if satfinite && !math.IsNaN(v) {
				switch dt {
				case ptx.F16:
					v = math.Max(-65504, math.Min(65504, fmtF16.round(v, mode)))
					return fmtF16.encode(v, true)
				case ptx.BF16:
					return fmtBF16.encode(fmtBF16.round(v, mode), true)
				}
			}
			return fromFloat(dt, v, mode)
		}
		// A NaN comes out canonical where the GPU's instruction makes it so (measured on an
		// H200): cvt.f32.f16 (HADD2.F32) gives 0x7fffffff, cvt.f16.f32 and cvt.bf16.f32
		// (F2FP) 0x7fff. Others keep the sign and payload, as the host's conversion does:
		// cvt.f32.bf16 (a shift: 0x7fc1 gives 0x7fc10000), cvt.f64.f32, cvt.f64.f16 (0xfe01
		// gives 0xfff8040000000000), cvt.f32.f64 (a quiet NaN with the sign), cvt.f16.f64
		// (0xfff8000000000001 gives 0xfe00).
		var canon func(uint64) uint64
		switch {
		case dt == ptx.F32 && at == ptx.F16:
			canon = canon32
		case at == ptx.F32 && canonF2FP(mode, q):
			canon = canonHalf(dt)
		}
		if canon != nil {
			return func(a, b, c, d uint64) uint64 { return canon(f(a, b, c, d)) }, nil
		}
		return f, nil
	case dt.IsInt() && at.IsFloat():
		wid := func(x uint64) float64 { return fixIn(toFloat(at, x)) }
		dsigned := dt.Kind() == ptx.KindSigned
		// A NaN converts to 0 where ptxas compiles the cvt to F2I with .NTZ (from f16,
		// bf16 or f32 to at most 32 bits) and to the destination's sign bit alone, signed
		// or unsigned, where it compiles to F2I without it (from f64, or to 64 bits).
		// Measured on an H200: cvt.rzi.s32.f32, .u32.f32, .s16.f32, .s32.f16 and
		// cvt.rni.s32.f32 give 0; cvt.rzi.s64.f64 (rni, rmi too), .u64.f64, .s64.f32,
		// .u64.f32 and .s64.f16 0x8000000000000000; .s32.f64 and .u32.f64 0x80000000. The
		// emulator gave 0 for every NaN. .u64.f16 follows .s64.f16 and .u64.f32 (F2I.U64.F16,
		// not measured itself). Not measured, so left at 0: 8- and 16-bit destinations from
		// f64 (F2I.S16.F64 and the like, without .NTZ) and bf16 to 64 bits.
		var nanInt uint64
		if at == ptx.F64 && dw >= 32 || dw == 64 && (at == ptx.F32 || at == ptx.F16) {
			nanInt = uint64(1) << (dw - 1)
		}
		return func(a, _, _, _ uint64) uint64 {
			v := roundMode(wid(a), mode)
			if math.IsNaN(v) {
				return nanInt
			}
			if dsigned {
				lo, hi := -math.Ldexp(1, dw-1), math.Ldexp(1, dw-1)
				switch {
				case v <= lo:
					return uint64(int64(-1)<<(dw-1)) & dmask
				case v >= hi:
					return uint64(1)<<(dw-1) - 1
				}
				return uint64(int64(v)) & dmask
			}
			if v <= 0 {
				return 0
			}
			if v >= math.Ldexp(1, dw) {
				return dmask
			}
			return uint64(v) & dmask
		}, nil
	case dt.IsFloat() && (at.IsInt() || at.Kind() == ptx.KindBits):
		asigned := at.Kind() == ptx.KindSigned
		if dt == ptx.F32 && mode == rndNear && !sat {
			if asigned {
				return func(a, _, _, _ uint64) uint64 { return bf32(float32(sext(a, aw))) }, nil
			}
			return func(a, _, _, _ uint64) uint64 { return bf32(float32(a & widthMask(aw))) }, nil
		}
		if dt == ptx.F64 && mode == rndNear {
			if asigned {
				return func(a, _, _, _ uint64) uint64 { return bf64(float64(sext(a, aw))) }, nil
			}
			return func(a, _, _, _ uint64) uint64 { return bf64(float64(a & widthMask(aw))) }, nil
		}
		prec := floatPrec(dt)
		return func(a, _, _, _ uint64) uint64 {
			var v float64
			if asigned {
				v = intToFloat(int64(sext(a, aw)), 0, true, prec, mode)
			} else {
				v = intToFloat(0, a&widthMask(aw), false, prec, mode)
			}
			return fromFloat(dt, post(v), mode)
		}, nil
	}
	return nil, fmt.Errorf("cvt %s.%s", dt, at)
}

// floatPrec is the significand precision in bits (with the hidden bit) of float type t.
func floatPrec(t ptx.Type) uint {
	switch t {
	case ptx.F64:
		return 53
	case ptx.F32:
		return 24
	case ptx.F16:
		return 11
	case ptx.BF16:
		return 8
	case ptx.E4M3:
		return 4
	case ptx.E5M2:
		return 3
	}
	return 53
}

// intToFloat is the integer s (signed) or u rounded once, with mode, to prec significant
// bits. float64(x) of a 64-bit integer beyond 2^53 rounds to nearest first: a second
// rounding to the destination then went wrong for the directed modes (cvt.rz.f64.s64 of
// 2^54+3 gave 2^54+4) and at ties (cvt.rn.bf16.s64 of 2^60+2^52+1 gave 2^60).
func intToFloat(s int64, u uint64, signed bool, prec uint, mode uint8) float64 {
	const exact = 1 << 53 // float64 holds every integer of magnitude up to this
	switch {
	case signed && s >= -exact && s <= exact:
		return float64(s) // exact; fromFloat rounds it once
	case !signed && u <= exact:
		return float64(u)
	}
	var x big.Float
	x.SetPrec(prec)
	switch mode {
	case rndZero:
		x.SetMode(big.ToZero)
	case rndDown:
		x.SetMode(big.ToNegativeInf)
	case rndUp:
		x.SetMode(big.ToPositiveInf)
	default:
		x.SetMode(big.ToNearestEven)
	}
	if signed {
		x.SetInt64(s)
	} else {
		x.SetUint64(u)
	}
	v, _ := x.Float64() // exact: prec <= 53
	return v
}

func testpFn(kind string, t ptx.Type) (laneFn, error) {
	wid, _, ok := floatOps(t, rndNear)
	if !ok {
		return nil, fmt.Errorf("testp on %s", t)
	}
	minNorm := 0x1p-126
	if t == ptx.F64 {
		minNorm = 0x1p-1022
	}
	var f func(v float64) bool
	switch kind {
	case "finite":
		f = func(v float64) bool { return !math.IsInf(v, 0) && !math.IsNaN(v) }
	case "infinite":
		f = func(v float64) bool { return math.IsInf(v, 0) }
	case "number":
		f = func(v float64) bool { return !math.IsNaN(v) }
	case "notanumber":
		f = func(v float64) bool { return math.IsNaN(v) }
	case "normal":
		f = func(v float64) bool { a := math.Abs(v); return a >= minNorm && !math.IsInf(v, 0) && !math.IsNaN(v) }
	case "subnormal":
		f = func(v float64) bool { a := math.Abs(v); return a > 0 && a < minNorm }
	default:
		return nil, fmt.Errorf("testp.%s", kind)
	}
	return func(a, _, _, _ uint64) uint64 {
		if f(wid(a)) {
			return 1
		}
		return 0
	}, nil
}

// canonF2FP reports whether cvt.f16.f32 or cvt.bf16.f32 (or the f16x2/bf16x2 forms) with
// rounding mode and qualifiers q gives a NaN as 0x7fff: .rn and .rz, which ptxas compiles to
// F2FP.{F16,BF16}.F32.PACK_AB{.RZ}, measured on an H200. Not measured, so unchanged (the
// host's quiet NaN with its sign): .rm and .rp (F2F.F16.F32.RM, another instruction) and
// .relu and .satfinite (F2FP.RELU, F2FP.SATFINITE; the PTX ISA says .relu makes a NaN the
// canonical NaN).
func canonF2FP(mode uint8, q tokens) bool {
	return (mode == rndNear || mode == rndZero) && !q.has("relu") && !q.has("satfinite")
}

// cvtTF32Fn is cvt.rna{.satfinite}.tf32.f32 as ptxas 13 compiles it for sm_80 and sm_90
// (nvdisasm; docs/facts.md): a finite value's bits plus 0x1000, half a tf32 ulp of its
// magnitude (ties away from zero; past the largest finite, infinity), then the low 13 bits
// cleared, infinities and NaNs included; with .satfinite a result that is then infinite or
// NaN loses 0x2000 (an infinity becomes the largest finite tf32 of its sign).
//
// cvt.rn{.relu}.tf32.f32 and cvt.rz{.relu}.tf32.f32 (sm_90; F2FP.{RELU.}TF32.F32.PACK_B
// {.RZ}) as an H200 computes them: .rn rounds to nearest, ties to even, at the 13 dropped
// bits (0x3f801000 gives 0x3f800000, 0x3f803000 0x3f804000, 0x7f7fffff infinity), .rz
// clears them (0x7f7fffff gives 0x7f7fe000); infinities stay; every NaN is 0x7fffe000;
// .relu makes a negative value, -0 and -inf 0 (a NaN stays 0x7fffe000). Their .satfinite
// forms (sm_100) are not emulated: not measured.
func cvtTF32Fn(at ptx.Type, q tokens) (laneFn, error) {
	if at != ptx.F32 {
		return nil, fmt.Errorf("cvt to .tf32 from %s", at)
	}
	if q.has("rn") || q.has("rz") {
		if q.has("satfinite") {
			return nil, fmt.Errorf("cvt.rn/.rz.satfinite.tf32.f32 is not emulated (not measured)")
		}
		rz, relu := q.has("rz"), q.has("relu")
		return func(a, _, _, _ uint64) uint64 {
			x := uint32(a)
			switch {
			case x&0x7fffffff > 0x7f800000:
				return 0x7fffe000
			case relu && x&0x80000000 != 0:
				return 0
			case x&0x7fffffff == 0x7f800000:
				return uint64(x)
			case !rz:
				x += 0xfff + x>>13&1 // ties to even; past the largest finite, infinity
			}
			return uint64(x &^ 0x1fff)
		}, nil
	}
	if !q.has("rna") {
		return nil, fmt.Errorf("cvt to .tf32 needs .rna, .rn or .rz")
	}
	satf := q.has("satfinite")
	return func(a, _, _, _ uint64) uint64 {
		x := uint32(a)
		if x&0x7fffffff < 0x7f800000 {
			x += 0x1000
		}
		x &= 0xffffe000
		if satf && x&0x7fffffff >= 0x7f800000 {
			x -= 0x2000
		}
		return uint64(x)
	}, nil
}
