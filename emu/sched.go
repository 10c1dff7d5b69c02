package emu

import (
	"fmt"
	"math/bits"
	"math/rand"
	"sort"
	"strings"
)

const fullMask = ^uint32(0)

// lane states
const (
	lsRun    uint8 = iota
	lsExited       // finished (or never existed)
	lsBar          // waiting at a block barrier
	lsSync         // waiting for the other members of a .sync warp operation
)

type barrier struct {
	arrived  int
	expected int
	full     bool  // counts every thread of the block
	pc       int32 // the first waiting instruction
	red      uint64
	redOp    uint8
	redSeen  bool
}

type block struct {
	l         *launch
	gpu       int
	id        [3]int
	started   bool
	done      bool
	warps     []*warp
	shared    []byte
	shadow    []shadowByte
	bars      [16]barrier
	epoch     uint32
	exited    int
	nthreads  int
	liveWarps int
	params    []byte
	ext       map[string]any
	wide      []*pendingStore
	nwide     int               // entries of wide not yet visible
	obs       map[obsKey]obsVal // weak mode: out-of-order stores its threads have seen
	obsGen    uint32
	cp        *cpState   // cp.async copies in flight (cpasync.go)
	bulk      *bulkState // bulk stores in flight (bulk.go)
	gnum      uint32     // the block's number in its launch (race detector)
	gs        *gsync     // race detector: its releases and acquires (nil: none yet)
	lastBar   uint32     // race detector: the stamp of its last completed barrier
	cl        *cluster   // its cluster (nil: a cluster of one; cluster.go)
	rank      int        // its rank in the cluster
}

type warp struct {
	b       *block
	l       *launch
	idx     int
	r       []uint64
	pc      [32]int32
	st      [32]uint8
	wait    [32]int32  // barrier id (lsBar) or pc (lsSync)
	wmask   [32]uint32 // lsSync: the member mask waited for
	exists  uint32
	live    uint32
	runm    uint32
	conv    bool
	cpc     int32
	stack   [32][]int32
	local   []byte
	spin    bool
	poll    uint64 // the global address of the warp's last strong load or atomic
	yielded bool
	back    int
	high    bool
	wepoch  uint32
	ext     [32]*ExternCall
	scratch [64]byte
	pend    [32][]*pendingStore
	pn      [32]int32 // entries of pend not yet visible
	pfirst  [32]int32 // entries of pend before this one are visible
	cc      [32]uint8 // the carry flag of add.cc and friends
	wg      *wgState  // wgmma operations in flight (wgmma.go)
	mbw     *mbWait   // the last unsatisfied mbarrier poll (mbarrier.go)
}

// launch is one grid: a kernel launched on one or more GPUs, what its blocks need to know
// about it. The run-wide state that several grids running at once share (the schedule's
// random source, the step and progress counters, the weak-memory buffers, the race and
// missing-fence detectors, the clock) is its engine, embedded so that code running a warp
// reaches both through w.l.
type launch struct {
	*engine
	prog       *program
	fn         *dfunc
	grid       Dim3
	blk        Dim3
	dynShared  int
	gpus       []int
	params     map[int][]byte
	gvars      map[string]uint64 // symmetric offsets of module variables
	blocks     []*block          // started, unfinished
	nblocks    int
	next       int   // the next block to start
	order      []int // seeded: the order in which blocks (whole clusters) start
	quantum    int
	nthreads   int
	nwarps     int
	lsize      int
	tmpl       map[int][]uint64
	cdim       Dim3 // the cluster shape (1,1,1 without Launch.Cluster)
	explicitCl bool // Launch.Cluster was given
	sharedPool [][]byte
	blockBytes int64 // local and shared memory of one block
	shadowPool [][]shadowByte
	gbase      uint32     // the engine's number of the grid's first block (race detector)
	clk0       uint32     // the race detector's stamp at the start of the grid
	lo         uint32     // ... records from lo on are checked (those of grids it overlaps)
	end        uint32     // ... the stamp when it finished (0: running)
	prev       *raceTrace // the overlapping previous launch (System.Launch)
	acqMaxS    uint32     // the latest .sys acquire of any of its blocks
	predAcqS   uint32     // ... of the grids that finished on its first GPU before it started
	relSeen    bool       // it has made a .sys release
	succRelS   uint32     // the first .sys release of a grid started on its GPU after it finished
	run        *Running   // the handle System.Start returned (nil for System.Launch)
	steps0     int64      // the engine's steps when the grid started
	instr0     int64      // ... and thread-instructions
}

// engine runs grids: one (System.Launch) or several at once, of different kernels, shapes
// and GPUs (System.Start). It holds what the grids share, so that a race or a missing fence
// between two kernels running at once is found as within one.
type engine struct {
	sys         *System
	opt         Options
	err         error // the first fault of the slice being run (its grid is errGrid)
	errGrid     *launch
	grids       []*launch // in flight, in start order
	steps       int64
	lastProg    int64 // steps at the last progress event
	progress    int64
	rng         *rand.Rand
	pendQ       pendHeap
	pendIdx     map[uint64][]*pendingStore
	npend       int
	seq         uint64              // weak mode: counts buffered stores (and recorded atomics)
	recs        []wrec              // weak mode: stores made visible out of order (fence.go)
	rpages      map[uint64]*recPage // ... listed by granule, per 4 KiB page
	rlast       *recPage            // the page last looked up
	rlastKey    uint64
	rfilter     []uint64 // a filter of the pages that may hold records
	gen         uint32   // weak mode: counts the times no store was left buffered
	fences      bool     // weak mode with the sanitizer: the missing-fence detector
	sanitize    bool
	weak        bool
	budget      int64
	extBlocked  int64
	threadInstr int64
	liveBytes   int64             // local and shared memory of the live blocks of every grid
	gRace       bool              // the global-memory race detector is on
	gpuAcqS     []uint32          // per GPU: the latest .sys acquire of any of its blocks
	gpuRelS     []uint32          // per GPU: the latest .sys release of any of its blocks
	gblocks     map[uint32]*gsync // the blocks that released or acquired, by number
	nextGnum    uint32            // the number of the next grid's first block
	retired     []*launch         // finished grids that grids in flight overlapped (race detector)
	t0          int64             // the logical time at the start (timers.go)
	skip        int64             // ... plus the steps skipped while every warp waited for a scheduled action
	mbRounds    int               // rounds in a row without progress, every warp polling an mbarrier
	streams     bool              // the stream engine (System.Start): kernels run beside others
	gpuAcqDone  []uint32          // per GPU: the latest .sys acquire of its finished grids
}

func (l *launch) progressed() { l.progress++; l.lastProg = l.steps }

func (w *warp) tid(lane int) [3]int {
	t := w.idx*32 + lane
	bx, by := w.l.blk.X, w.l.blk.Y
	return [3]int{t % bx, t / bx % by, t / (bx * by)}
}

// fault records the first error of the launch, tied to lane l and instruction in.
func (w *warp) fault(in *dinst, lane int, k Kind, msg string) {
	if w.l.err != nil {
		return
	}
	e := &Error{Kind: k, Kernel: w.l.fn.f.Name, GPU: w.b.gpu, Block: w.b.id, Thread: w.tid(lane), Msg: msg}
	if in != nil && in.src != nil {
		e.Instr = instrText(in.src)
		e.Pos = in.src.Pos
		if k == KindUnsupported && e.Msg == "" {
			e.Msg = "the emulator does not implement this instruction form"
		}
	}
	w.l.err, w.l.errGrid = e, w.l
}

func (w *warp) memFault(in *dinst, lane int, f *memFault) { w.fault(in, lane, f.kind, f.msg) }

// diverge writes the converged pc to every runnable lane and leaves converged mode.
func (w *warp) diverge() {
	if !w.conv {
		return
	}
	for m := w.runm; m != 0; m &= m - 1 {
		w.pc[bits.TrailingZeros32(m)] = w.cpc
	}
	w.conv = false
}

func (w *warp) setPC(m uint32, pc int32) {
	for ; m != 0; m &= m - 1 {
		w.pc[bits.TrailingZeros32(m)] = pc
	}
}

// pick chooses the group of runnable lanes to execute next: the lanes at the lowest pc
// (which reconverges structured code), or now and then the highest so that a lane spinning
// on another lane of its warp cannot starve it (independent thread scheduling).
func (w *warp) pick() (int32, uint32) {
	best := int32(-1)
	for m := w.runm; m != 0; m &= m - 1 {
		p := w.pc[bits.TrailingZeros32(m)]
		if best < 0 || (p < best) != w.high && p != best {
			best = p
		}
	}
	w.high = false
	var g uint32
	for m := w.runm; m != 0; m &= m - 1 {
		l := bits.TrailingZeros32(m)
		if w.pc[l] == best {
			g |= 1 << l
		}
	}
	if g == w.runm {
		w.conv, w.cpc = true, best
	}
	return best, g
}

func (w *warp) predMask(slot int32, neg bool, g uint32) uint32 {
	p := (*[32]uint64)(w.r[slot:])
	var m uint32
	if g == fullMask {
		for l := 0; l < 32; l++ {
			m |= uint32(p[l]&1) << l
		}
	} else {
		for x := g; x != 0; x &= x - 1 {
			l := bits.TrailingZeros32(x)
			m |= uint32(p[l]&1) << l
		}
	}
	if neg {
		m = ^m
	}
	return m & g
}

// exec runs the warp for at most budget instructions (warp-steps); it stops early when every
// lane is blocked or exited, or the warp yields (a spin iteration, a blocked extern).
func (w *warp) exec(budget int) int {
	l := w.l
	code := l.prog.code
	n := 0
	for n < budget && w.runm != 0 {
		var pc int32
		var g uint32
		if w.conv {
			pc, g = w.cpc, w.runm
		} else {
			pc, g = w.pick()
		}
		in := &code[pc]
		n++
		m := g
		if in.guard >= 0 {
			m = w.predMask(in.guard, in.gneg, g)
		}
		l.threadInstr += int64(bits.OnesCount32(g))
		if w.wg != nil && len(w.wg.busy) > 0 && w.wgTouches(in) {
			break
		}
		if in.kind == ctlPlain {
			if m != 0 {
				in.exec(w, in, m)
				if l.err != nil {
					break
				}
			}
			if w.conv {
				w.cpc = pc + 1
			} else {
				w.setPC(g, pc+1)
			}
			continue
		}
		if in.kind == ctlBra && w.conv && (m == g || m == 0) {
			if m == 0 {
				w.cpc = pc + 1
				continue
			}
			w.cpc = in.target
			if in.backRef && w.spin {
				w.spin = false
				w.yielded = true
				break
			}
			continue
		}
		if w.control(in, pc, g, m) {
			w.yielded = true
			break
		}
		if l.err != nil {
			break
		}
	}
	l.steps += int64(n)
	return n
}

// control executes a control instruction; it reports whether the warp should yield.
func (w *warp) control(in *dinst, pc int32, g, m uint32) bool {
	w.diverge()
	l := w.l
	switch in.kind {
	case ctlBra:
		w.setPC(m, in.target)
		w.setPC(g&^m, pc+1)
		if m != 0 && in.backRef {
			if g != w.runm || m != g {
				w.back++
				if w.back&63 == 0 {
					w.high = true
				}
			}
			if w.spin {
				// A spin iteration: let the other lanes of the warp (one may hold what this
				// group waits for) and the other warps run.
				w.spin = false
				if g != w.runm {
					w.high = true
				}
				return true
			}
		}
		return false
	case ctlExit, ctlRet:
		w.setPC(g&^m, pc+1)
		var ex uint32
		for x := m; x != 0; x &= x - 1 {
			ln := bits.TrailingZeros32(x)
			if in.kind == ctlRet && len(w.stack[ln]) > 0 {
				st := w.stack[ln]
				cpc := st[len(st)-1]
				w.stack[ln] = st[:len(st)-1]
				w.copyRets(&l.prog.code[cpc], in, ln)
				w.pc[ln] = cpc + 1
				continue
			}
			ex |= 1 << ln
		}
		if ex != 0 {
			w.exitLanes(in, ex)
		}
		return false
	case ctlCall:
		w.setPC(g&^m, pc+1)
		for x := m; x != 0; x &= x - 1 {
			ln := bits.TrailingZeros32(x)
			if len(w.stack[ln]) >= 64 {
				w.fault(in, ln, KindUnsupported, "call depth exceeds 64 (recursion is not supported)")
				return true
			}
			w.copyArgs(in, ln)
			w.stack[ln] = append(w.stack[ln], pc)
			w.pc[ln] = in.callee.entry
		}
		return false
	case ctlExtern:
		return w.externCall(in, pc, g, m)
	case ctlBar:
		return w.barrier(in, pc, g, m)
	case ctlWarpSync:
		return w.warpSync(in, pc, g, m)
	case ctlClusterWait:
		return w.clusterWait(in, pc, g, m)
	case ctlTrap:
		if m == 0 {
			w.setPC(g, pc+1)
			return false
		}
		w.fault(in, bits.TrailingZeros32(m), KindTrap, "the kernel executed "+in.src.Op)
		return true
	case ctlUnsupported:
		if m == 0 {
			w.setPC(g, pc+1)
			return false
		}
		msg := ""
		if in.extern != "" {
			msg = errName(in.extern)
		}
		w.fault(in, bits.TrailingZeros32(m), KindUnsupported, msg)
		return true
	}
	panic("emu: bad control kind") // unreachable: every decoded kind is handled above
}

func (w *warp) exitLanes(in *dinst, ex uint32) {
	b, l := w.b, w.l
	w.live &^= ex
	w.runm &^= ex
	for x := ex; x != 0; x &= x - 1 {
		w.st[bits.TrailingZeros32(x)] = lsExited
	}
	b.exited += bits.OnesCount32(ex)
	l.progressed()
	if b.bulk != nil && !w.bulkExit(in, ex) {
		return
	}
	if l.sanitize {
		for ln := 0; ln < 32; ln++ {
			if w.st[ln] == lsSync && w.wmask[ln]&ex != 0 {
				sin := &l.prog.code[w.wait[ln]]
				w.fault(in, bits.TrailingZeros32(w.wmask[ln]&ex), KindWarpSync, fmt.Sprintf(
					"the lane exits while lane %d waits for it in %q at %s (member mask %#08x)",
					ln, instrText(sin.src), posString(sin.src.Pos), w.wmask[ln]))
				return
			}
		}
	}
	if w.live == 0 {
		b.liveWarps--
	}
	for i := range b.bars {
		bar := &b.bars[i]
		if bar.arrived == 0 || !bar.full {
			continue
		}
		if l.sanitize {
			w.fault(in, bits.TrailingZeros32(ex), KindBarrier, fmt.Sprintf(
				"the thread exits while %d thread(s) of its block wait at barrier %d (%s at %s); a block-wide barrier needs every thread",
				bar.arrived, i, "bar.sync", posString(l.prog.code[bar.pc].src.Pos)))
			return
		}
		if bar.arrived >= b.nthreads-b.exited {
			w.releaseBarrier(i)
		}
	}
}

// barrier ops
const (
	barSync uint8 = iota
	barArrive
	barRed
)

// barRegCount flags a barrier whose thread count is a register.
const barRegCount = 2

// bar.red operations
const (
	redPopc uint8 = iota
	redAnd
	redOr
)

func (w *warp) barrier(in *dinst, pc int32, g, m uint32) bool {
	b, l := w.b, w.l
	w.setPC(g&^m, pc+1)
	if m == 0 {
		return false
	}
	l0 := bits.TrailingZeros32(m)
	id := int(w.r[in.a+int32(l0)] & 0xffffffff)
	count := 0
	if in.b >= 0 {
		count = int(w.r[in.b+int32(l0)] & 0xffffffff)
	}
	if id >= len(b.bars) {
		w.fault(in, l0, KindBarrier, fmt.Sprintf("barrier id %d out of range (0..15)", id))
		return true
	}
	if in.flags&barRegCount != 0 && (count == 0 || count%32 != 0) {
		w.fault(in, l0, KindBarrier, fmt.Sprintf("barrier %d: thread count %d must be a positive multiple of 32 (the warp size)", id, count))
		return true
	}
	if count > b.nthreads && l.sanitize {
		w.fault(in, l0, KindBarrier, fmt.Sprintf("barrier %d expects %d threads but the block has only %d", id, count, b.nthreads))
		return true
	}
	bar := &b.bars[id]
	if bar.arrived == 0 {
		bar.full = count == 0
		bar.expected = count
		if count == 0 {
			bar.expected = b.nthreads
		}
		bar.pc = pc
		bar.redSeen = false
	} else if l.sanitize {
		if (count == 0) != bar.full || !bar.full && count != bar.expected {
			w.fault(in, l0, KindBarrier, fmt.Sprintf("barrier %d used with thread count %d here but %d at %s", id, count, bar.expected, posString(l.prog.code[bar.pc].src.Pos)))
			return true
		}
		if bar.full && in.op != barArrive && l.prog.code[bar.pc].op != barArrive && bar.pc != pc {
			w.fault(in, l0, KindBarrier, fmt.Sprintf("threads of one block wait at different barriers: this one and %s at %s (barrier %d)",
				instrText(l.prog.code[bar.pc].src), posString(l.prog.code[bar.pc].src.Pos), id))
			return true
		}
	}
	if bar.full && b.exited > 0 && l.sanitize {
		w.fault(in, l0, KindBarrier, fmt.Sprintf("barrier %d waits for all %d threads of the block but %d have exited", id, b.nthreads, b.exited))
		return true
	}
	bar.arrived += bits.OnesCount32(m)
	if in.op == barRed {
		if !bar.redSeen {
			bar.redSeen = true
			bar.redOp = uint8(in.imm)
			switch bar.redOp {
			case redAnd:
				bar.red = 1
			default:
				bar.red = 0
			}
		}
		for x := m; x != 0; x &= x - 1 {
			ln := bits.TrailingZeros32(x)
			p := w.r[in.c+int32(ln)] & 1
			if in.flags&1 != 0 {
				p ^= 1
			}
			switch bar.redOp {
			case redPopc:
				bar.red += p
			case redAnd:
				bar.red &= p
			case redOr:
				bar.red |= p
			}
		}
	}
	blocked := false
	if in.op == barArrive {
		w.setPC(m, pc+1)
	} else {
		for x := m; x != 0; x &= x - 1 {
			ln := bits.TrailingZeros32(x)
			w.st[ln] = lsBar
			w.wait[ln] = int32(id)
		}
		w.runm &^= m
		blocked = true
	}
	need := bar.expected
	if bar.full && !l.sanitize {
		need = b.nthreads - b.exited
	}
	if bar.arrived >= need {
		w.releaseBarrier(id)
		return false
	}
	return blocked
}

func (w *warp) releaseBarrier(id int) {
	b, l := w.b, w.l
	bar := &b.bars[id]
	for _, x := range b.warps {
		if x == nil {
			continue
		}
		// The warp's running lanes may be converged (their pcs in cpc): write the pcs back
		// before lanes join them.
		x.diverge()
		for ln := 0; ln < 32; ln++ {
			if x.st[ln] != lsBar || x.wait[ln] != int32(id) {
				continue
			}
			x.st[ln] = lsRun
			x.runm |= 1 << ln
			wpc := x.pc[ln]
			win := &l.prog.code[wpc]
			if win.op == barRed && win.d >= 0 {
				x.r[win.d+int32(ln)] = bar.red & win.dmask[0]
			}
			x.pc[ln] = wpc + 1
			x.conv = false
		}
	}
	bar.arrived = 0
	b.epoch++
	if l.gRace {
		l.raceBarrier(b)
	}
	l.progressed()
	if l.weak {
		l.publishBlock(b, bar.full)
	}
}

// warpSync runs a .sync warp operation once every lane of its member mask has reached it.
// Lanes may name different masks (tiles of a warp): each mask meets separately.
func (w *warp) warpSync(in *dinst, pc int32, g, m uint32) bool {
	if in.aligned {
		return w.alignedSync(in, pc, g, m)
	}
	w.setPC(g&^m, pc+1)
	maskOf := func(ln int) uint32 {
		if in.e < 0 {
			return fullMask
		}
		return uint32(w.r[in.e+int32(ln)])
	}
	for rest := m; rest != 0; {
		mm := maskOf(bits.TrailingZeros32(rest))
		var mg uint32
		for x := rest; x != 0; x &= x - 1 {
			if ln := bits.TrailingZeros32(x); maskOf(ln) == mm {
				mg |= 1 << ln
			}
		}
		rest &^= mg
		if w.syncGroup(in, pc, mg, mm) {
			return true
		}
	}
	return false
}

// syncGroup gathers the lanes mg naming member mask mm with those already waiting for it,
// and runs the operation when the whole mask is there; it reports a fault.
func (w *warp) syncGroup(in *dinst, pc int32, mg, mm uint32) bool {
	l := w.l
	if mg&^mm != 0 && l.sanitize {
		w.fault(in, bits.TrailingZeros32(mg&^mm), KindWarpSync, fmt.Sprintf("the executing lane is not in the member mask %#08x", mm))
		return true
	}
	var waiting uint32
	for ln := 0; ln < 32; ln++ {
		if w.st[ln] == lsSync && w.wmask[ln] == mm && (w.wait[ln] == pc || in.anyPC && l.prog.code[w.wait[ln]].anyPC) {
			waiting |= 1 << ln
		}
	}
	need := mm
	if dead := mm &^ w.live; dead != 0 {
		if l.sanitize {
			w.fault(in, bits.TrailingZeros32(mg), KindWarpSync, fmt.Sprintf("member mask %#08x names lane(s) %#08x that have exited or do not exist", mm, dead))
			return true
		}
		need &= w.live
	}
	part := mg | waiting
	if part&need != need {
		for x := mg; x != 0; x &= x - 1 {
			ln := bits.TrailingZeros32(x)
			w.st[ln] = lsSync
			w.wait[ln] = pc
			w.wmask[ln] = mm
		}
		w.runm &^= mg
		return false
	}
	if in.exec != nil {
		in.exec(w, in, part)
	}
	for x := waiting; x != 0; x &= x - 1 {
		ln := bits.TrailingZeros32(x)
		w.st[ln] = lsRun
		w.pc[ln] = w.wait[ln] + 1
	}
	w.runm |= waiting
	w.setPC(mg, pc+1)
	return false
}

// describe says where a warp is and what it waits on, for deadlock reports.
func (w *warp) describe() string {
	l := w.l
	var b strings.Builder
	fmt.Fprintf(&b, "GPU %d block (%d,%d,%d) warp %d:", w.b.gpu, w.b.id[0], w.b.id[1], w.b.id[2], w.idx)
	type key struct {
		st   uint8
		pc   int32
		wait int32
	}
	groups := map[key]uint32{}
	var order []key
	for ln := 0; ln < 32; ln++ {
		if w.live&(1<<ln) == 0 {
			continue
		}
		pc := w.pc[ln]
		if w.conv && w.st[ln] == lsRun {
			pc = w.cpc
		}
		k := key{w.st[ln], pc, w.wait[ln]}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] |= 1 << ln
	}
	sort.Slice(order, func(i, j int) bool { return order[i].pc < order[j].pc })
	for i, k := range order {
		if i > 0 {
			b.WriteString(";")
		}
		in := &l.prog.code[k.pc]
		where := fmt.Sprintf("%q at %s", instrText(in.src), posString(in.src.Pos))
		switch k.st {
		case lsBar:
			bar := &w.b.bars[k.wait]
			fmt.Fprintf(&b, " lanes %#08x wait at barrier %d (%d of %d threads arrived) %s", groups[k], k.wait, bar.arrived, bar.expected, where)
		case lsSync:
			fmt.Fprintf(&b, " lanes %#08x wait for the other members of %s", groups[k], where)
		default:
			if in.kind == ctlExtern {
				reason := ""
				if c := w.ext[bits.TrailingZeros32(groups[k])]; c != nil && c.reason != "" {
					reason = " (" + c.reason + ")"
				}
				fmt.Fprintf(&b, " lanes %#08x blocked in extern %s%s %s", groups[k], errName(in.extern), reason, where)
			} else {
				fmt.Fprintf(&b, " lanes %#08x running (spinning?) at %s", groups[k], where)
			}
		}
	}
	return b.String()
}
