package emu

import (
	"fmt"
	"unsafe"

	"github.com/kgen-dev/kgen/ptx"
)

// The global-memory race detector (with the sanitizer on).
//
// Two plain (weak: not atomic, not .volatile/.relaxed/.acquire/.release) accesses of
// different threads to the same bytes of global memory, at least one a write, race unless
// one is ordered before the other:
//   - in the same block, by a barrier that completed between them (as in shared memory);
//   - by a release of the first access's thread (or, after a barrier of its block that
//     followed the access, of any thread of that block) and an acquire of the second
//     access's thread (or, before a barrier of its block that precedes the access, of any
//     thread of that block), the acquire after the release; both at .sys scope when the
//     threads are on different GPUs;
//   - by a kernel boundary: accesses of earlier launches are not checked, except in weak
//     mode between two consecutive launches on several GPUs with no host memory operation
//     between them (Write, Read, Copy, Memset, Malloc, Free: the host synchronized). Those
//     overlap as on real GPUs, where every rank enqueues its next launch without waiting
//     for the other GPUs: an access of the earlier launch on GPU A and one of the later on
//     GPU B != A are ordered only by a release on A after the first (in the earlier launch
//     by its thread or, after a barrier, its block; or anywhere on A in the later launch,
//     which A runs after the earlier) and an acquire on B before the second (in the later
//     launch, or anywhere on B in the earlier). A missing barrier at the end of a kernel
//     (or at the start of the next) that lets a GPU overwrite what a slower peer still
//     reads is caught this way.
//
// A release is a st/atom/red/multimem store with .release or .acq_rel, any fence or membar,
// an mbarrier arrive, or an extern call; an acquire is a ld/atom/multimem.ld_reduce with
// .acquire or .acq_rel, a fence or membar, a completed mbarrier wait, or the end of an
// extern call. The detector does not check that the
// acquire read the value the release wrote: it never reports an ordered pair, and it
// misses a race whose threads synchronize through something else.
//
// Bookkeeping: a System-wide stamp (clk) counts releases and barriers; each access records
// the stamp, its block, thread and instruction in a shadow record per 16
// bytes of an allocation (the last writer and the last reader); each block keeps, per
// thread, the stamps of its latest release and acquire (gsync). A record whose stamp is
// older than the launch is from an earlier kernel and ignored.

// gacc is one recorded access of up to 16 bytes of a granule.
type gacc struct {
	s    uint32 // the stamp at the access (0: none)
	blk  uint32 // the block's number in its launch
	pc   int32
	tid  uint16
	mask uint16 // the bytes of the granule
}

// gshadow is the detector's record of a 16-byte granule of global memory.
type gshadow struct{ w, r gacc }

// gsync is a block's synchronization state for the detector, made at its first release or
// acquire.
type gsync struct {
	gpu     int
	cover   uint32 // the last barrier that a release of any thread of the block followed
	coverS  uint32 // ... a .sys release
	acqMax  uint32 // the latest acquire of any thread
	acqMaxS uint32
	acqBar  uint32 // acqMax when the last barrier completed: every thread has acquired it
	acqBarS uint32
	rel     []uint32 // per thread: the latest release; relS at .sys scope
	relS    []uint32
	acq     []uint32 // per thread: the latest acquire; acqS at .sys scope
	acqS    []uint32
}

// gsyncOf returns block b's synchronization state, making it on first use.
func (l *launch) gsyncOf(b *block) *gsync {
	if b.gs == nil {
		n := b.nthreads
		p := make([]uint32, 4*n)
		b.gs = &gsync{gpu: b.gpu, rel: p[:n:n], relS: p[n : 2*n : 2*n], acq: p[2*n : 3*n : 3*n], acqS: p[3*n:]}
		if l.gblocks == nil {
			l.gblocks = map[uint32]*gsync{}
		}
		l.gblocks[b.gnum] = b.gs
	}
	return b.gs
}

// blockAt returns the GPU and index of the block that launch l started as number i.
func (l *launch) blockAt(i uint32) (int, [3]int) {
	i -= l.gbase
	ng := len(l.gpus)
	j := int(i) / ng
	return l.gpus[int(i)%ng], [3]int{j % l.grid.X, j / l.grid.X % l.grid.Y, j / (l.grid.X * l.grid.Y)}
}

// raceGranule is the shadow granule size.
const raceGranule = 16

const gshadowBytes = int64(unsafe.Sizeof(gshadow{}))

// tick advances the System's stamp; at its limit the detector stops for the rest of the
// launch (stamps would no longer order).
func (l *launch) tick() uint32 {
	s := l.sys
	if s.clk == 1<<32-1 {
		l.gRace = false
		return s.clk
	}
	s.clk++
	return s.clk
}

// raceTrace is what the detector keeps of a finished launch that the next one overlaps.
type raceTrace struct {
	clk0    uint32
	prog    *program
	kernel  string
	grid    Dim3
	blk     Dim3
	gpus    []int
	gblocks map[uint32]*gsync
	gpuAcqS []uint32 // per GPU of the System: the latest .sys acquire of any of its blocks
	gpuRelS []uint32 // per GPU: whether (the stamp of) a .sys release of any of its blocks
}

// hostSync: a host memory operation ends the overlap of the last launch with the next.
func (s *System) hostSync() { s.trace = nil }

// endRace keeps the launch's trace for the next launch when the two may overlap.
func (l *launch) endRace(err error) {
	s := l.sys
	s.trace = nil
	if !l.gRace || !l.weak || len(l.gpus) < 2 || err != nil {
		return
	}
	s.trace = &raceTrace{clk0: l.clk0, prog: l.prog, kernel: l.fn.f.Name, grid: l.grid, blk: l.blk, gpus: l.gpus,
		gblocks: l.gblocks, gpuAcqS: l.gpuAcqS, gpuRelS: l.gpuRelS}
}

// startRace starts the detector for a launch: records older than clk0 are from earlier
// launches (ordered before it by the kernel boundary, except those of an overlapping
// previous launch, from lo).
func (l *launch) startRace() {
	if !l.gRace {
		l.sys.trace = nil
		return
	}
	if l.gpuAcqS == nil {
		l.gpuAcqS = make([]uint32, len(l.sys.gpus))
		l.gpuRelS = make([]uint32, len(l.sys.gpus))
	}
	s := l.sys
	if l.gpuAcqDone != nil {
		l.predAcqS = l.gpuAcqDone[l.gpus[0]]
	}
	if others := len(l.grids) > 0; others { // grids in flight: this one overlaps them
		l.clk0 = l.tick()
		l.lo = l.clk0
		for _, g := range l.grids {
			l.lo = min(l.lo, g.clk0)
		}
		for _, g := range l.retired {
			l.lo = min(l.lo, g.clk0)
		}
		s.trace = nil
		return
	}
	if s.clk >= 1<<31 { // start the stamps again, dropping every record
		for _, g := range s.gpus {
			for _, a := range g.allocs {
				if a.shadow != nil {
					clear(a.shadow)
				}
			}
		}
		s.clk = 0
		s.trace = nil
	}
	l.clk0 = l.tick()
	l.lo = l.clk0
	if t := s.trace; t != nil && l.weak && len(l.gpus) > 1 {
		l.prev, l.lo = t, t.clk0
	}
	s.trace = nil
}

// prevOrdered reports whether x, an access of the overlapping previous launch, is ordered
// before an access of thread t of block b.
func (l *launch) prevOrdered(x *gacc, b *block, t int) bool {
	p := l.prev
	gA, _ := p.blockAt(x.blk)
	if gA == b.gpu {
		return true // one GPU runs its launches in order
	}
	k := p.gpuAcqS[b.gpu]
	if g := b.gs; g != nil {
		k = max(k, g.acqBarS, g.acqS[t])
	}
	if k <= x.s {
		return false
	}
	if l.gpuRelS[gA] != 0 {
		return true
	}
	o := p.gblocks[x.blk]
	return o != nil && (o.coverS > x.s || o.relS[x.tid] > x.s)
}

func (p *raceTrace) blockAt(i uint32) (int, [3]int) {
	ng := len(p.gpus)
	j := int(i) / ng
	return p.gpus[int(i)%ng], [3]int{j % p.grid.X, j / p.grid.X % p.grid.Y, j / (p.grid.X * p.grid.Y)}
}

// raceRelease: thread (w, ln) releases at scope sc.
func (l *launch) raceRelease(w *warp, ln int, sc uint8) {
	g := l.gsyncOf(w.b)
	t := w.idx*32 + ln
	c := l.tick()
	g.rel[t] = c
	g.cover = w.b.lastBar
	if sc == scSys || sc == scNone {
		g.relS[t] = c
		g.coverS = w.b.lastBar
		l.gpuRelS[w.b.gpu] = c
		if !l.relSeen {
			l.relSeen = true
			l.succeed(c)
		}
	}
}

// succeed records c, the grid's first .sys release, as the release after the grids that
// finished on its GPU before it started and overlap grids in flight (race detector).
func (l *launch) succeed(c uint32) {
	for _, o := range l.retired {
		if o.succRelS == 0 && o.end <= l.clk0 && o.gpus[0] == l.gpus[0] {
			o.succRelS = c
		}
	}
}

// crossOrdered reports whether x, an access of grid og that ran at once with grid l, is
// ordered before an access of thread t of block b of l: by a .sys release after x (by x's
// thread or, after a barrier, its block; or by a later grid on og's GPU, which that GPU
// runs after og) and a .sys acquire before b's access (by its thread or, before a barrier,
// its block; or by a grid that finished on b's GPU before l started).
func (l *launch) crossOrdered(og *launch, x *gacc, b *block, t int) bool {
	acq := l.predAcqS
	if g := b.gs; g != nil {
		acq = max(acq, g.acqBarS, g.acqS[t])
	}
	if acq <= x.s {
		return false
	}
	if og.succRelS > x.s && acq > og.succRelS {
		return true
	}
	o := l.gblocks[x.blk]
	return o != nil && (o.coverS > x.s || o.relS[x.tid] > x.s)
}

// raceAcquire: thread (w, ln) acquires at scope sc.
func (l *launch) raceAcquire(w *warp, ln int, sc uint8) {
	g := l.gsyncOf(w.b)
	t := w.idx*32 + ln
	c := l.sys.clk
	g.acq[t] = c
	g.acqMax = c
	if sc == scSys || sc == scNone {
		g.acqS[t] = c
		g.acqMaxS = c
		l.gpuAcqS[w.b.gpu] = c
		l.acqMaxS = c
	}
}

// raceBarrier: a barrier of block b completed.
func (l *launch) raceBarrier(b *block) {
	b.lastBar = l.tick()
	if g := b.gs; g != nil {
		g.acqBar, g.acqBarS = g.acqMax, g.acqMaxS
	}
}

// shadowOf returns the shadow granules of allocation a, making them on first use (nil when
// they would exceed the memory limit: that allocation goes unchecked).
func (s *System) shadowOf(a *alloc) []gshadow {
	if a.shadow == nil && !a.noShadow {
		n := (a.size + raceGranule - 1) / raceGranule
		bytes := int64(n) * gshadowBytes
		if bytes > s.limits.MaxMemory-s.used-s.shadowBytes {
			a.noShadow = true
			return nil
		}
		a.shadow = make([]gshadow, n)
		s.shadowBytes += bytes
	}
	return a.shadow
}

// ordered reports whether the recorded access x is ordered before an access by thread t of
// block b (see the comment at the top of this file).
func (l *launch) ordered(x *gacc, b *block, t int) bool {
	if x.s < l.clk0 {
		// Before this grid started: ordered by the kernel boundary, unless the access is of a
		// grid that ran at once with this one (System.Start), or of the overlapping previous
		// launch.
		if og := l.gridOf(x.blk); og == nil || og == l || og.end != 0 && og.end <= l.clk0 {
			if l.prev == nil {
				return true
			}
			return l.prevOrdered(x, b, t)
		} else if l.crossOrdered(og, x, b, t) {
			return true
		}
	} else if x.blk-l.gbase >= uint32(l.nblocks) { // of another grid, running at once
		if og := l.gridOf(x.blk); og != nil && l.crossOrdered(og, x, b, t) {
			return true
		}
	}
	if x.blk == b.gnum && (int(x.tid) == t || b.lastBar > x.s) {
		return true
	}
	g := b.gs
	if g == nil {
		return false // b has not acquired
	}
	o := l.gblocks[x.blk]
	if o == nil {
		return false // x's block has not released
	}
	if o.gpu == g.gpu {
		if max(g.acqBar, g.acq[t]) <= x.s {
			return false
		}
		return o.cover > x.s || o.rel[x.tid] > x.s
	}
	if max(g.acqBarS, g.acqS[t]) <= x.s {
		return false
	}
	return o.coverS > x.s || o.relS[x.tid] > x.s
}

// gRaceCheck checks and records lane ln's plain access of n bytes at global address addr;
// it reports a race and returns false.
func (w *warp) gRaceCheck(in *dinst, ln int, addr uint64, n int, write bool) bool {
	l := w.l
	s := l.sys
	r := region(addr) - regionGlobal0
	if r >= uint64(len(s.gpus)) {
		return true
	}
	a := s.gpus[r].last // the caller has just found the allocation (span)
	if a == nil || addr-a.base >= a.size {
		if a = s.gpus[r].find(addr); a == nil {
			return true
		}
	}
	sh := a.shadow
	if sh == nil {
		if sh = s.shadowOf(a); sh == nil {
			return true
		}
	}
	t := w.idx*32 + ln
	cur := gacc{s: s.clk, blk: w.b.gnum, pc: in.pc, tid: uint16(t)}
	o := addr - a.base
	for i := o / raceGranule; i <= (o+uint64(n)-1)/raceGranule; i++ {
		lo, hi := max(o, i*raceGranule), min(o+uint64(n), (i+1)*raceGranule)
		cur.mask = uint16((1<<(hi-lo) - 1) << (lo - i*raceGranule))
		e := &sh[i]
		if x := &e.w; x.s >= l.lo && x.mask&cur.mask != 0 && !(x.blk == cur.blk && int(x.tid) == t && x.s >= l.clk0) && !l.ordered(x, w.b, t) {
			w.gRaceFault(in, ln, addr, n, write, x, true)
			return false
		}
		if write {
			if x := &e.r; x.s >= l.lo && x.mask&cur.mask != 0 && !(x.blk == cur.blk && int(x.tid) == t && x.s >= l.clk0) && !l.ordered(x, w.b, t) {
				w.gRaceFault(in, ln, addr, n, write, x, false)
				return false
			}
			e.w = cur
		} else {
			e.r = cur
		}
	}
	return true
}

func (w *warp) gRaceFault(in *dinst, ln int, addr uint64, n int, write bool, x *gacc, otherWrote bool) {
	l := w.l
	og := l.gridOf(x.blk) // the other access's grid: this one, or one running at once
	if og == nil {
		og = l
	}
	ogpu, oid := og.blockAt(x.blk)
	other := og.access("", &block{l: og, gpu: ogpu, id: oid}, int32(x.tid), x.pc)
	prev := x.s < l.clk0 && og == l
	if prev { // of the overlapping previous launch
		p := l.prev
		ogpu, oid = p.blockAt(x.blk)
		bx, by := p.blk.X, p.blk.Y
		t := int(x.tid)
		other.Thread = [3]int{t % bx, t / bx % by, t / (bx * by)}
		other.Instr, other.Pos = "", ptx.Pos{}
		if int(x.pc) < len(p.prog.code) && p.prog.code[x.pc].src != nil {
			other.Instr, other.Pos = instrText(p.prog.code[x.pc].src), p.prog.code[x.pc].src.Pos
		}
	}
	other.GPU, other.Block = ogpu, oid
	what, ow := "reads", "read"
	if write {
		what = "writes"
	}
	if otherWrote {
		ow, other.Role = "wrote", "racing write"
	} else {
		other.Role = "racing read"
	}
	var why string
	switch {
	case prev:
		why = fmt.Sprintf("in the previous launch (of %s), which GPU %d may still run while GPU %d runs this one: no barrier between the launches (a release on GPU %d after the first access followed by an acquire on GPU %d before the second) orders them",
			errName(l.prev.kernel), ogpu, w.b.gpu, ogpu, w.b.gpu)
	case x.blk == w.b.gnum:
		why = "no barrier between them"
	case ogpu == w.b.gpu:
		why = "no barrier of one block between them, and no release after the first followed by an acquire before the second"
	default:
		why = "no release at .sys scope after the first followed by an acquire at .sys scope before the second (they run on different GPUs)"
	}
	if g, o := w.b.gs, l.gblocks[x.blk]; !prev && g != nil && o != nil && x.blk != w.b.gnum &&
		(ogpu == w.b.gpu && g.acqMax > x.s && (o.cover > x.s || o.rel[x.tid] > x.s) || g.acqMaxS > x.s && (o.coverS > x.s || o.relS[x.tid] > x.s)) {
		why += "; another thread of this block acquired after the first access: a barrier after that acquire (SyncThreads after the wait) would order this one"
	}
	w.fault(in, ln, KindDataRace, fmt.Sprintf("%s %d bytes at %#x (GPU %d's memory) that %s %s with %q at %s: %s",
		what, n, addr, int(region(addr)-regionGlobal0), other.who(), ow, other.Instr, posString(other.Pos), why))
	if err, ok := l.err.(*Error); ok {
		err.Related = []Access{other}
	}
}

// raceSync applies an instruction's release and acquire semantics to the detector for lane
// ln (before its access: an acquire does not advance the stamp, so it may come first).
func (w *warp) raceSync(in *dinst, ln int) {
	l := w.l
	if in.sem == semRelease || in.sem == semAcqRel {
		l.raceRelease(w, ln, in.scope)
	}
	if in.sem == semAcquire || in.sem == semAcqRel {
		l.raceAcquire(w, ln, in.scope)
	}
}
