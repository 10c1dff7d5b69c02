package emu

import (
	"math/bits"
)

// Lane loops for plain arithmetic: the converged case runs all 32 lanes without tests.

func execA1(w *warp, in *dinst, m uint32) {
	r := w.r
	d, a, f := (*[32]uint64)(r[in.d:]), (*[32]uint64)(r[in.a:]), in.fn
	if m == fullMask {
		for l := range d {
			d[l] = f(a[l], 0, 0, 0)
		}
		return
	}
	for ; m != 0; m &= m - 1 {
		l := bits.TrailingZeros32(m)
		d[l] = f(a[l], 0, 0, 0)
	}
}

func execA2(w *warp, in *dinst, m uint32) {
	r := w.r
	d, a, b, f := (*[32]uint64)(r[in.d:]), (*[32]uint64)(r[in.a:]), (*[32]uint64)(r[in.b:]), in.fn
	if m == fullMask {
		for l := range d {
			d[l] = f(a[l], b[l], 0, 0)
		}
		return
	}
	for ; m != 0; m &= m - 1 {
		l := bits.TrailingZeros32(m)
		d[l] = f(a[l], b[l], 0, 0)
	}
}

func execA3(w *warp, in *dinst, m uint32) {
	r := w.r
	d, a, b, c, f := (*[32]uint64)(r[in.d:]), (*[32]uint64)(r[in.a:]), (*[32]uint64)(r[in.b:]), (*[32]uint64)(r[in.c:]), in.fn
	if m == fullMask {
		for l := range d {
			d[l] = f(a[l], b[l], c[l], 0)
		}
		return
	}
	for ; m != 0; m &= m - 1 {
		l := bits.TrailingZeros32(m)
		d[l] = f(a[l], b[l], c[l], 0)
	}
}

func execA4(w *warp, in *dinst, m uint32) {
	r := w.r
	d, a, b, c, e, f := (*[32]uint64)(r[in.d:]), (*[32]uint64)(r[in.a:]), (*[32]uint64)(r[in.b:]), (*[32]uint64)(r[in.c:]), (*[32]uint64)(r[in.e:]), in.fn
	for ; m != 0; m &= m - 1 {
		l := bits.TrailingZeros32(m)
		d[l] = f(a[l], b[l], c[l], e[l])
	}
}

// execMov copies a register (the commonest instruction after address arithmetic).
func execMov(w *warp, in *dinst, m uint32) {
	r := w.r
	d, a := (*[32]uint64)(r[in.d:]), (*[32]uint64)(r[in.a:])
	mask := in.imm
	if m == fullMask {
		for l := range d {
			d[l] = a[l] & mask
		}
		return
	}
	for ; m != 0; m &= m - 1 {
		l := bits.TrailingZeros32(m)
		d[l] = a[l] & mask
	}
}

// Specialised f32/u32 loops without an indirect call per lane, for the hottest forms (a NaN
// result canonical, canon32, as floatArith's).

func execAddF32(w *warp, in *dinst, m uint32) {
	r := w.r
	d, a, b := (*[32]uint64)(r[in.d:]), (*[32]uint64)(r[in.a:]), (*[32]uint64)(r[in.b:])
	if m == fullMask {
		for l := range d {
			d[l] = canon32(bf32(f32(a[l]) + f32(b[l])))
		}
		return
	}
	for ; m != 0; m &= m - 1 {
		l := bits.TrailingZeros32(m)
		d[l] = canon32(bf32(f32(a[l]) + f32(b[l])))
	}
}

func execMulF32(w *warp, in *dinst, m uint32) {
	r := w.r
	d, a, b := (*[32]uint64)(r[in.d:]), (*[32]uint64)(r[in.a:]), (*[32]uint64)(r[in.b:])
	if m == fullMask {
		for l := range d {
			d[l] = canon32(bf32(f32(a[l]) * f32(b[l])))
		}
		return
	}
	for ; m != 0; m &= m - 1 {
		l := bits.TrailingZeros32(m)
		d[l] = canon32(bf32(f32(a[l]) * f32(b[l])))
	}
}

func execAddU32(w *warp, in *dinst, m uint32) {
	r := w.r
	d, a, b := (*[32]uint64)(r[in.d:]), (*[32]uint64)(r[in.a:]), (*[32]uint64)(r[in.b:])
	if m == fullMask {
		for l := range d {
			d[l] = (a[l] + b[l]) & 0xffffffff
		}
		return
	}
	for ; m != 0; m &= m - 1 {
		l := bits.TrailingZeros32(m)
		d[l] = (a[l] + b[l]) & 0xffffffff
	}
}

func execAddU64(w *warp, in *dinst, m uint32) {
	r := w.r
	d, a, b := (*[32]uint64)(r[in.d:]), (*[32]uint64)(r[in.a:]), (*[32]uint64)(r[in.b:])
	if m == fullMask {
		for l := range d {
			d[l] = a[l] + b[l]
		}
		return
	}
	for ; m != 0; m &= m - 1 {
		l := bits.TrailingZeros32(m)
		d[l] = a[l] + b[l]
	}
}

// execSetp: d = cmp(a, b) BOP c; d2 (the q of p|q) = !cmp(a, b) BOP c.
func execSetp(w *warp, in *dinst, m uint32) {
	r := w.r
	a, b := (*[32]uint64)(r[in.a:]), (*[32]uint64)(r[in.b:])
	cmp := in.cmp
	for x := m; x != 0; x &= x - 1 {
		l := bits.TrailingZeros32(x)
		v := uint64(0)
		if cmp(a[l], b[l]) {
			v = 1
		}
		nv := v ^ 1
		if in.c >= 0 {
			c := r[in.c+int32(l)] & 1
			if in.flags&1 != 0 {
				c ^= 1
			}
			switch in.op {
			case 1: // and
				v, nv = v&c, nv&c
			case 2: // or
				v, nv = v|c, nv|c
			case 3: // xor
				v, nv = v^c, nv^c
			}
		}
		if in.d >= 0 {
			r[in.d+int32(l)] = v
		}
		if in.d2 >= 0 {
			r[in.d2+int32(l)] = nv
		}
	}
}

// execSetpPair: setp on f16x2/bf16x2, cmp on 16-bit halves: d = cmp(a.lo, b.lo) BOP c,
// d2 = cmp(a.hi, b.hi) BOP c.
func execSetpPair(w *warp, in *dinst, m uint32) {
	r := w.r
	for x := m; x != 0; x &= x - 1 {
		l := int32(bits.TrailingZeros32(x))
		a, b := r[in.a+l], r[in.b+l]
		var t [2]uint64
		for h := range t {
			if in.cmp(a>>(16*h)&0xffff, b>>(16*h)&0xffff) {
				t[h] = 1
			}
		}
		if in.c >= 0 {
			c := r[in.c+l] & 1
			if in.flags&1 != 0 {
				c ^= 1
			}
			for h := range t {
				switch in.op {
				case 1: // and
					t[h] &= c
				case 2: // or
					t[h] |= c
				case 3: // xor
					t[h] ^= c
				}
			}
		}
		if in.d >= 0 {
			r[in.d+l] = t[0]
		}
		if in.d2 >= 0 {
			r[in.d2+l] = t[1]
		}
	}
}

// execPack moves between a wide register and a vector of narrower ones (mov.b64 d, {a, b}
// and mov.b64 {a, b}, d).
func execPack(w *warp, in *dinst, m uint32) {
	r := w.r
	es := uint(in.size) * 8
	for x := m; x != 0; x &= x - 1 {
		l := int32(bits.TrailingZeros32(x))
		if in.av != nil { // pack
			var lo, hi uint64
			for i, s := range in.av {
				v := r[s+l] & widthMask(int(es))
				bit := uint(i) * es
				if bit < 64 {
					lo |= v << bit
				} else {
					hi |= v << (bit - 64)
				}
			}
			r[in.d+l] = lo
			if in.t.Bits() == 128 {
				r[in.d+32+l] = hi
			}
			continue
		}
		lo := r[in.a+l]
		var hi uint64
		if in.t.Bits() == 128 {
			hi = r[in.a+32+l]
		}
		for i, s := range in.dv {
			bit := uint(i) * es
			var v uint64
			if bit < 64 {
				v = lo >> bit
			} else {
				v = hi >> (bit - 64)
			}
			if s >= 0 {
				r[s+l] = v & widthMask(int(es))
			}
		}
	}
}

// execMov128 copies a b128 register (two slots).
func execMov128(w *warp, in *dinst, m uint32) {
	r := w.r
	for x := m; x != 0; x &= x - 1 {
		l := int32(bits.TrailingZeros32(x))
		r[in.d+l], r[in.d+32+l] = r[in.a+l], r[in.a+32+l]
	}
}

func execClock(w *warp, in *dinst, m uint32) {
	v := uint64(w.l.steps) * 4
	for x := m; x != 0; x &= x - 1 {
		w.r[in.d+int32(bits.TrailingZeros32(x))] = v & in.imm
	}
	w.spin = true
}

func execNop(w *warp, in *dinst, m uint32) {}

func execSleep(w *warp, in *dinst, m uint32) { w.spin = true }

func execActivemask(w *warp, in *dinst, m uint32) {
	for x := m; x != 0; x &= x - 1 {
		w.r[in.d+int32(bits.TrailingZeros32(x))] = uint64(m)
	}
}

func trailing(x uint32) int { return bits.TrailingZeros32(x) }

func execFmaF32(w *warp, in *dinst, m uint32) {
	r := w.r
	d, a, b, c := (*[32]uint64)(r[in.d:]), (*[32]uint64)(r[in.a:]), (*[32]uint64)(r[in.b:]), (*[32]uint64)(r[in.c:])
	if m == fullMask {
		for l := range d {
			d[l] = canon32(bf32(float32(addOdd(float64(f32(a[l]))*float64(f32(b[l])), float64(f32(c[l]))))))
		}
		return
	}
	for ; m != 0; m &= m - 1 {
		l := bits.TrailingZeros32(m)
		d[l] = canon32(bf32(float32(addOdd(float64(f32(a[l]))*float64(f32(b[l])), float64(f32(c[l]))))))
	}
}

// Extended-precision arithmetic: add.cc, addc, sub.cc, subc, mad.cc, madc share a per-thread
// carry flag (CC.CF).
const (
	ccAdd uint8 = iota
	ccSub
	ccMadLo
	ccMadHi
)

func execCarry(w *warp, in *dinst, m uint32) {
	r := w.r
	wide := in.t.Bits() == 64
	mask := widthMask(in.t.Bits())
	useC, setC := in.flags&1 != 0, in.flags&2 != 0
	for x := m; x != 0; x &= x - 1 {
		l := bits.TrailingZeros32(x)
		a, b := r[in.a+int32(l)]&mask, r[in.b+int32(l)]&mask
		cin := uint64(0)
		if useC {
			cin = uint64(w.cc[l])
		}
		var d, cout uint64
		switch in.op {
		case ccAdd, ccMadLo, ccMadHi:
			if in.op != ccAdd {
				var hi, lo uint64
				if wide {
					hi, lo = bits.Mul64(a, b)
				} else {
					p := a * b
					hi, lo = p>>32, p&0xffffffff
				}
				a = lo
				if in.op == ccMadHi {
					a = hi
				}
				b = r[in.c+int32(l)] & mask
			}
			if wide {
				var c1, c2 uint64
				d, c1 = bits.Add64(a, b, 0)
				d, c2 = bits.Add64(d, cin, 0)
				cout = c1 | c2
			} else {
				s := a + b + cin
				d, cout = s&mask, s>>32
			}
		case ccSub:
			if wide {
				var b1, b2 uint64
				d, b1 = bits.Sub64(a, b, 0)
				d, b2 = bits.Sub64(d, cin, 0)
				cout = b1 | b2
			} else {
				s := a - b - cin
				d, cout = s&mask, s>>63
			}
		}
		r[in.d+int32(l)] = d
		if setC {
			w.cc[l] = uint8(cout & 1)
		}
	}
}
