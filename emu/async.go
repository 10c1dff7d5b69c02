package emu

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/kgen-dev/kgen/ptx"
)

// mbarrier objects live in 8 bytes of shared memory, encoded by the emulator:
// bits 0-20 pending arrivals, 21-41 expected arrivals, 42-62 the transaction count (signed),
// bit 63 the current phase's parity. arrive returns the old word as the opaque state.
const (
	mbCountBits = 21
	mbCountMask = 1<<mbCountBits - 1
)

type mbar struct {
	pending, expected int64
	tx                int64
	phase             uint64
}

func mbDecode(v uint64) mbar {
	return mbar{pending: int64(v & mbCountMask), expected: int64(v >> 21 & mbCountMask),
		tx: sext(v>>42&mbCountMask, mbCountBits), phase: v >> 63}
}

func (m mbar) encode() uint64 {
	return uint64(m.pending)&mbCountMask | (uint64(m.expected)&mbCountMask)<<21 | (uint64(m.tx)&mbCountMask)<<42 | m.phase<<63
}

// mbMaxCount is the largest arrival count and the largest transaction count (either sign)
// of an mbarrier phase (PTX: 2^20-1); the fields above hold no more, so a larger value
// faults instead of wrapping.
const mbMaxCount = 1<<20 - 1

// mbCountErr returns what is wrong with an operation's count v of kind what ("count" of an
// init or arrive: 1 to mbMaxCount; "transaction count": 0 to mbMaxCount), or "".
func mbCountErr(what string, v uint64) string {
	low := uint64(0)
	if what == "count" {
		low = 1
	}
	if v < low || v > mbMaxCount {
		return fmt.Sprintf("mbarrier %s %d: want %d to %d (2^20-1)", what, v, low, mbMaxCount)
	}
	return ""
}

// txErr returns what is wrong with a phase's transaction count after an update, or "".
func (m mbar) txErr() string {
	if m.tx > mbMaxCount || m.tx < -mbMaxCount {
		return fmt.Sprintf("the mbarrier's transaction count reaches %d: a phase holds -%d to %d (2^20-1) bytes", m.tx, mbMaxCount, mbMaxCount)
	}
	return ""
}

// mbarrierNotShared is the fault of an mbarrier operation on an address outside shared
// memory (PTX leaves it undefined; the object is 8 bytes of .shared).
func mbarrierNotShared(addr uint64) *memFault {
	return faultf(KindBadAddress, "mbarrier at %#x is not in shared memory: an mbarrier object lives in .shared (a global or local address used with a generic mbarrier operation?)", addr)
}

// complete moves to the next phase when nothing is pending.
func (m *mbar) complete() bool {
	if m.pending <= 0 && m.tx == 0 {
		m.phase ^= 1
		m.pending = m.expected
		return true
	}
	return false
}

// mbarrier sub-operations
const (
	mbInit uint8 = iota
	mbInval
	mbArrive
	mbArriveDrop
	mbExpectTx
	mbCompleteTx
	mbTestWait
	mbPendingCount
	mbCpAsyncArrive // cp.async.mbarrier.arrive.noinc
)

func execMbarrier(w *warp, in *dinst, m uint32) {
	l := w.l
	for x := m; x != 0; x &= x - 1 {
		ln := bits.TrailingZeros32(x)
		if in.op == mbPendingCount {
			w.r[in.d+int32(ln)] = w.r[in.b+int32(ln)] & mbCountMask
			continue
		}
		b, wh, off, f := w.span(in, ln, w.ea(in, ln), 8)
		if f == nil && wh != whShared {
			f = mbarrierNotShared(w.ea(in, ln))
		}
		if f != nil {
			w.memFault(in, ln, f)
			return
		}
		old := getN(b, 8)
		mb := mbDecode(old)
		arg := uint64(1)
		if in.c >= 0 {
			arg = w.r[in.c+int32(ln)] & 0xffffffff
			what := "count"
			switch {
			case in.op == mbExpectTx || in.op == mbCompleteTx:
				what = "transaction count"
			case in.op == mbArrive || in.op == mbArriveDrop:
				if in.flags&1 != 0 {
					what = "transaction count"
				}
			}
			if in.op != mbTestWait {
				if msg := mbCountErr(what, arg); msg != "" {
					w.fault(in, ln, KindBarrier, msg)
					return
				}
			}
		}
		switch in.op {
		case mbInit:
			mb = mbar{pending: int64(arg), expected: int64(arg)}
		case mbInval:
			mb = mbar{}
		case mbArrive, mbArriveDrop, mbCpAsyncArrive:
			if l.gRace { // an arrive releases (at block scope)
				l.raceRelease(w, ln, scCTA)
			}
			if in.flags&1 != 0 { // .expect_tx: the operand is the transaction count
				mb.tx += int64(arg)
				arg = 1
			}
			mb.pending -= int64(arg)
			if in.op == mbArriveDrop {
				mb.expected -= int64(arg)
			}
			if mb.pending < 0 && l.sanitize {
				w.fault(in, ln, KindBarrier, fmt.Sprintf("mbarrier at %#x: more arrivals than expected in this phase", w.ea(in, ln)))
				return
			}
			mb.complete()
			if in.d >= 0 {
				w.r[in.d+int32(ln)] = old
			}
		case mbExpectTx:
			mb.tx += int64(arg)
		case mbCompleteTx:
			mb.tx -= int64(arg)
			mb.complete()
		case mbTestWait:
			var done bool
			if in.flags&2 != 0 { // .parity: the phase with this parity has completed
				done = mb.phase != arg&1
			} else {
				done = mb.phase != w.r[in.b+int32(ln)]>>63
			}
			v := uint64(0)
			if done {
				v = 1
				if l.gRace { // a completed wait acquires (at block scope)
					l.raceAcquire(w, ln, scCTA)
				}
			} else {
				w.spin = true
			}
			w.noteMbWait(in, ln, off, done)
			w.r[in.d+int32(ln)] = v
			continue
		}
		if msg := mb.txErr(); msg != "" {
			w.fault(in, ln, KindBarrier, msg)
			return
		}
		if nv := mb.encode(); nv != old {
			putN(b, 8, nv)
			l.progressed()
		}
	}
}

// completeTx applies complete_tx(bytes) to the mbarrier at shared/generic address a.
func (w *warp) completeTx(in *dinst, ln int, bar *dinst, bytes int) bool {
	b, wh, _, f := w.span(bar, ln, w.ea(bar, ln), 8)
	if f == nil && wh != whShared {
		f = mbarrierNotShared(w.ea(bar, ln))
	}
	if f != nil {
		w.memFault(in, ln, f)
		return false
	}
	mb := mbDecode(getN(b, 8))
	mb.tx -= int64(bytes)
	if msg := mb.txErr(); msg != "" {
		w.fault(in, ln, KindBarrier, msg)
		return false
	}
	mb.complete()
	putN(b, 8, mb.encode())
	w.l.progressed()
	return true
}

func (d *decoder) decodeMbarrier(di *dinst, in *ptx.Instr, toks tokens) error {
	if len(toks) < 2 {
		return errUnsupported
	}
	args := in.Args
	di.space = spShared
	if spaceOf(toks) == spGeneric {
		di.space = spGeneric
	}
	di.sem, di.scope = semOf(toks)
	di.align = 8
	di.exec = execMbarrier
	var err error
	addrAt := func(i int) error {
		if i >= len(args) {
			return errors.New("missing mbarrier address")
		}
		return d.addr(di, args[i])
	}
	count := func(i int) error {
		if i < len(args) {
			di.c, err = d.src(args[i], ptx.U32)
		}
		return err
	}
	switch toks[1] {
	case "init":
		di.op = mbInit
		if err := addrAt(0); err != nil {
			return err
		}
		return count(1)
	case "inval":
		di.op = mbInval
		return addrAt(0)
	case "arrive", "arrive_drop":
		di.op = mbArrive
		if toks[1] == "arrive_drop" {
			di.op = mbArriveDrop
		}
		if toks.has("expect_tx") {
			di.flags |= 1
		}
		if len(args) < 2 {
			return errors.New("mbarrier.arrive takes state, [addr]{, count}")
		}
		if _, sink := args[0].(ptx.Sink); !sink {
			if di.d, _, err = d.dst(args[0]); err != nil {
				return err
			}
		}
		if err := addrAt(1); err != nil {
			return err
		}
		return count(2)
	case "expect_tx", "complete_tx":
		di.op = mbExpectTx
		if toks[1] == "complete_tx" {
			di.op = mbCompleteTx
		}
		if err := addrAt(0); err != nil {
			return err
		}
		return count(1)
	case "test_wait", "try_wait":
		di.op = mbTestWait
		if len(args) < 3 {
			return errors.New("mbarrier.test_wait takes waitComplete, [addr], state")
		}
		if di.d, _, err = d.dst(args[0]); err != nil {
			return err
		}
		if err := addrAt(1); err != nil {
			return err
		}
		if toks.has("parity") {
			di.flags |= 2
			return count(2)
		}
		di.b, err = d.src(args[2], ptx.B64)
		return err
	case "pending_count":
		di.op = mbPendingCount
		if len(args) != 2 {
			return errors.New("mbarrier.pending_count takes count, state")
		}
		if di.d, _, err = d.dst(args[0]); err != nil {
			return err
		}
		di.b, err = d.src(args[1], ptx.B64)
		return err
	}
	return errUnsupported
}

// spacesOf returns the first two state-space qualifiers (destination, source).
func spacesOf(toks tokens) []uint8 {
	var out []uint8
	for _, x := range toks[1:] {
		switch x {
		case "global":
			out = append(out, spGlobal)
		case "shared", "shared::cta", "shared::cluster":
			out = append(out, spShared)
		}
	}
	return out
}

// decodeBulk: cp.async.bulk and cp.reduce.async.bulk into shared memory copy (or reduce) at
// once and then complete their mbarrier transaction; into global memory they join the
// thread's bulk groups (bulk.go).
func (d *decoder) decodeBulk(di *dinst, in *ptx.Instr, toks tokens, reduce bool) error {
	args := in.Args
	sp := spacesOf(toks)
	if len(sp) < 2 || len(args) < 3 {
		return errUnsupported
	}
	dst := &dinst{space: sp[0], vec: 1, src: in, a: -1}
	src := &dinst{space: sp[1], vec: 1, src: in, a: -1}
	if err := d.addr(dst, args[0]); err != nil {
		return err
	}
	if err := d.addr(src, args[1]); err != nil {
		return err
	}
	size, err := d.src(args[2], ptx.U32)
	if err != nil {
		return err
	}
	var bar *dinst
	if toks.has("mbarrier::complete_tx::bytes") {
		if len(args) < 4 {
			return errors.New("missing the mbarrier operand")
		}
		bar = &dinst{space: spShared, vec: 1, src: in, a: -1}
		if err := d.addr(bar, args[3]); err != nil {
			return err
		}
		if toks.has("multicast::cluster") { // the ctaMask (cluster.go)
			if len(args) < 5 {
				return errors.New("missing the ctaMask operand")
			}
			if di.c, err = d.src(args[4], ptx.B16); err != nil {
				return err
			}
		}
	}
	op := uint8(0)
	t := in.Type()
	if reduce {
		opn := toks.any("add", "min", "max", "inc", "dec", "and", "or", "xor")
		if opn == "" || t == ptx.NoType {
			return errUnsupported
		}
		op = atomOps[opn]
	}
	di.sub = []*dinst{dst, src, bar}
	di.b = size
	toGlobal := sp[0] == spGlobal
	di.exec = func(w *warp, in *dinst, m uint32) {
		dst, src, bar := in.sub[0], in.sub[1], in.sub[2]
		for x := m; x != 0; x &= x - 1 {
			ln := bits.TrailingZeros32(x)
			n := int(w.r[in.b+int32(ln)] & 0xffffffff)
			// The GPU faults on a size or an address off the 16-byte rule.
			da, sa := w.ea(dst, ln), w.ea(src, ln)
			switch {
			case n%16 != 0:
				w.fault(in, ln, KindMisaligned, fmt.Sprintf("a bulk copy of %d bytes: the size must be a multiple of 16", n))
				return
			case da%16 != 0 || sa%16 != 0:
				w.fault(in, ln, KindMisaligned, fmt.Sprintf("a bulk copy from %#x to %#x: both addresses must be 16-byte aligned", sa, da))
				return
			}
			sb, swh, soff, f := w.span(src, ln, sa, n)
			if f != nil {
				w.memFault(in, ln, f)
				return
			}
			if toGlobal { // a store or reduction: queued in the thread's bulk groups (bulk.go)
				if swh != whShared || soff > clusterOffMask {
					w.fault(in, ln, KindBadAddress, fmt.Sprintf("the source %#x of a bulk copy to global memory is not in the block's shared memory", sa))
					return
				}
				db, _, _, f := w.span(dst, ln, da, n)
				if f != nil {
					w.memFault(in, ln, f)
					return
				}
				w.bulkIssue(in, ln, soff, n, db, reduce, op, t)
				continue
			}
			if in.c >= 0 {
				if !w.multicastCopy(in, ln, sb, dst, bar) {
					return
				}
				continue
			}
			db, dwh, doff, f := w.span(dst, ln, da, n)
			if f != nil {
				w.memFault(in, ln, f)
				return
			}
			if dwh == whShared && !w.bulkWriteOK(in, ln, doff, n) {
				return
			}
			if reduce {
				applyRed(db, sb, op, t)
			} else {
				copy(db, sb)
			}
			w.l.progressed()
			if bar != nil && !w.completeTx(in, ln, bar, n) {
				return
			}
		}
	}
	return nil
}

// decodeStAsync: st.async / red.async to shared::cluster (the block a shared::cluster address
// names: cluster.go), completing a transaction of the access's size on the mbarrier.
func (d *decoder) decodeStAsync(di *dinst, in *ptx.Instr, toks tokens, red bool) error {
	args := in.Args
	t := in.Type()
	if len(args) != 3 || t == ptx.NoType {
		return errUnsupported
	}
	n := vecOf(toks)
	di.space = spShared
	di.vec, di.size, di.align = uint8(n), uint8(t.Bytes()), uint8(n*t.Bytes())
	if err := d.addr(di, args[0]); err != nil {
		return err
	}
	var elems []ptx.Operand
	if v, ok := args[1].(ptx.Vec); ok {
		elems = v
	} else {
		elems = []ptx.Operand{args[1]}
	}
	for _, e := range elems {
		s, err := d.src(e, t)
		if err != nil {
			return err
		}
		di.av = append(di.av, s)
	}
	bar := &dinst{space: spShared, vec: 1, src: in, a: -1}
	if err := d.addr(bar, args[2]); err != nil {
		return err
	}
	op := uint8(0)
	if red {
		opn := toks.any("add", "min", "max", "inc", "dec", "and", "or", "xor")
		if opn == "" {
			return errUnsupported
		}
		op = atomOps[opn]
	}
	tot := n * t.Bytes()
	di.sub = []*dinst{bar}
	di.exec = func(w *warp, in *dinst, m uint32) {
		bar := in.sub[0]
		for x := m; x != 0; x &= x - 1 {
			ln := bits.TrailingZeros32(x)
			b, _, _, f := w.span(in, ln, w.ea(in, ln), tot)
			if f != nil {
				w.memFault(in, ln, f)
				return
			}
			if red {
				old := getN(b, tot)
				putN(b, tot, atomApply(op, t, old, w.r[in.av[0]+int32(ln)], 0))
			} else {
				w.storeValue(in, ln, b)
			}
			w.l.progressed()
			if !w.completeTx(in, ln, bar, tot) {
				return
			}
		}
	}
	return nil
}

// Small integer operations added to the ISA recently.

func bmskFn(clamp bool) laneFn {
	return func(a, b, _, _ uint64) uint64 {
		pos, ln := a&0xffffffff, b&0xffffffff
		if clamp {
			pos, ln = min(pos, 32), min(ln, 32)
		} else {
			pos, ln = pos&31, ln&31
		}
		return (uint64(1)<<ln - 1) << pos & 0xffffffff
	}
}

func szextFn(clamp, signed bool) laneFn {
	return func(a, b, _, _ uint64) uint64 {
		n := b & 0xffffffff
		if clamp {
			n = min(n, 32)
		} else {
			n &= 31
		}
		if n == 0 {
			return 0
		}
		if signed {
			return uint64(sext(a&widthMask(int(n)), int(n))) & 0xffffffff
		}
		return a & widthMask(int(n))
	}
}

func dp4aFn(as, bs bool) laneFn {
	return func(a, b, c, _ uint64) uint64 {
		s := int64(int32(uint32(c)))
		for i := 0; i < 4; i++ {
			x, y := int64(a>>(8*i)&0xff), int64(b>>(8*i)&0xff)
			if as {
				x = int64(int8(x))
			}
			if bs {
				y = int64(int8(y))
			}
			s += x * y
		}
		return uint64(s) & 0xffffffff
	}
}

func dp2aFn(as, bs, hi bool) laneFn {
	return func(a, b, c, _ uint64) uint64 {
		s := int64(int32(uint32(c)))
		for i := 0; i < 2; i++ {
			x := int64(a >> (16 * i) & 0xffff)
			if as {
				x = int64(int16(x))
			}
			k := i
			if hi {
				k += 2
			}
			y := int64(b >> (8 * k) & 0xff)
			if bs {
				y = int64(int8(y))
			}
			s += x * y
		}
		return uint64(s) & 0xffffffff
	}
}

func slctFn(st ptx.Type, ftz bool) laneFn {
	if st == ptx.F32 {
		return func(a, b, c, _ uint64) uint64 {
			v := f32(c)
			if ftz {
				v = ftz32(v)
			}
			if v >= 0 {
				return a
			}
			return b
		}
	}
	return func(a, b, c, _ uint64) uint64 {
		if int32(uint32(c)) >= 0 {
			return a
		}
		return b
	}
}
