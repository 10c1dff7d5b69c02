package emu

import (
	"math"
	"math/bits"

	"github.com/kgen-dev/kgen/ptx"
)

// The .sync warp operations run once for all their participants (part), after the
// scheduler has gathered every lane of the member mask.

// shfl modes
const (
	shflUp uint8 = iota
	shflDown
	shflBfly
	shflIdx
)

func execShfl(w *warp, in *dinst, part uint32) {
	r := w.r
	var src [32]uint64
	copy(src[:], r[in.a:in.a+32])
	for x := part; x != 0; x &= x - 1 {
		ln := bits.TrailingZeros32(x)
		lane := uint32(ln)
		bval := uint32(r[in.b+int32(ln)]) & 31
		c := uint32(r[in.c+int32(ln)])
		cval := c & 31
		segmask := c >> 8 & 31
		maxLane := lane&segmask | cval&^segmask
		minLane := lane & segmask
		var j uint32
		var ok bool
		switch in.op {
		case shflUp:
			j = lane - bval
			ok = int32(j) >= int32(maxLane)
		case shflDown:
			j = lane + bval
			ok = j <= maxLane
		case shflBfly:
			j = lane ^ bval
			ok = j <= maxLane
		default:
			j = minLane | bval&^segmask
			ok = j <= maxLane
		}
		if !ok || j > 31 {
			j = lane
		}
		r[in.d+int32(ln)] = src[j] & 0xffffffff
		if in.d2 >= 0 {
			if ok {
				r[in.d2+int32(ln)] = 1
			} else {
				r[in.d2+int32(ln)] = 0
			}
		}
	}
}

// vote modes
const (
	voteAll uint8 = iota
	voteAny
	voteUni
	voteBallot
)

func execVote(w *warp, in *dinst, part uint32) {
	r := w.r
	var ballot uint32
	for x := part; x != 0; x &= x - 1 {
		ln := bits.TrailingZeros32(x)
		p := uint32(r[in.a+int32(ln)] & 1)
		if in.flags&1 != 0 {
			p ^= 1
		}
		ballot |= p << ln
	}
	var v uint64
	switch in.op {
	case voteAll:
		if ballot == part {
			v = 1
		}
	case voteAny:
		if ballot != 0 {
			v = 1
		}
	case voteUni:
		if ballot == 0 || ballot == part {
			v = 1
		}
	case voteBallot:
		v = uint64(ballot)
	}
	for x := part; x != 0; x &= x - 1 {
		r[in.d+int32(bits.TrailingZeros32(x))] = v
	}
}

// redux ops reuse the atomic op codes.
func execRedux(w *warp, in *dinst, part uint32) {
	r := w.r
	t := in.t
	var acc uint64
	first := true
	for x := part; x != 0; x &= x - 1 {
		v := r[in.a+int32(bits.TrailingZeros32(x))] & widthMask(t.Bits())
		if t == ptx.F32 && in.flags&4 != 0 { // .abs
			v &^= 1 << 31
		}
		if first {
			acc, first = v, false
			continue
		}
		if t == ptx.F32 {
			a, b := float64(f32(acc)), float64(f32(v))
			nan := in.flags&8 != 0
			switch {
			case math.IsNaN(a) || math.IsNaN(b):
				if nan {
					acc = 0x7fffffff // the canonical NaN (canon32)
				} else if math.IsNaN(a) {
					acc = v
				}
			case in.op == aMin && b < a, in.op == aMax && b > a:
				acc = v
			case a == b && a == 0 && math.Signbit(b) == (in.op == aMin):
				// -0 is below +0, as min.f32 and max.f32 have it: the result was the
				// first lane's zero, so it hung on the lane order.
				acc = v
			}
			continue
		}
		acc = atomApply(in.op, t, acc, v, 0)
	}
	for x := part; x != 0; x &= x - 1 {
		r[in.d+int32(bits.TrailingZeros32(x))] = acc
	}
}

// match modes: op 0 any, 1 all
func execMatch(w *warp, in *dinst, part uint32) {
	r := w.r
	mask := widthMask(in.t.Bits())
	for x := part; x != 0; x &= x - 1 {
		ln := bits.TrailingZeros32(x)
		v := r[in.a+int32(ln)] & mask
		var same uint32
		for y := part; y != 0; y &= y - 1 {
			k := bits.TrailingZeros32(y)
			if r[in.a+int32(k)]&mask == v {
				same |= 1 << k
			}
		}
		if in.op == 0 {
			r[in.d+int32(ln)] = uint64(same)
			continue
		}
		all := same == part
		if all {
			r[in.d+int32(ln)] = uint64(part)
		} else {
			r[in.d+int32(ln)] = 0
		}
		if in.d2 >= 0 {
			if all {
				r[in.d2+int32(ln)] = 1
			} else {
				r[in.d2+int32(ln)] = 0
			}
		}
	}
}

func execElect(w *warp, in *dinst, part uint32) {
	leader := bits.TrailingZeros32(part)
	for x := part; x != 0; x &= x - 1 {
		ln := bits.TrailingZeros32(x)
		if in.d >= 0 {
			w.r[in.d+int32(ln)] = uint64(leader)
		}
		if in.d2 >= 0 {
			v := uint64(0)
			if ln == leader {
				v = 1
			}
			w.r[in.d2+int32(ln)] = v
		}
	}
}

func execWarpBar(w *warp, in *dinst, part uint32) { w.wepoch++ }
