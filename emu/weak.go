package emu

import (
	"container/heap"

	"github.com/kgen-dev/kgen/ptx"
)

// pendingStore is a weak or relaxed store (or reduction) to another GPU's memory or to
// multicast memory that other threads cannot see yet (weak mode).
type pendingStore struct {
	w         *warp
	lane      int
	blk       *block
	blockWide bool // a barrier of the block ordered it before later releases of any thread there
	done      bool
	seq       uint64 // the launch's store counter at the first store this entry holds
	last      uint64 // ... and at the last one (a later store to the same bytes merges in)
	pub       uint64 // blockWide: the counter when a full barrier ordered it (noPub: none)
	pc        int32  // the first store's instruction
	lpc       int32  // the last store's instruction
	addr      uint64
	n         int
	data      [32]byte
	red       bool
	redOp     uint8
	redType   ptx.Type
	due       int64
	hidx      int
}

// pendHeap orders buffered stores by the step at which they become visible on their own.
type pendHeap []*pendingStore

func (h pendHeap) Len() int           { return len(h) }
func (h pendHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h pendHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].hidx = i; h[j].hidx = j }
func (h *pendHeap) Push(x any)        { e := x.(*pendingStore); e.hidx = len(*h); *h = append(*h, e) }
func (h *pendHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

const granule = 16

func (l *launch) delay() int64 {
	d := l.opt.MaxDelay
	if d <= 0 {
		d = 20000
	}
	return l.steps + 1 + int64(l.rng.Intn(d))
}

// noPub marks a buffered store that no full barrier has ordered before later stores.
const noPub = ^uint64(0)

// buffer queues a store by instruction pc, the launch's seq-th store (the copies of one
// multimem store share it); the caller has checked it is in bounds. A later store of the
// same thread to the same bytes replaces the queued value (so one thread's stores to one
// location stay in order).
func (l *launch) buffer(w *warp, lane int, pc int32, seq uint64, addr uint64, data []byte) {
	for _, e := range l.pendIdx[addr/granule] {
		if !e.done && !e.red && e.w == w && e.lane == lane && e.addr == addr && e.n == len(data) {
			copy(e.data[:], data)
			e.last, e.lpc = seq, pc
			return
		}
	}
	e := &pendingStore{w: w, lane: lane, blk: w.b, addr: addr, n: len(data), due: l.delay(),
		seq: seq, last: seq, pub: noPub, pc: pc, lpc: pc}
	copy(e.data[:], data)
	l.addPending(e)
}

func (l *launch) bufferRed(w *warp, lane int, pc int32, seq uint64, addr uint64, data []byte, op uint8, t ptx.Type) {
	e := &pendingStore{w: w, lane: lane, blk: w.b, addr: addr, n: len(data), red: true, redOp: op, redType: t, due: l.delay(),
		seq: seq, last: seq, pub: noPub, pc: pc, lpc: pc}
	copy(e.data[:], data)
	l.addPending(e)
}

func (l *launch) addPending(e *pendingStore) {
	if l.pendIdx == nil {
		l.pendIdx = map[uint64][]*pendingStore{}
	}
	for g := e.addr / granule; g <= (e.addr+uint64(e.n)-1)/granule; g++ {
		l.pendIdx[g] = append(l.pendIdx[g], e)
	}
	e.w.pend[e.lane] = append(e.w.pend[e.lane], e)
	e.w.pn[e.lane]++
	heap.Push(&l.pendQ, e)
	l.npend++
}

// apply makes a buffered store visible. random says it happens at its random time rather
// than at a release, fence or the end of the kernel: other stores of its thread may still
// be buffered, so readers that see it are remembered (missing-fence detector).
func (l *launch) apply(e *pendingStore, random bool) {
	if e.done {
		return
	}
	e.done = true
	l.npend--
	if e.blockWide {
		e.blk.nwide--
	} else {
		e.w.pn[e.lane]--
	}
	for g := e.addr / granule; g <= (e.addr+uint64(e.n)-1)/granule; g++ {
		list := l.pendIdx[g]
		for i, x := range list {
			if x == e {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(l.pendIdx, g)
		} else {
			l.pendIdx[g] = list
		}
	}
	if e.hidx >= 0 && e.hidx < len(l.pendQ) && l.pendQ[e.hidx] == e {
		heap.Remove(&l.pendQ, e.hidx)
	}
	b, f := l.sys.globalSpan(e.addr, e.n)
	if f != nil {
		if l.npend == 0 {
			l.quiet()
		}
		return // checked when buffered; the allocation was freed since
	}
	if e.red {
		applyRed(b, e.data[:e.n], e.redOp, e.redType)
	} else {
		copy(b, e.data[:e.n])
	}
	l.progressed()
	switch {
	case l.npend == 0:
		l.quiet()
	case random && l.fences && (e.blk.nwide > 0 || e.w.olderPending(e.lane, e.last)):
		l.record(wrec{addr: e.addr, n: int32(e.n), blk: e.blk, w: e.w, lane: int32(e.lane), seq: e.last, pc: e.lpc, rmw: e.red})
	case l.recorded(e.addr):
		l.overwrite(e.addr, e.n, e.red)
	}
}

// flushThread makes visible the stores of thread (w, lane), and those a barrier of its block
// ordered before it: what a release or a fence by that thread does.
func (l *launch) flushThread(w *warp, lane int) {
	if l.npend == 0 {
		return
	}
	b := w.b
	for _, e := range b.wide {
		l.apply(e, false)
	}
	b.wide = b.wide[:0]
	for _, e := range w.pend[lane] {
		l.apply(e, false)
	}
	w.pend[lane] = w.pend[lane][:0]
	w.pfirst[lane] = 0
}

// flushThreadLocal is what a .cta or .cluster release or fence by thread (w, lane) does: it
// makes visible the thread's buffered stores, and those a barrier of its block ordered
// before it, into its own GPU's memory, where the threads that synchronize with it at that
// scope read them (making them visible to every GPU is allowed: earlier than required). Its
// stores into other GPUs' memory stay buffered, so a kernel that publishes to another GPU at
// block scope still fails. (A block that synchronizes at block scope through another GPU's
// memory is correct but not modelled: weak mode may report it.)
func (l *launch) flushThreadLocal(w *warp, lane int) {
	if l.npend == 0 {
		return
	}
	own := func(e *pendingStore) bool { return int(region(e.addr)-regionGlobal0) == w.b.gpu }
	b := w.b
	keep := b.wide[:0]
	for _, e := range b.wide {
		if own(e) {
			l.apply(e, false)
		} else {
			keep = append(keep, e)
		}
	}
	clear(b.wide[len(keep):])
	b.wide = keep
	for _, e := range w.pend[lane] {
		if own(e) {
			l.apply(e, false)
		}
	}
}

// olderPending reports whether thread (w, lane) has a buffered store, not yet visible and
// not made block-wide by a barrier, older than store counter seq (pend is in counter order).
func (w *warp) olderPending(lane int, seq uint64) bool {
	if w.pn[lane] == 0 {
		return false
	}
	p, i := w.pend[lane], int(w.pfirst[lane])
	for i < len(p) && p[i].done {
		i++
	}
	w.pfirst[lane] = int32(i)
	return i < len(p) && p[i].seq < seq
}

// publishBlock: a barrier completed in b, so its threads' buffered stores are ordered before
// any later release by any thread of b (cumulativity through bar.sync). full says every
// thread of the block waited at it: then every store of the block from now on follows them.
func (l *launch) publishBlock(b *block, full bool) {
	if full && len(b.obs) > 0 {
		b.mergeObs(l)
	}
	if l.npend == 0 {
		return
	}
	pub := noPub
	if full {
		pub = l.seq
	}
	for _, w := range b.warps {
		for ln := range w.pend {
			for _, e := range w.pend[ln] {
				if !e.done {
					e.blockWide = true
					e.pub = pub
					b.wide = append(b.wide, e)
					b.nwide++
				}
			}
			w.pend[ln] = w.pend[ln][:0]
			w.pn[ln], w.pfirst[ln] = 0, 0
		}
	}
}

// flushDue makes visible the buffered stores whose random delay has passed.
func (l *launch) flushDue() {
	for len(l.pendQ) > 0 && l.pendQ[0].due <= l.steps {
		l.apply(l.pendQ[0], true)
	}
}

func (l *launch) flushAll() {
	for len(l.pendQ) > 0 {
		l.apply(l.pendQ[0], false)
	}
}

// forward overlays the thread's own buffered stores (and its block's published ones) on
// bytes just loaded from addr, so a thread sees its own writes.
func (l *launch) forward(w *warp, lane int, addr uint64, p []byte) {
	if len(w.pend[lane]) == 0 && len(w.b.wide) == 0 {
		return
	}
	end := addr + uint64(len(p))
	for g := addr / granule; g <= (end-1)/granule; g++ {
		for _, e := range l.pendIdx[g] {
			if e.done || e.red || !(e.w == w && e.lane == lane || e.blockWide && e.blk == w.b) {
				continue
			}
			lo, hi := max(addr, e.addr), min(end, e.addr+uint64(e.n))
			if lo >= hi {
				continue
			}
			copy(p[lo-addr:hi-addr], e.data[lo-e.addr:hi-e.addr])
		}
	}
}

// shadowByte is the race detector's record of one byte of shared memory.
type shadowByte struct {
	w, r     int32 // writer / reader: thread index + 1; r == -1: several readers
	we, re   uint32
	wwe, rwe uint32
	wpc, rpc int32
}
