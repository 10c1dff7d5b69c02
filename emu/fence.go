package emu

import "fmt"

// The missing-fence detector (weak mode only).
//
// A buffered store of thread T1 to X that is still invisible when T1's later store (to a
// flag F, say) becomes visible is the signature of a missing fence or release: if another
// thread T2 reads F, sees T1's value, and then reads X and gets the old value, T1 published
// F without ordering X before it. Seeing F first and X later is what message passing relies
// on, so this is reported (KindMissingFence) rather than left to show up as wrong data.
//
// "Later" is T1's program order, or its block's order through a full barrier: a store of
// any thread of the block after a bar.sync follows every store its threads made before it
// (the kernel's "all threads store, bar.sync, one thread raises the flag" pattern, where the
// flag must be a release or follow a fence). Reads by T2 are ordered the same way: what a
// thread of T2's block saw before a full barrier counts as seen by every thread after it.
//
// Only plain (weak) loads are checked: a .relaxed/.volatile/.acquire load may be polling
// for the value (Lamport-style kernels poll data stored with relaxed stores, which is
// correct), and only a store that was already visible while an earlier one of its writer
// was buffered can count as seen. Bookkeeping: every buffered store carries the launch's
// store counter (its first and last store to those bytes); when one becomes visible at its
// random time while its writer still has buffered stores, a record (wrec) remembers it at
// its address; a load that reads a record notes it in its block's seen-set (obs); a weak
// load that finds a buffered store of another thread in its bytes looks the writer up in
// the seen-set. Records and seen-sets are dropped whenever no store is left buffered.

// wrec is a store that became visible while its thread, or its block before a barrier,
// still had stores buffered. Records live in an arena (launch.recs), listed per 16-byte
// granule from a page table (launch.rpages: 256 list heads per 4 KiB page).
type wrec struct {
	addr uint64
	n    int32
	tid  int32 // the writer's thread index in its block
	lane int32
	next int32 // the next record of the granule: index+1 in launch.recs, 0 for none
	w    *warp
	blk  *block
	seq  uint64
	pc   int32
	rmw  bool // a reduction or atomic: later values still hold it
}

// useful reports whether a store of the writer older than the record may still be buffered.
func (r *wrec) useful() bool { return r.blk.nwide > 0 || r.w.olderPending(int(r.lane), r.seq) }

// recPage holds the heads of the record lists of the 256 granules of a 4 KiB page.
type recPage [4096 / granule]int32

// obsKey names what a block's threads have seen: stores of thread tid (-1: of any thread)
// of block blk, seen by thread reader of the block (-1: by a thread before a full barrier
// of the block, so by all of them); acq: seen by an acquire load or atomic (those count for
// .relaxed and .volatile readers too).
type obsKey struct {
	reader int32
	blk    *block
	tid    int32
	acq    bool
}

// obsVal is the latest such store seen: its counter and instruction, who read it and where.
type obsVal struct {
	seq    uint64
	tid    int32
	pc     int32
	reader int32
	rpc    int32
}

// recFilterBits sizes the filter of 4 KiB pages that may hold records: most loads and
// stores of a weak-mode launch are nowhere near a record and skip the page table.
const recFilterBits = 16

func recFilter(addr uint64) (int, uint64) {
	h := (addr >> 12) * 0x9E3779B97F4A7C15 >> (64 - recFilterBits)
	return int(h >> 6), 1 << (h & 63)
}

// recorded reports whether the page of addr may hold records (accesses are aligned to their
// size, at most 32 bytes: they never cross a page).
func (l *launch) recorded(addr uint64) bool {
	if len(l.recs) == 0 {
		return false
	}
	i, b := recFilter(addr)
	return l.rfilter[i]&b != 0
}

// recordedSpan reports whether any page of the n bytes at addr may hold records (for the
// accesses that can cross pages: an extern function's stores).
func (l *launch) recordedSpan(addr uint64, n int) bool {
	if len(l.recs) == 0 || n <= 0 {
		return false
	}
	for p := addr >> 12; p <= (addr+uint64(n)-1)>>12; p++ {
		if l.recorded(p << 12) {
			return true
		}
	}
	return false
}

// recHead returns the head of granule g's record list (nil: none and create is false).
func (l *launch) recHead(g uint64, create bool) *int32 {
	k := g / uint64(len(recPage{}))
	p := l.rlast
	if p == nil || l.rlastKey != k {
		p = l.rpages[k]
		if p == nil {
			if !create {
				return nil
			}
			p = new(recPage)
			l.rpages[k] = p
		}
		l.rlast, l.rlastKey = p, k
	}
	return &p[g%uint64(len(recPage{}))]
}

// unlink removes from the list at head the records for which drop is true.
func (l *launch) unlink(head *int32, drop func(x *wrec) bool) {
	for link := head; *link != 0; {
		x := &l.recs[*link-1]
		if drop(x) {
			*link = x.next
			continue
		}
		link = &x.next
	}
}

// record remembers a store made visible out of order; it replaces the records of the bytes
// it overwrites (a reduction only its own writer's earlier ones).
func (l *launch) record(r wrec) {
	if l.rpages == nil {
		l.rpages = map[uint64]*recPage{}
		l.rfilter = make([]uint64, 1<<recFilterBits/64)
	}
	i, b := recFilter(r.addr)
	l.rfilter[i] |= b
	end := r.addr + uint64(r.n)
	for g := r.addr / granule; g <= (end-1)/granule; g++ {
		head := l.recHead(g, true)
		l.unlink(head, func(x *wrec) bool {
			return x.addr < end && r.addr < x.addr+uint64(x.n) && (!r.rmw || x.blk == r.blk && x.tid == r.tid)
		})
		r.next = *head
		l.recs = append(l.recs, r)
		*head = int32(len(l.recs))
	}
}

// overwrite drops the records of bytes a store that is not recorded replaces.
func (l *launch) overwrite(addr uint64, n int, rmw bool) {
	if rmw {
		return // the new value still holds the recorded stores
	}
	end := addr + uint64(n)
	for g := addr / granule; g <= (end-1)/granule; g++ {
		if head := l.recHead(g, false); head != nil {
			l.unlink(head, func(x *wrec) bool { return x.addr < end && addr < x.addr+uint64(x.n) })
		}
	}
}

// quiet: no store is buffered any more, so nothing recorded or seen can be out of order
// with a later buffered store (those get larger counters).
func (l *launch) quiet() {
	if len(l.recs) > 0 {
		clear(l.rpages)
		clear(l.rfilter)
		clear(l.recs)
		l.recs = l.recs[:0]
		l.rlast = nil
	}
	l.gen++
}

// recordAtomic: an atomic of thread (w, ln) wrote n bytes at addr directly.
func (l *launch) recordAtomic(w *warp, in *dinst, ln int, addr uint64, n int) {
	rmw := in.op != aExch && in.op != aCas
	if w.pn[ln] > 0 || w.b.nwide > 0 {
		l.seq++
		l.record(wrec{addr: addr, n: int32(n), tid: int32(w.idx*32 + ln), lane: int32(ln), w: w, blk: w.b, seq: l.seq, pc: in.pc, rmw: rmw})
	} else if l.recorded(addr) {
		l.overwrite(addr, n, rmw)
	}
}

// observe notes the recorded stores that lane ln's load of n bytes at addr reads.
func (l *launch) observe(w *warp, in *dinst, ln int, addr uint64, n int) {
	b := w.b
	me := int32(w.idx*32 + ln)
	end := addr + uint64(n)
	for g := addr / granule; g <= (end-1)/granule; g++ {
		head := l.recHead(g, false)
		if head == nil {
			continue
		}
		for i := *head; i != 0; {
			r := &l.recs[i-1]
			i = r.next
			if r.addr >= end || r.addr+uint64(r.n) <= addr || r.blk == b && r.tid == me || !r.useful() {
				continue
			}
			if b.obs == nil {
				b.obs = map[obsKey]obsVal{}
			} else if b.obsGen != l.gen {
				clear(b.obs)
			}
			b.obsGen = l.gen
			v := obsVal{seq: r.seq, tid: r.tid, pc: r.pc, reader: me, rpc: in.pc}
			b.see(obsKey{me, r.blk, r.tid, false}, v)
			b.see(obsKey{me, r.blk, -1, false}, v)
			if in.sem == semAcquire || in.sem == semAcqRel {
				b.see(obsKey{me, r.blk, r.tid, true}, v)
				b.see(obsKey{me, r.blk, -1, true}, v)
			}
		}
	}
}

func (b *block) see(k obsKey, v obsVal) {
	if o, ok := b.obs[k]; !ok || v.seq > o.seq {
		b.obs[k] = v
	}
}

// mergeObs: a full barrier completed in b, so what any of its threads saw is seen by all.
func (b *block) mergeObs(l *launch) {
	if b.obsGen != l.gen {
		clear(b.obs)
		return
	}
	for k, v := range b.obs {
		if k.reader < 0 {
			continue
		}
		delete(b.obs, k)
		k.reader = -1
		b.see(k, v)
	}
}

// seen returns the latest store of thread tid (-1: any thread) of block blk that thread me
// of b has seen (acq: with an acquire).
func (b *block) seen(me int32, blk *block, tid int32, acq bool) (obsVal, bool) {
	o, ok := b.obs[obsKey{me, blk, tid, acq}]
	if p, ok2 := b.obs[obsKey{-1, blk, tid, acq}]; ok2 && (!ok || p.seq > o.seq) {
		o, ok = p, true
	}
	return o, ok
}

// staleRead checks lane ln's load of n bytes at addr, which has buffered stores in its
// bytes: it faults and returns true when one of them is older than a store of the same
// writer (or, through a barrier, of its block) that the reading thread has already seen
// (acq, for a .relaxed or .volatile load: seen with an acquire; such a load may be polling
// for the value otherwise).
func (l *launch) staleRead(w *warp, in *dinst, ln int, addr uint64, n int, acq bool) bool {
	b := w.b
	if b.obsGen != l.gen {
		clear(b.obs)
		return false
	}
	me := int32(w.idx*32 + ln)
	end := addr + uint64(n)
	for g := addr / granule; g <= (end-1)/granule; g++ {
		for _, e := range l.pendIdx[g] {
			if e.done || e.addr >= end || e.addr+uint64(e.n) <= addr || e.w == w && e.lane == ln || e.blockWide && e.blk == b {
				continue
			}
			et := int32(e.w.idx*32 + e.lane)
			if o, ok := b.seen(me, e.blk, et, acq); ok && o.seq > e.seq {
				l.missingFence(w, in, ln, addr, n, e, o, false)
				return true
			}
			if e.blockWide && e.pub != noPub {
				if o, ok := b.seen(me, e.blk, -1, acq); ok && o.seq > e.pub {
					l.missingFence(w, in, ln, addr, n, e, o, true)
					return true
				}
			}
		}
	}
	return false
}

func (l *launch) thread3(t int32) [3]int {
	bx, by := l.blk.X, l.blk.Y
	return [3]int{int(t) % bx, int(t) / bx % by, int(t) / (bx * by)}
}

func (l *launch) access(role string, b *block, t int32, pc int32) Access {
	if b.l != nil {
		l = b.l // the block's own grid (another kernel's, when grids run at once)
	}
	a := Access{Role: role, GPU: b.gpu, Block: b.id, Thread: l.thread3(t)}
	if pc >= 0 && int(pc) < len(l.prog.code) && l.prog.code[pc].src != nil {
		a.Instr = instrText(l.prog.code[pc].src)
		a.Pos = l.prog.code[pc].src.Pos
	}
	return a
}

func (a Access) who() string {
	return fmt.Sprintf("GPU %d block (%d,%d,%d) thread (%d,%d,%d)", a.GPU, a.Block[0], a.Block[1], a.Block[2], a.Thread[0], a.Thread[1], a.Thread[2])
}

func (a Access) what() string { return fmt.Sprintf("%q at %s", a.Instr, posString(a.Pos)) }

// missingFence reports lane ln's stale read of buffered store e after the reading block saw
// the later store o.
func (l *launch) missingFence(w *warp, in *dinst, ln int, addr uint64, n int, e *pendingStore, o obsVal, viaBarrier bool) {
	if l.err != nil {
		return
	}
	st := l.access("buffered store", e.blk, int32(e.w.idx*32+e.lane), e.pc)
	later := l.access("later store", e.blk, o.tid, o.pc)
	rd := l.access("read of the later store", w.b, o.reader, o.rpc)
	me := int32(w.idx*32 + ln)
	seer := "this thread"
	if o.reader != me {
		seer = fmt.Sprintf("thread (%d,%d,%d) of this block", rd.Thread[0], rd.Thread[1], rd.Thread[2])
	}
	var msg string
	if viaBarrier && o.tid != int32(e.w.idx*32+e.lane) {
		msg = fmt.Sprintf("reads %d bytes at %#x before they hold the store %s of %s, although %s has seen (with %s) the store %s that thread (%d,%d,%d) of the writer's block made after a barrier that followed it: "+
			"that later store publishes without ordering the block's earlier stores (missing release: make it a release store, or put a fence.acq_rel.sys after the barrier)",
			n, addr, st.what(), st.who(), seer, rd.what(), later.what(), later.Thread[0], later.Thread[1], later.Thread[2])
	} else {
		msg = fmt.Sprintf("reads %d bytes at %#x before they hold the store %s of %s, although %s has seen (with %s) that thread's later store %s: "+
			"the writer published the later store without ordering the earlier one before it (missing fence or release between them)",
			n, addr, st.what(), st.who(), seer, rd.what(), later.what())
	}
	w.fault(in, ln, KindMissingFence, msg)
	if err, ok := l.err.(*Error); ok {
		err.Related = []Access{st, later, rd}
	}
}
