package emu

import "fmt"

// Deadlock reports for mbarrier pipelines. A thread that polls an mbarrier (test_wait or
// try_wait, .parity or with a state) for a phase that does not complete leaves a note
// (mbWait) on its warp; when the launch stops making progress the report becomes a
// deadlock that names the barrier (its shared offset and variable), the phase it is in,
// what it still waits for (arrivals, transaction bytes) and the instruction, with its Go
// line, that waits. A wrong expect_tx byte count or a missing arrive is found this way.

// mbWait is the poll a warp's lane last made on an mbarrier phase that had not completed.
type mbWait struct {
	in   *dinst
	lane int
	addr uint64 // the barrier's shared offset
	at   int64  // the launch's step count at the latest unsatisfied poll
}

// noteMbWait records (done false) or clears (done true) lane ln's unsatisfied poll.
func (w *warp) noteMbWait(in *dinst, ln int, off uint64, done bool) {
	if done {
		if w.mbw != nil && w.mbw.lane == ln {
			w.mbw = nil
		}
		return
	}
	if w.mbw == nil {
		w.mbw = &mbWait{in: in, lane: ln, addr: off}
	}
	w.mbw.at = w.l.steps
}

// sharedName names the shared variable holding offset off ("full+8"), or "".
func (l *launch) sharedName(off uint64) string {
	best, bestOff := "", int64(-1)
	for _, v := range l.prog.sharedVars {
		if int64(off) >= v.off && int64(off) < v.off+int64(max(v.size, 1)) && v.off > bestOff {
			best, bestOff = v.name, v.off
		}
	}
	if best == "" {
		return ""
	}
	if d := int64(off) - bestOff; d != 0 {
		return fmt.Sprintf("%s+%d", best, d)
	}
	return best
}

// mbarrierDeadlock turns a stuck launch whose warps poll mbarriers into a deadlock report
// naming the first such barrier; it reports whether it did.
func (l *launch) mbarrierDeadlock(e *Error) bool {
	found := false
	seen := map[[2]uint64]bool{}
	var others []string
	for bi, b := range l.blocks {
		if b.done || !b.started {
			continue
		}
		for _, w := range b.warps {
			if w == nil || w.live == 0 || w.mbw == nil || w.mbw.at < l.lastProg {
				continue // no poll, or none since the last progress
			}
			mw := w.mbw
			if mw.addr+8 > uint64(len(b.shared)) || seen[[2]uint64{uint64(bi), mw.addr}] {
				continue
			}
			seen[[2]uint64{uint64(bi), mw.addr}] = true
			mb := mbDecode(getN(b.shared[mw.addr:], 8))
			where := fmt.Sprintf("shared offset %#x", mw.addr)
			if n := l.sharedName(mw.addr); n != "" {
				where = n + " (" + where + ")"
			}
			what := fmt.Sprintf("%d of %d arrivals pending", max(mb.pending, 0), mb.expected)
			switch {
			case mb.tx > 0:
				what += fmt.Sprintf(", %d transaction bytes expected and not arrived (an expect_tx count above the bytes copied?)", mb.tx)
			case mb.tx < 0:
				what += fmt.Sprintf(", %d transaction bytes arrived beyond those expected (an expect_tx count below the bytes copied?)", -mb.tx)
			}
			if mb.pending > 0 && mb.tx == 0 {
				what += " (a missing arrive?)"
			}
			in := mw.in
			if found {
				// Other barriers waited on (a pipeline's other side), one line each.
				if len(others) < 8 {
					others = append(others, fmt.Sprintf("also waiting: mbarrier %s (parity %d): %s; block (%d,%d,%d) warp %d at %s",
						where, mb.phase, what, b.id[0], b.id[1], b.id[2], w.idx, posString(in.src.Pos)))
				}
				continue
			}
			found = true
			e.Kind = KindDeadlock
			e.GPU, e.Block, e.Thread = b.gpu, b.id, w.tid(mw.lane)
			if in.src != nil {
				e.Instr = instrText(in.src)
				e.Pos = in.src.Pos
			}
			e.Msg = fmt.Sprintf("mbarrier %s never completes its phase (parity %d): %s; the thread waits here for it", where, mb.phase, what)
		}
	}
	if len(others) > 0 {
		e.Warps = append(others, e.Warps...)
	}
	return found
}

// mbStallRounds is how many scheduling rounds without progress, every live warp polling an
// mbarrier, make a deadlock (an mbarrier in shared memory changes only by its block's
// threads and copies, and copies complete at issue here).
const mbStallRounds = 64

// mbarrierStalled reports whether every live warp of every running block has polled an
// mbarrier phase that has not completed since step since, with no cp.async of the block in
// flight and no buffered store left.
func (l *launch) mbarrierStalled(since int64) bool {
	if l.npend > 0 {
		return false
	}
	for _, b := range l.blocks {
		if b.done || !b.started {
			continue
		}
		if b.cp != nil && b.cp.n > 0 {
			return false
		}
		for _, w := range b.warps {
			if w != nil && w.live != 0 && (w.mbw == nil || w.mbw.at < since) {
				return false
			}
		}
	}
	return true
}
