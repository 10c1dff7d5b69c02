package emu

import (
	"errors"
	"fmt"

	"github.com/kgen-dev/kgen/ptx"
)

// cp.async (non-bulk): asynchronous copies from global to shared memory, completed per
// thread by cp.async.commit_group / cp.async.wait_group N / cp.async.wait_all, or by
// cp.async.mbarrier.arrive.
//
// A cp.async reads its source when it executes (the bytes src-size says, zero-filling the
// rest; nothing with src-size 0 or a true ignore-src predicate) but writes shared memory only
// when the issuing thread's wait completes it: the latest moment the PTX ISA allows, so a
// kernel that reads the destination early sees the old bytes. With the sanitizer on, any
// access to bytes a copy in flight will write (by any thread, the issuing one included) is
// reported. Copies that a thread never waits for never land. A commit_group with no copy since
// the last makes an empty group, which counts for wait_group N like any other (the PTX ISA's
// "empty cp.async-group"; CUTLASS's mainloop commits them past the last tile).

// KindCpAsync: an access to shared memory that a cp.async still in flight will write (its
// issuing thread has not waited for it with cp.async.wait_group/wait_all).
const KindCpAsync Kind = "cp.async in flight"

// cpCopy is one cp.async in flight.
type cpCopy struct {
	dst  uint64 // shared offset
	data []byte // the bytes to write
	in   *dinst
	lane int
	done bool
}

// cpThread is one thread's copies: issued but not committed, and committed groups.
type cpThread struct {
	open   []*cpCopy
	groups [][]*cpCopy
}

// cpState is a block's cp.async bookkeeping.
type cpState struct {
	threads []cpThread
	pend    []uint16 // per shared byte: copies in flight that write it
	n       int      // copies in flight
	warps   []*warp  // the issuing warp of each thread (for reports)
}

func (w *warp) cpState() *cpState {
	b := w.b
	if b.cp == nil {
		b.cp = &cpState{threads: make([]cpThread, len(b.warps)*32), pend: make([]uint16, len(b.shared)), warps: b.warps}
	}
	return b.cp
}

// cp.async sub-operations
const (
	cpCopyOp uint8 = iota
	cpCommit
	cpWaitGroup
	cpWaitAll
)

// decodeCpAsync decodes cp.async, its group operations and cp.async.mbarrier.arrive.
func (d *decoder) decodeCpAsync(di *dinst, in *ptx.Instr, toks tokens) error {
	args := in.Args
	switch {
	case toks.has("commit_group"):
		di.op, di.exec = cpCommit, execCpGroup
		return nil
	case toks.has("wait_all"):
		di.op, di.exec = cpWaitAll, execCpGroup
		return nil
	case toks.has("wait_group"):
		im, ok := firstImm(args)
		if !ok || int64(im.Bits) < 0 {
			return errors.New("cp.async.wait_group takes a non-negative integer immediate")
		}
		di.op, di.imm, di.exec = cpWaitGroup, im.Bits, execCpGroup
		return nil
	case toks.has("mbarrier") && toks.has("arrive"):
		// The arrive happens when the thread's prior copies complete: complete them now.
		if !toks.has("noinc") {
			// The default form's pending-count increment and arrive cancel out.
			di.exec = func(w *warp, in *dinst, m uint32) { w.cpFlushLanes(m) }
			return nil
		}
		if err := d.addr(di, args[0]); err != nil {
			return err
		}
		di.space, di.align, di.op = spShared, 8, mbCpAsyncArrive
		if spaceOf(toks) == spGeneric {
			di.space = spGeneric
		}
		di.exec = func(w *warp, in *dinst, m uint32) {
			w.cpFlushLanes(m)
			execMbarrier(w, in, m)
		}
		return nil
	}
	if len(args) < 3 {
		return errors.New("cp.async takes [dst], [src], cp-size{, src-size | ignore-src}")
	}
	dst := &dinst{space: spShared, vec: 1, a: -1}
	srcI := &dinst{space: spGlobal, vec: 1, a: -1}
	if spaceOf(toks) == spGeneric {
		return errors.New("cp.async needs .shared and .global")
	}
	if err := d.addr(dst, args[0]); err != nil {
		return err
	}
	if err := d.addr(srcI, args[1]); err != nil {
		return err
	}
	im, ok := args[2].(ptx.Imm)
	if !ok || im.Bits != 4 && im.Bits != 8 && im.Bits != 16 {
		return errors.New("cp.async cp-size must be the immediate 4, 8 or 16")
	}
	size := int(im.Bits)
	if len(args) >= 4 {
		if _, isImm := args[3].(ptx.Imm); !isImm && isPred(args[3]) {
			s, neg, err := d.pred(args[3])
			if err != nil {
				return err
			}
			di.c = s
			if neg {
				di.flags |= 1
			}
		} else {
			var err error
			if di.b, err = d.src(args[3], ptx.U32); err != nil {
				return err
			}
		}
	}
	dst.align, srcI.align = uint8(size), uint8(size)
	dst.src, srcI.src = in, in
	di.sub = []*dinst{dst, srcI}
	di.size, di.op, di.exec = uint8(size), cpCopyOp, execCpAsync
	return nil
}

func firstImm(args []ptx.Operand) (ptx.Imm, bool) {
	if len(args) != 1 {
		return ptx.Imm{}, false
	}
	im, ok := args[0].(ptx.Imm)
	return im, ok
}

func isPred(o ptx.Operand) bool {
	if r, ok := notOf(o); ok {
		return r.Type == ptx.Pred
	}
	r, ok := o.(ptx.Reg)
	return ok && r.Type == ptx.Pred
}

func execCpAsync(w *warp, in *dinst, m uint32) {
	dst, srcI := in.sub[0], in.sub[1]
	size := int(in.size)
	for x := m; x != 0; x &= x - 1 {
		ln := trailing(x)
		n := size
		switch {
		case in.c >= 0: // ignore-src
			if w.r[in.c+int32(ln)]&1 == 1 != (in.flags&1 != 0) {
				n = 0
			}
		case in.b >= 0:
			n = min(size, int(uint32(w.r[in.b+int32(ln)])))
		}
		data := make([]byte, size)
		if n > 0 {
			sb, _, _, f := w.span(srcI, ln, w.ea(srcI, ln), n)
			if f != nil {
				w.memFault(in, ln, f)
				return
			}
			copy(data, sb)
		}
		daddr := w.ea(dst, ln)
		if w.l.sanitize && daddr&uint64(size-1) != 0 {
			w.fault(in, ln, KindMisaligned, fmt.Sprintf("cp.async destination %#x is not %d-byte aligned", daddr, size))
			return
		}
		_, wh, off, f := w.span(dst, ln, daddr, size)
		if f != nil {
			w.memFault(in, ln, f)
			return
		}
		if wh != whShared {
			w.fault(in, ln, KindBadAddress, fmt.Sprintf("cp.async destination %#x is not in shared memory", daddr))
			return
		}
		c := w.cpState()
		t := &c.threads[w.idx*32+ln]
		t.open = append(t.open, &cpCopy{dst: off, data: data, in: in, lane: ln})
		for i := off; i < off+uint64(size); i++ {
			c.pend[i]++
		}
		c.n++
	}
}

func execCpGroup(w *warp, in *dinst, m uint32) {
	if w.b.cp == nil {
		// No copy was issued in this block: the groups committed so far are empty and the
		// oldest, so no later wait_group N completes anything different without them.
		return
	}
	c := w.b.cp
	for x := m; x != 0; x &= x - 1 {
		ln := trailing(x)
		t := &c.threads[w.idx*32+ln]
		if in.op != cpWaitGroup { // commit_group, wait_all: a group even with no copy in it
			t.groups = append(t.groups, t.open)
			t.open = nil
		}
		if in.op == cpCommit {
			continue
		}
		keep := 0
		if in.op == cpWaitGroup {
			keep = int(min(in.imm, uint64(len(t.groups))))
		}
		for _, g := range t.groups[:len(t.groups)-keep] {
			for _, cp := range g {
				c.complete(w, cp)
			}
		}
		t.groups = append(t.groups[:0], t.groups[len(t.groups)-keep:]...)
	}
}

// cpFlushLanes completes every copy in flight of the given lanes (cp.async.mbarrier.arrive).
func (w *warp) cpFlushLanes(m uint32) {
	c := w.b.cp
	if c == nil {
		return
	}
	for x := m; x != 0; x &= x - 1 {
		t := &c.threads[w.idx*32+trailing(x)]
		for _, cp := range t.open {
			c.complete(w, cp)
		}
		for _, g := range t.groups {
			for _, cp := range g {
				c.complete(w, cp)
			}
		}
		t.open, t.groups = nil, nil
	}
}

// complete lands a copy in shared memory.
func (c *cpState) complete(w *warp, cp *cpCopy) {
	if cp.done {
		return
	}
	cp.done = true
	// The race detector sees the write now: other threads need a barrier after this wait.
	if w.l.sanitize {
		w.race(cp.in, cp.lane, cp.dst, len(cp.data), true)
	}
	copy(w.b.shared[cp.dst:], cp.data)
	for i := cp.dst; i < cp.dst+uint64(len(cp.data)); i++ {
		c.pend[i]--
	}
	c.n--
	w.l.progressed()
}

// cpCheck reports an access of n bytes at shared offset off that touches bytes a cp.async
// in flight will write.
func (b *block) cpCheck(off uint64, n int) *memFault {
	c := b.cp
	if c == nil || c.n == 0 || !b.l.sanitize || off+uint64(n) > uint64(len(c.pend)) {
		return nil
	}
	hit := -1
	for i := off; i < off+uint64(n); i++ {
		if c.pend[i] != 0 {
			hit = int(i)
			break
		}
	}
	if hit < 0 {
		return nil
	}
	for ti := range c.threads {
		t := &c.threads[ti]
		for _, g := range append([][]*cpCopy{t.open}, t.groups...) {
			for _, cp := range g {
				if cp.done || uint64(hit) < cp.dst || uint64(hit) >= cp.dst+uint64(len(cp.data)) {
					continue
				}
				bx, by := b.l.blk.X, b.l.blk.Y
				where := ""
				if cp.in.src != nil {
					where = fmt.Sprintf(" with %q at %s", instrText(cp.in.src), posString(cp.in.src.Pos))
				}
				state := "committed but not waited for (no cp.async.wait_group/wait_all of that thread has completed it)"
				if containsCopy(t.open, cp) {
					state = "not even committed (no cp.async.commit_group after it)"
				}
				return faultf(KindCpAsync, "%d bytes at shared offset %#x overlap the destination of a cp.async that thread (%d,%d,%d) issued%s, still in flight: %s",
					n, off, ti%bx, ti/bx%by, ti/(bx*by), where, state)
			}
		}
	}
	return faultf(KindCpAsync, "%d bytes at shared offset %#x overlap the destination of a cp.async still in flight", n, off)
}

func containsCopy(l []*cpCopy, c *cpCopy) bool {
	for _, x := range l {
		if x == c {
			return true
		}
	}
	return false
}
