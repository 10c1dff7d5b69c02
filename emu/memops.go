package emu

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/kgen-dev/kgen/ptx"
)

// where an access landed
const (
	whGlobal uint8 = iota
	whShared
	whLocal
	whParam
)

// ea is lane ln's effective address (or offset, for param/local/shared bases).
func (w *warp) ea(in *dinst, ln int) uint64 {
	if in.base == baseReg {
		return w.r[in.a+int32(ln)] + uint64(in.off)
	}
	return uint64(in.off)
}

func (w *warp) sharedSpan(off uint64, n int) ([]byte, *memFault) {
	if off > clusterOffMask { // a shared::cluster address with a block rank
		return w.clusterSpan(off, n)
	}
	b := w.b
	if off+uint64(n) > uint64(len(b.shared)) || off+uint64(n) < off {
		return nil, faultf(KindOutOfBounds, "%d bytes at shared offset %#x: the block has %d bytes of shared memory (%d static + %d dynamic at %#x)",
			n, off, len(b.shared), w.l.prog.sharedSize, w.l.dynShared, w.l.prog.sharedSize+w.l.prog.dynPad)
	}
	if b.cp != nil {
		if f := b.cpCheck(off, n); f != nil {
			return nil, f
		}
	}
	return b.shared[off : off+uint64(n) : off+uint64(n)], nil
}

func (w *warp) localSpan(ln int, off uint64, n int) ([]byte, *memFault) {
	ls := uint64(w.l.lsize)
	if off+uint64(n) > ls || off+uint64(n) < off {
		return nil, faultf(KindOutOfBounds, "%d bytes at local offset %#x: each thread has %d bytes of local memory", n, off, ls)
	}
	base := uint64(ln) * ls
	return w.local[base+off : base+off+uint64(n) : base+off+uint64(n)], nil
}

// paramSpan resolves n bytes at offset off of the kernel's parameters.
func (w *warp) paramSpan(off uint64, n int) ([]byte, *memFault) {
	p := w.b.params
	if off+uint64(n) > uint64(len(p)) || off+uint64(n) < off {
		return nil, faultf(KindOutOfBounds, "%d bytes at parameter offset %d: the parameters take %d bytes", n, off, len(p))
	}
	return p[off : off+uint64(n) : off+uint64(n)], nil
}

// genericSpan resolves a generic address.
func (w *warp) genericSpan(ln int, addr uint64, n int) ([]byte, *memFault) {
	switch region(addr) {
	case regionShared:
		return w.sharedSpan(addr&offMask, n)
	case regionLocal:
		return w.localSpan(ln, addr&offMask, n)
	case regionParam:
		return w.paramSpan(addr&offMask, n)
	}
	return w.l.sys.globalSpan(addr, n)
}

// span resolves lane ln's access of n bytes; off is the shared offset for whShared and the
// global address for whGlobal.
func (w *warp) span(in *dinst, ln int, addr uint64, n int) ([]byte, uint8, uint64, *memFault) {
	switch in.base {
	case baseParam:
		b, f := w.paramSpan(addr, n) // checked against wrapping: [p+-16] is before the parameters
		return b, whParam, addr, f
	case baseLocal:
		b, f := w.localSpan(ln, addr, n)
		return b, whLocal, addr, f
	case baseShared:
		b, f := w.sharedSpan(addr, n)
		return b, whShared, addr, f
	}
	if w.l.sanitize && in.align > 1 && addr&uint64(in.align-1) != 0 {
		return nil, whGlobal, 0, faultf(KindMisaligned, "%d-byte access at %#x is not %d-byte aligned", n, addr, in.align)
	}
	switch in.space {
	case spShared:
		if region(addr) != 0 {
			return nil, whShared, 0, faultf(KindBadAddress, "%#x is not a shared-space offset (a generic address used with .shared: missing cvta.to.shared?)", addr)
		}
		b, f := w.sharedSpan(addr, n)
		return b, whShared, addr, f
	case spLocal:
		if region(addr) != 0 {
			return nil, whLocal, 0, faultf(KindBadAddress, "%#x is not a local-space offset (missing cvta.to.local?)", addr)
		}
		b, f := w.localSpan(ln, addr, n)
		return b, whLocal, addr, f
	case spParam:
		if region(addr) == regionParam { // a kernel parameter's address, taken with mov
			b, f := w.paramSpan(addr&offMask, n)
			return b, whParam, addr & offMask, f
		}
		b, f := w.localSpan(ln, addr, n) // a device function's parameter, in its frame
		return b, whLocal, addr, f
	case spGeneric:
		switch region(addr) {
		case regionShared:
			b, f := w.sharedSpan(addr&offMask, n)
			return b, whShared, addr & offMask, f
		case regionLocal:
			b, f := w.localSpan(ln, addr&offMask, n)
			return b, whLocal, addr & offMask, f
		case regionParam:
			b, f := w.paramSpan(addr&offMask, n)
			return b, whParam, addr & offMask, f
		}
	}
	if s := w.l.sys; s.nodeSize != 0 {
		if f := s.reach(w.b.gpu, addr, n); f != nil {
			return nil, whGlobal, 0, f
		}
	}
	b, f := w.l.sys.globalSpan(addr, n)
	return b, whGlobal, addr, f
}

// race checks and records a plain shared-memory access for the race detector.
func (w *warp) race(in *dinst, ln int, off uint64, n int, write bool) bool {
	b := w.b
	if b.shadow == nil || off > clusterOffMask { // not checked in another block's memory
		return true
	}
	t := int32(w.idx*32 + ln + 1)
	e, we := b.epoch, w.wepoch
	pc := in.pc
	for i := off; i < off+uint64(n); i++ {
		s := &b.shadow[i]
		if s.w != 0 && s.w != t && s.we == e && !(int(s.w-1)/32 == w.idx && s.wwe != we) {
			w.raceFault(in, ln, off, n, write, s.w, s.wpc, true)
			return false
		}
		if write && s.r != 0 && s.re == e && s.r != t && !(s.r > 0 && int(s.r-1)/32 == w.idx && s.rwe != we) {
			w.raceFault(in, ln, off, n, write, s.r, s.rpc, false)
			return false
		}
		if write {
			s.w, s.we, s.wwe, s.wpc = t, e, we, pc
		} else if s.r == 0 || s.re != e {
			s.r, s.re, s.rwe, s.rpc = t, e, we, pc
		} else if s.r != t {
			s.r = -1
		}
	}
	return true
}

func (w *warp) raceFault(in *dinst, ln int, off uint64, n int, write bool, other int32, opc int32, otherWrote bool) {
	what := "reads"
	if write {
		what = "writes"
	}
	ow := "read"
	if otherWrote {
		ow = "wrote"
	}
	who := "several other threads"
	if other > 0 {
		t := int(other - 1)
		bx, by := w.l.blk.X, w.l.blk.Y
		who = fmt.Sprintf("thread (%d,%d,%d)", t%bx, t/bx%by, t/(bx*by))
	}
	where := ""
	if opc >= 0 && int(opc) < len(w.l.prog.code) && w.l.prog.code[opc].src != nil {
		o := w.l.prog.code[opc].src
		where = fmt.Sprintf(" with %q at %s", instrText(o), posString(o.Pos))
	}
	w.fault(in, ln, KindRace, fmt.Sprintf("%s %d bytes at shared offset %#x that %s %s%s, with no barrier in between",
		what, n, off, who, ow, where))
}

// peerVisible reports whether a store to global address addr is one the weak mode delays:
// into another GPU's memory, or into the symmetric heap (where other GPUs read it through
// peer addresses) of any GPU, the storing one included.
func (w *warp) peerVisible(addr uint64) bool {
	return int(region(addr)-regionGlobal0) != w.b.gpu || addr&offMask >= symBase
}

func releases(in *dinst) bool { return in.sem == semRelease || in.sem == semAcqRel }

// release is what a release (or a fence) by thread (w, lane) does in weak mode: at .gpu or
// .sys scope it makes all the thread's buffered stores visible; at .cta or .cluster scope
// only those into its own GPU's memory (see flushThreadLocal).
func (l *launch) release(w *warp, lane int, in *dinst) {
	if in.scope == scCTA || in.scope == scCluster {
		l.flushThreadLocal(w, lane)
		return
	}
	l.flushThread(w, lane)
}

func execLd(w *warp, in *dinst, m uint32) {
	l := w.l
	es, nv := int(in.size), int(in.vec)
	tot := es * nv
	for x := m; x != 0; x &= x - 1 {
		ln := bits.TrailingZeros32(x)
		addr := w.ea(in, ln)
		b, wh, off, f := w.span(in, ln, addr, tot)
		if f != nil {
			w.memFault(in, ln, f)
			return
		}
		if l.gRace && in.sem >= semAcquire {
			w.raceSync(in, ln)
		}
		switch wh {
		case whShared:
			if l.sanitize && in.sem == semWeak && !w.race(in, ln, off, tot, false) {
				return
			}
		case whGlobal:
			if l.weak {
				if l.npend > 0 {
					if in.sem <= semRelaxed && len(w.b.obs) > 0 && l.staleRead(w, in, ln, off, tot, in.sem != semWeak) {
						return
					}
					s := w.scratch[:tot]
					copy(s, b)
					l.forward(w, ln, off, s)
					b = s
				}
				if l.fences && l.recorded(off) {
					l.observe(w, in, ln, off, tot)
				}
			}
			// After the missing-fence check: its report says more.
			if l.gRace && in.sem == semWeak && !w.gRaceCheck(in, ln, off, tot, false) {
				return
			}
			if in.sem != semWeak {
				w.spin = true
				w.poll = off
			}
		}
		for i := 0; i < nv; i++ {
			if es == 16 {
				w.r[in.dv[i]+int32(ln)] = getN(b[16*i:], 8)
				w.r[in.dv[i]+32+int32(ln)] = getN(b[16*i+8:], 8)
				continue
			}
			v := getN(b[i*es:], es)
			if in.signed {
				v = uint64(sext(v, es*8))
			}
			w.r[in.dv[i]+int32(ln)] = v & in.dmask[i]
		}
	}
}

func (w *warp) storeValue(in *dinst, ln int, buf []byte) {
	es := int(in.size)
	for i := range in.av {
		if es == 16 {
			putN(buf[16*i:], 8, w.r[in.av[i]+int32(ln)])
			putN(buf[16*i+8:], 8, w.r[in.av[i]+32+int32(ln)])
			continue
		}
		putN(buf[i*es:], es, w.r[in.av[i]+int32(ln)])
	}
}

func execSt(w *warp, in *dinst, m uint32) {
	l := w.l
	tot := int(in.size) * int(in.vec)
	for x := m; x != 0; x &= x - 1 {
		ln := bits.TrailingZeros32(x)
		if l.weak && releases(in) {
			l.release(w, ln, in)
		}
		addr := w.ea(in, ln)
		b, wh, off, f := w.span(in, ln, addr, tot)
		if f != nil {
			w.memFault(in, ln, f)
			return
		}
		if l.gRace && in.sem >= semAcquire {
			w.raceSync(in, ln)
		}
		switch wh {
		case whShared:
			if l.sanitize && in.sem == semWeak && !w.race(in, ln, off, tot, true) {
				return
			}
			if !w.bulkWriteOK(in, ln, off, tot) {
				return
			}
		case whGlobal:
			if l.gRace && in.sem == semWeak && !w.gRaceCheck(in, ln, off, tot, true) {
				return
			}
			if l.weak {
				if w.peerVisible(off) && (in.sem == semWeak || in.sem == semRelaxed || in.sem == semVolatile) {
					buf := w.scratch[:tot]
					w.storeValue(in, ln, buf)
					l.seq++
					l.buffer(w, ln, in.pc, l.seq, off, buf)
					continue
				}
				if l.recorded(off) {
					l.overwrite(off, tot, false)
				}
			}
		case whParam:
			w.fault(in, ln, KindBadAddress, "store to the kernel's parameters (read-only)")
			return
		}
		w.storeValue(in, ln, b)
	}
	l.progressed()
}

// atomic operations
const (
	aAdd uint8 = iota
	aMin
	aMax
	aInc
	aDec
	aAnd
	aOr
	aXor
	aExch
	aCas
	// aAddFTZ is atom/red .add.f32: the PTX ISA has it flush subnormal inputs and results
	// to sign-preserving zero (ATOMG.E.ADD.F32.FTZ in ptxas's SASS); measured on an H200.
	aAddFTZ
)

var atomOps = map[string]uint8{"add": aAdd, "min": aMin, "max": aMax, "inc": aInc, "dec": aDec,
	"and": aAnd, "or": aOr, "xor": aXor, "exch": aExch, "cas": aCas}

// atomApply computes the new value of an atomic on type t.
func atomApply(op uint8, t ptx.Type, old, v, c uint64) uint64 {
	w := t.Bits()
	mask := widthMask(w)
	switch op {
	case aExch:
		return v & mask
	case aCas:
		if old&mask == v&mask {
			return c & mask
		}
		return old
	case aAnd:
		return old & v & mask
	case aOr:
		return (old | v) & mask
	case aXor:
		return (old ^ v) & mask
	case aInc:
		if old&mask >= v&mask {
			return 0
		}
		return (old + 1) & mask
	case aDec:
		if old&mask == 0 || old&mask > v&mask {
			return v & mask
		}
		return (old - 1) & mask
	}
	switch t {
	case ptx.F32:
		switch op {
		case aAdd:
			return canon32(bf32(f32(old) + f32(v)))
		case aAddFTZ:
			return canon32(bf32(ftz32(ftz32(f32(old)) + ftz32(f32(v)))))
		case aMin, aMax:
			return atomMinMax(op, old&mask, v&mask, float64(f32(old)), float64(f32(v)), 0x7fffffff)
		}
	case ptx.F64:
		switch op {
		case aAdd:
			return bf64(f64(old) + f64(v))
		case aMin:
			return bf64(math.Min(f64(old), f64(v)))
		case aMax:
			return bf64(math.Max(f64(old), f64(v)))
		}
	case ptx.F16, ptx.BF16:
		wid, nar := h2f, f2h
		if t == ptx.BF16 {
			wid, nar = bh2f, f2bh
		}
		switch op {
		case aAdd:
			return canonHalf(t)(nar(wid(old) + wid(v)))
		case aMin, aMax:
			return atomMinMax(op, old&mask, v&mask, wid(old), wid(v), 0x7fff)
		}
	case ptx.F16x2, ptx.BF16x2:
		st := scalarHalf(t)
		lo := atomApply(op, st, old&0xffff, v&0xffff, 0)
		hi := atomApply(op, st, old>>16&0xffff, v>>16&0xffff, 0)
		return hi<<16 | lo
	}
	if t.Kind() == ptx.KindSigned {
		switch op {
		case aAdd:
			return (old + v) & mask
		case aMin:
			if sext(v, w) < sext(old, w) {
				return v & mask
			}
			return old
		case aMax:
			if sext(v, w) > sext(old, w) {
				return v & mask
			}
			return old
		}
	}
	switch op {
	case aAdd:
		return (old + v) & mask
	case aMin:
		return min(old&mask, v&mask)
	case aMax:
		return max(old&mask, v&mask)
	}
	return old
}

// atomMinMax is atom/red min or max on f32 or a half (bits old and v, values x and y) as
// min.f32 and max.f32 compute (FMNMX, measured on an H200) and min.f16/max.bf16 (HMNMX2,
// likewise): a NaN operand gives the other operand, two NaNs the canonical NaN nan; -0 is
// below +0. (It was the host's math.Min/Max: a NaN operand gave a NaN with its payload.)
func atomMinMax(op uint8, old, v uint64, x, y float64, nan uint64) uint64 {
	switch {
	case math.IsNaN(x) && math.IsNaN(y):
		return nan
	case math.IsNaN(x):
		return v
	case math.IsNaN(y):
		return old
	case x == y:
		if math.Signbit(x) == (op == aMin) {
			return old
		}
		return v
	case (x < y) == (op == aMin):
		return old
	}
	return v
}

// applyRed applies a (vector) reduction to memory.
func applyRed(b, data []byte, op uint8, t ptx.Type) {
	es := t.Bytes()
	for i := 0; i+es <= len(data); i += es {
		putN(b[i:], es, atomApply(op, t, getN(b[i:], es), getN(data[i:], es), 0))
	}
}

func execAtom(w *warp, in *dinst, m uint32) {
	l := w.l
	es, nv := int(in.size), int(in.vec)
	tot := es * nv
	isRed := in.d < 0 && in.dv == nil
	for x := m; x != 0; x &= x - 1 {
		ln := bits.TrailingZeros32(x)
		if l.weak && releases(in) {
			l.release(w, ln, in)
		}
		addr := w.ea(in, ln)
		b, wh, off, f := w.span(in, ln, addr, tot)
		if f != nil {
			w.memFault(in, ln, f)
			return
		}
		if wh == whParam {
			w.fault(in, ln, KindBadAddress, "atomic on the kernel's parameters")
			return
		}
		if wh == whShared && !w.bulkWriteOK(in, ln, off, tot) {
			return
		}
		if l.gRace && in.sem >= semAcquire {
			w.raceSync(in, ln)
		}
		w.spin = true
		if wh == whGlobal {
			w.poll = off
		}
		weakGlobal := l.fences && wh == whGlobal
		if weakGlobal && !isRed && l.recorded(off) {
			l.observe(w, in, ln, off, tot)
		}
		if es == 16 { // b128 cas / exch
			oldLo, oldHi := getN(b, 8), getN(b[8:], 8)
			vLo, vHi := w.r[in.av[0]+int32(ln)], w.r[in.av[0]+32+int32(ln)]
			nLo, nHi := vLo, vHi
			if in.op == aCas {
				nLo, nHi = oldLo, oldHi
				if oldLo == vLo && oldHi == vHi {
					nLo, nHi = w.r[in.c+int32(ln)], w.r[in.c+32+int32(ln)]
				}
			}
			putN(b, 8, nLo)
			putN(b[8:], 8, nHi)
			if in.d >= 0 {
				w.r[in.d+int32(ln)], w.r[in.d+32+int32(ln)] = oldLo, oldHi
			}
			if weakGlobal && (nLo != oldLo || nHi != oldHi) { // a failed cas writes nothing
				l.recordAtomic(w, in, ln, off, tot)
			}
			l.progressed()
			continue
		}
		if isRed && wh == whGlobal && l.weak && w.peerVisible(off) && (in.sem == semWeak || in.sem == semRelaxed) {
			buf := w.scratch[:tot]
			for i := 0; i < nv; i++ {
				putN(buf[i*es:], es, w.r[in.av[i]+int32(ln)])
			}
			l.seq++
			l.bufferRed(w, ln, in.pc, l.seq, off, buf, in.op, in.t)
			continue
		}
		changed := false
		for i := 0; i < nv; i++ {
			old := getN(b[i*es:], es)
			c := uint64(0)
			if in.c >= 0 {
				c = w.r[in.c+int32(ln)]
			}
			nv := atomApply(in.op, in.t, old, w.r[in.av[i]+int32(ln)], c)
			if nv != old {
				putN(b[i*es:], es, nv)
				changed = true
			}
			if !isRed {
				if in.dv != nil {
					w.r[in.dv[i]+int32(ln)] = old & in.dmask[i]
				} else {
					w.r[in.d+int32(ln)] = old & in.dmask[0]
				}
			}
		}
		if changed {
			if weakGlobal {
				l.recordAtomic(w, in, ln, off, tot)
			}
			l.progressed()
		}
	}
}

// multimem operations (in.op for ld_reduce/red: the atomic op; flags: bit 1 acc::f32, bit 2
// acc::f16)
const (
	mmLdReduce uint8 = iota
	mmSt
	mmRed
)

func execMultimem(w *warp, in *dinst, m uint32) {
	l := w.l
	es, nv := int(in.size), int(in.vec)
	tot := es * nv
	var spans [MaxGPUs][]byte
	for x := m; x != 0; x &= x - 1 {
		ln := bits.TrailingZeros32(x)
		addr := w.ea(in, ln)
		if l.sanitize && in.align > 1 && addr&uint64(in.align-1) != 0 {
			w.fault(in, ln, KindMisaligned, fmt.Sprintf("%d-byte multimem access at %#x is not %d-byte aligned", tot, addr, in.align))
			return
		}
		sp, g0, f := l.sys.multicastSpans(addr, tot, spans[:0], w.b.gpu)
		if f != nil {
			w.memFault(in, ln, f)
			return
		}
		off := addr & offMask
		if l.gRace && in.sem >= semAcquire {
			w.raceSync(in, ln)
		}
		switch uint8(in.flags >> 8) {
		case mmLdReduce:
			if in.sem != semWeak {
				w.spin = true
			}
			for i := 0; i < nv; i++ {
				w.r[in.dv[i]+int32(ln)] = reduceAcross(sp, i*es, es, in.op, in.t, in.flags&6 != 0)
			}
		case mmSt, mmRed:
			red := uint8(in.flags>>8) == mmRed
			if l.weak && releases(in) {
				l.release(w, ln, in)
			}
			buf := w.scratch[:tot]
			for i := 0; i < nv; i++ {
				putN(buf[i*es:], es, w.r[in.av[i]+int32(ln)])
			}
			if l.weak && (in.sem == semWeak || in.sem == semRelaxed) {
				l.seq++ // one store: no copy is later than another
				for g := range sp {
					if red {
						l.bufferRed(w, ln, in.pc, l.seq, globalAddr(g0+g, off), buf, in.op, in.t)
					} else {
						l.buffer(w, ln, in.pc, l.seq, globalAddr(g0+g, off), buf)
					}
				}
				continue
			}
			if l.weak && !red && len(l.recs) > 0 {
				for g := range sp {
					if a := globalAddr(g0+g, off); l.recorded(a) {
						l.overwrite(a, tot, false)
					}
				}
			}
			for _, b := range sp {
				if red {
					applyRed(b, buf, in.op, in.t)
				} else {
					copy(b, buf)
				}
			}
			l.progressed()
		}
	}
}

// reduceAcross reduces the element at byte offset o over every GPU's copy, in GPU order.
// wide is the accumulator precision qualifier (.acc::f32 of f16/bf16, .acc::f16 of fp8).
func reduceAcross(sp [][]byte, o, es int, op uint8, t ptx.Type, wide bool) uint64 {
	if f, lanes := fp8Lanes(t); lanes > 0 {
		var r uint64
		for j := 0; j < lanes; j++ {
			r |= reduceFP8(sp, o+j, op, f, wide) << (8 * j)
		}
		return r
	}
	accF32 := wide
	if t == ptx.F16x2 || t == ptx.BF16x2 {
		st := scalarHalf(t)
		var lo, hi [MaxGPUs][]byte
		for g, b := range sp {
			lo[g], hi[g] = b[o:o+2], b[o+2:o+4]
		}
		return reduceAcross(hi[:len(sp)], 0, 2, op, st, accF32)<<16 | reduceAcross(lo[:len(sp)], 0, 2, op, st, accF32)
	}
	acc := getN(sp[0][o:], es)
	if (t == ptx.F16 || t == ptx.BF16) && accF32 && op == aAdd {
		wid, nar := h2f, f2h
		if t == ptx.BF16 {
			wid, nar = bh2f, f2bh
		}
		s := float32(wid(acc))
		for _, b := range sp[1:] {
			s += float32(wid(getN(b[o:], es)))
		}
		return canonHalf(t)(nar(float64(s))) // a NaN 0x7fff as atomApply's (not measured)
	}
	for _, b := range sp[1:] {
		acc = atomApply(op, t, acc, getN(b[o:], es), 0)
	}
	return acc
}

// fp8Lanes returns the format and lane count of an fp8 multimem type (0 lanes otherwise).
func fp8Lanes(t ptx.Type) (*fmtInfo, int) {
	switch t {
	case ptx.E4M3, ptx.E4M3x2, ptx.E4M3x4:
		return &fmtE4M3, t.Bits() / 8
	case ptx.E5M2, ptx.E5M2x2, ptx.E5M2x4:
		return &fmtE5M2, t.Bits() / 8
	}
	return nil, 0
}

// reduceFP8 reduces the fp8 byte at offset o over every GPU's copy, in GPU order. add with
// .acc::f16 (accF16) widens each value to f16 exactly, sums in f16 rounding to nearest even
// at each step, and rounds the sum to the fp8 format once; add without it rounds to the fp8
// format at each step. min and max compare values (a NaN operand gives NaN; -0 < +0). The
// result rounds to nearest even and does not saturate: beyond the format's largest finite
// value it is ±Inf for e5m2 and NaN for e4m3, as cvt without .satfinite gives (an f16 sum
// that overflowed to ±Inf gives the same). The PTX ISA does not define the overflow; this is
// the emulator's choice.
func reduceFP8(sp [][]byte, o int, op uint8, f *fmtInfo, accF16 bool) uint64 {
	acc := f.decode(uint64(sp[0][o]))
	for _, b := range sp[1:] {
		x := f.decode(uint64(b[o]))
		switch op {
		case aAdd:
			acc += x // exact in float64: both are f16 or fp8 values
			if accF16 {
				acc = fmtF16.round(acc, rndNear)
			} else {
				acc = f.round(acc, rndNear)
			}
		case aMin, aMax:
			switch {
			case math.IsNaN(acc) || math.IsNaN(x):
				acc = math.NaN()
			case op == aMin && (x < acc || x == acc && math.Signbit(x)):
				acc = x
			case op == aMax && (x > acc || x == acc && !math.Signbit(x)):
				acc = x
			}
		}
	}
	return f.encode(f.round(acc, rndNear), false)
}

func execFence(w *warp, in *dinst, m uint32) {
	l := w.l
	if l.gRace {
		for x := m; x != 0; x &= x - 1 {
			ln := bits.TrailingZeros32(x)
			l.raceRelease(w, ln, in.scope)
			l.raceAcquire(w, ln, in.scope)
		}
	}
	if !l.weak {
		return
	}
	for x := m; x != 0; x &= x - 1 {
		l.release(w, bits.TrailingZeros32(x), in)
	}
}

func cvtaFn(space uint8, to bool, t ptx.Type) laneFn {
	mask := widthMask(t.Bits())
	var reg uint64
	switch space {
	case spShared:
		reg = regionShared
	case spLocal:
		reg = regionLocal
	default:
		return func(a, _, _, _ uint64) uint64 { return a & mask }
	}
	if to {
		return func(a, _, _, _ uint64) uint64 {
			if region(a) == reg {
				return a & offMask & mask
			}
			return a & mask
		}
	}
	return func(a, _, _, _ uint64) uint64 { return reg<<regionShift | a&offMask }
}

func isspaceFn(space uint8) laneFn {
	return func(a, _, _, _ uint64) uint64 {
		r := region(a)
		var ok bool
		switch space {
		case spShared:
			ok = r == regionShared
		case spLocal:
			ok = r == regionLocal
		case spGlobal, spConst:
			ok = r >= regionGlobal0
		}
		if ok {
			return 1
		}
		return 0
	}
}
