package emu

import (
	"fmt"

	"github.com/kgen-dev/kgen/ptx"
)

// Bulk stores and reductions (cp.async.bulk.global.shared::cta.bulk_group and
// cp.reduce.async.bulk.global.shared::cta.bulk_group), completed per thread by bulk groups:
// cp.async.bulk.commit_group closes a group of the thread's copies issued since the last one,
// cp.async.bulk.wait_group.read N lets all but the thread's N newest groups read their shared
// sources, and cp.async.bulk.wait_group N also lets them write global memory.
//
// A copy reads its shared source at the latest moment the PTX ISA allows (the .read wait that
// retires its group, or the full wait), and writes its destination (the GPU's own memory or a
// peer's) at the full wait: a thread that publishes the destination after only a .read wait
// publishes nothing yet, and a source overwritten before the .read wait is what the copy
// stores. With the sanitizer on, a write to shared bytes that a bulk copy in flight has not
// read yet (by any thread: st, atom, cp.async, a bulk or TMA load) is a KindBulk report, and
// so is a thread that exits while its copies have not read their sources (the block's shared
// memory may go before they read it); copies whose sources are read land when their thread
// exits. Like the TMA's, the copies' accesses are not seen by the race detectors and not
// buffered by the weak mode. Bulk loads (global -> shared, on an mbarrier) complete at issue
// as tensor loads do (async.go).

// KindBulk: a write to shared memory that a bulk copy in flight has not read yet, or a thread
// that exits before its bulk copies read their sources.
const KindBulk Kind = "bulk copy in flight"

// bulkOp is one bulk store or reduction in flight.
type bulkOp struct {
	src  uint64 // shared offset of the source
	n    int
	dst  []byte // the destination, resolved at issue
	data []byte // the source's bytes once read (nil before)
	red  bool
	op   uint8
	t    ptx.Type
	in   *dinst
	lane int
}

// bulkThread is one thread's bulk copies: issued but not committed, and committed groups.
type bulkThread struct {
	open   []*bulkOp
	groups [][]*bulkOp
}

// bulkState is a block's bulk-copy bookkeeping.
type bulkState struct {
	threads []bulkThread
	pend    []uint16 // per shared byte: copies in flight that have not read it
	unread  int      // copies in flight that have not read their source
}

func (w *warp) bulkState() *bulkState {
	b := w.b
	if b.bulk == nil {
		b.bulk = &bulkState{threads: make([]bulkThread, len(b.warps)*32), pend: make([]uint16, len(b.shared))}
	}
	return b.bulk
}

// bulkIssue queues lane ln's store (or reduction) of n bytes from shared offset src into dst.
func (w *warp) bulkIssue(in *dinst, ln int, src uint64, n int, dst []byte, red bool, op uint8, t ptx.Type) {
	s := w.bulkState()
	th := &s.threads[w.idx*32+ln]
	th.open = append(th.open, &bulkOp{src: src, n: n, dst: dst, red: red, op: op, t: t, in: in, lane: ln})
	for i := src; i < src+uint64(n); i++ {
		s.pend[i]++
	}
	s.unread++
	w.l.progressed()
}

// read takes the source's bytes.
func (s *bulkState) read(b *block, op *bulkOp) {
	if op.data != nil {
		return
	}
	op.data = append([]byte(nil), b.shared[op.src:op.src+uint64(op.n)]...)
	for i := op.src; i < op.src+uint64(op.n); i++ {
		s.pend[i]--
	}
	s.unread--
}

// land reads (if not yet) and writes the destination.
func (s *bulkState) land(w *warp, op *bulkOp) {
	s.read(w.b, op)
	if op.red {
		applyRed(op.dst, op.data, op.op, op.t)
	} else {
		copy(op.dst, op.data)
	}
	w.l.progressed()
}

// bulk group sub-operations
const (
	bulkCommit uint8 = iota
	bulkWait
	bulkWaitRead
)

func execBulkGroup(w *warp, in *dinst, m uint32) {
	s := w.b.bulk
	if s == nil {
		// No bulk copy was issued in this block: the groups committed so far are empty.
		return
	}
	for x := m; x != 0; x &= x - 1 {
		th := &s.threads[w.idx*32+trailing(x)]
		if in.op == bulkCommit {
			th.groups = append(th.groups, th.open)
			th.open = nil
			continue
		}
		keep := int(min(in.imm, uint64(len(th.groups))))
		old := th.groups[:len(th.groups)-keep]
		for _, g := range old {
			for _, op := range g {
				if in.op == bulkWaitRead {
					s.read(w.b, op)
				} else {
					s.land(w, op)
				}
			}
		}
		if in.op == bulkWait {
			th.groups = append(th.groups[:0], th.groups[len(th.groups)-keep:]...)
		}
	}
}

// bulkExit completes the exiting lanes' copies; with the sanitizer, a copy that has not read
// its source yet is a KindBulk fault (false).
func (w *warp) bulkExit(in *dinst, ex uint32) bool {
	s := w.b.bulk
	for x := ex; x != 0; x &= x - 1 {
		ln := trailing(x)
		th := &s.threads[w.idx*32+ln]
		all := append([][]*bulkOp{th.open}, th.groups...)
		for _, g := range all {
			for _, op := range g {
				if op.data == nil && w.l.sanitize {
					w.fault(in, ln, KindBulk, fmt.Sprintf("the thread exits while the bulk copy %s has not read its %d-byte shared source at offset %#x (%s): wait with cp.async.bulk.wait_group.read (BulkWait(0, true)) before exiting, the block's shared memory may be gone before the copy reads it",
						bulkWhere(op), op.n, op.src, bulkStage(th, op)))
					return false
				}
			}
		}
		for _, g := range all {
			for _, op := range g {
				s.land(w, op)
			}
		}
		th.open, th.groups = nil, nil
	}
	return true
}

func bulkWhere(op *bulkOp) string {
	if op.in.src == nil {
		return "(no source)"
	}
	return fmt.Sprintf("%q at %s", instrText(op.in.src), posString(op.in.src.Pos))
}

// bulkStage says where op stands in its thread's groups.
func bulkStage(th *bulkThread, op *bulkOp) string {
	for _, o := range th.open {
		if o == op {
			return "not even committed: no cp.async.bulk.commit_group after it"
		}
	}
	return "committed, no cp.async.bulk.wait_group.read of that thread has retired it"
}

// bulkCheck reports a write of n bytes at shared offset off over bytes that a bulk copy in
// flight has not read.
func (b *block) bulkCheck(off uint64, n int) *memFault {
	s := b.bulk
	if s == nil || s.unread == 0 || !b.l.sanitize || off > clusterOffMask || off+uint64(n) > uint64(len(s.pend)) {
		return nil
	}
	hit := -1
	for i := off; i < off+uint64(n); i++ {
		if s.pend[i] != 0 {
			hit = int(i)
			break
		}
	}
	if hit < 0 {
		return nil
	}
	for ti := range s.threads {
		th := &s.threads[ti]
		for _, g := range append([][]*bulkOp{th.open}, th.groups...) {
			for _, op := range g {
				if op.data != nil || uint64(hit) < op.src || uint64(hit) >= op.src+uint64(op.n) {
					continue
				}
				bx, by := b.l.blk.X, b.l.blk.Y
				return faultf(KindBulk, "writes %d bytes at shared offset %#x, the source of the bulk copy %s that thread (%d,%d,%d) issued and that has not read it yet (%s): wait with cp.async.bulk.wait_group.read (BulkWait(n, true)) before writing the source again",
					n, off, bulkWhere(op), ti%bx, ti/bx%by, ti/(bx*by), bulkStage(th, op))
			}
		}
	}
	return faultf(KindBulk, "writes %d bytes at shared offset %#x, the source of a bulk copy in flight", n, off)
}

// bulkWriteOK checks lane ln's write of n bytes at shared offset off (false after a fault).
func (w *warp) bulkWriteOK(in *dinst, ln int, off uint64, n int) bool {
	if w.b.bulk == nil {
		return true
	}
	if f := w.b.bulkCheck(off, n); f != nil {
		w.memFault(in, ln, f)
		return false
	}
	return true
}
