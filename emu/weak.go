package emu

import (
	"github.com/kgen-dev/kgen/ptx"
)

// pendingStore is a weak or relaxed store (or reduction) to another GPU's memory or to
// multicast memory that other threads cannot see yet (weak mode).
type pendingStore struct {
	w         *warp
	lane      int
	blk       *block
	blockWide bool // a barrier of the block ordered it before later releases of any thread there
	addr      uint64
	n         int
	data      [32]byte
	red       bool
	redOp     uint8
	redType   ptx.Type
	due       int64
}

func (l *launch) delay() int64 {
	d := l.opt.MaxDelay
	if d <= 0 {
		d = 20000
	}
	return l.steps + 1 + int64(l.rng.Intn(d))
}

// buffer queues a store; the caller has checked it is in bounds.
func (l *launch) buffer(w *warp, lane int, addr uint64, data []byte) {
	e := &pendingStore{w: w, lane: lane, blk: w.b, addr: addr, n: len(data), due: l.delay()}
	copy(e.data[:], data)
	l.addPending(e)
}

func (l *launch) bufferRed(w *warp, lane int, addr uint64, data []byte, op uint8, t ptx.Type) {
	e := &pendingStore{w: w, lane: lane, blk: w.b, addr: addr, n: len(data), red: true, redOp: op, redType: t, due: l.delay()}
	copy(e.data[:], data)
	l.addPending(e)
}

func (l *launch) addPending(e *pendingStore) {
	if len(l.pending) == 0 || e.due < l.nextDue {
		l.nextDue = e.due
	}
	l.pending = append(l.pending, e)
}

func (l *launch) apply(e *pendingStore) {
	b, f := l.sys.globalSpan(e.addr, e.n)
	if f != nil {
		return // checked when buffered; the allocation was freed since
	}
	if e.red {
		applyRed(b, e.data[:e.n], e.redOp, e.redType)
	} else {
		copy(b, e.data[:e.n])
	}
	l.progressed()
}

// flushThread makes visible the stores of thread (w, lane), and those a barrier of its block
// ordered before it: a release or a fence by that thread.
func (l *launch) flushThread(w *warp, lane int) {
	if len(l.pending) == 0 {
		return
	}
	n := 0
	for _, e := range l.pending {
		if e.w == w && e.lane == lane || e.blockWide && e.blk == w.b {
			l.apply(e)
			continue
		}
		l.pending[n] = e
		n++
	}
	clear(l.pending[n:])
	l.pending = l.pending[:n]
	l.recomputeDue()
}

func (l *launch) recomputeDue() {
	l.nextDue = 1 << 62
	for _, e := range l.pending {
		if e.due < l.nextDue {
			l.nextDue = e.due
		}
	}
}

// publishBlock: a barrier completed in b, so its threads' buffered stores are ordered before
// any later release by any thread of b (cumulativity through bar.sync).
func (l *launch) publishBlock(b *block) {
	for _, e := range l.pending {
		if e.blk == b {
			e.blockWide = true
		}
	}
}

// flushDue makes visible the buffered stores whose random delay has passed.
func (l *launch) flushDue(_ bool) {
	if l.steps < l.nextDue {
		return
	}
	n := 0
	for _, e := range l.pending {
		if e.due <= l.steps {
			l.apply(e)
			continue
		}
		l.pending[n] = e
		n++
	}
	clear(l.pending[n:])
	l.pending = l.pending[:n]
	l.recomputeDue()
}

func (l *launch) flushAll() {
	for _, e := range l.pending {
		l.apply(e)
	}
	l.pending = nil
}

// forward overlays the thread's own buffered stores (and its block's published ones) on
// bytes just loaded from addr, so a thread sees its own writes.
func (l *launch) forward(w *warp, lane int, addr uint64, p []byte) {
	for _, e := range l.pending {
		if e.red || !(e.w == w && e.lane == lane || e.blockWide && e.blk == w.b) {
			continue
		}
		lo, hi := max(addr, e.addr), min(addr+uint64(len(p)), e.addr+uint64(e.n))
		if lo >= hi {
			continue
		}
		copy(p[lo-addr:hi-addr], e.data[lo-e.addr:hi-e.addr])
	}
}

// shadowByte is the race detector's record of one byte of shared memory.
type shadowByte struct {
	w, r     int32 // writer / reader: thread index + 1; r == -1: several readers
	we, re   uint32
	wwe, rwe uint32
	wpc, rpc int32
}
