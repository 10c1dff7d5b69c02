package emu

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
)

// The engine runs grids. System.Launch makes one for a single grid and runs it to
// completion; System.Start puts grids in flight on the System's stream engine, where grids
// of different GPUs, kernels and shapes, started at different times, run at once, as the
// kernels of a machine's GPUs (and of a GPU's streams) do. They share one set of weak-memory
// buffers and one race and missing-fence detector.

func (s *System) newEngine(o Options) *engine {
	e := &engine{sys: s, opt: o}
	e.sanitize = !o.NoSanitizer
	e.weak = o.Weak
	e.fences = e.weak && e.sanitize
	if e.fences {
		e.recs, s.recPool = s.recPool, nil
	}
	e.budget = o.StepBudget
	if e.budget <= 0 {
		e.budget = 1 << 26
	}
	seed := o.Seed
	if seed == 0 {
		seed = 1
	}
	e.rng = rand.New(rand.NewSource(seed))
	e.gRace = e.sanitize
	return e
}

// now is the logical time (timers.go).
func (e *engine) now() int64 { return e.t0 + e.steps + e.skip }

func (e *engine) progressed() { e.progress++; e.lastProg = e.steps }

// add puts grid l in flight.
func (e *engine) add(l *launch) {
	l.engine = e
	l.startRace()
	l.nthreads = l.blk.size()
	l.nwarps = (l.nthreads + 31) / 32
	l.lsize = l.prog.localSize
	l.nblocks = l.grid.size() * len(l.gpus)
	if e.opt.Seed != 0 {
		l.order = e.rng.Perm(l.nblocks / l.cdim.size()) // whole clusters
	}
	l.gbase = e.nextGnum
	e.nextGnum += uint32(l.nblocks)
	l.steps0, l.instr0 = e.steps, e.threadInstr
	e.grids = append(e.grids, l)
	e.progressed()
}

// newBlock makes the grid's i-th block to start.
func (l *launch) newBlock(i int) *block {
	ng := len(l.gpus)
	if cs := l.cdim.size(); cs > 1 { // cluster by cluster, the members of one in rank order on one GPU
		c, r := i/cs, i%cs
		if l.order != nil {
			c = l.order[c]
		}
		id, rank := l.clusterOf((c/ng)*cs + r)
		return &block{l: l, gpu: l.gpus[c%ng], id: id, rank: rank, gnum: l.gbase + uint32(c*cs+r)}
	}
	if l.order != nil {
		i = l.order[i]
	}
	j := i / ng
	return &block{l: l, gpu: l.gpus[i%ng], id: [3]int{j % l.grid.X, j / l.grid.X % l.grid.Y, j / (l.grid.X * l.grid.Y)}, gnum: l.gbase + uint32(i)}
}

// visit outcomes
const (
	visitOK    = iota
	visitFault // e.err is set
	visitSpin  // no progress for the step budget, and nothing scheduled to wait for
)

// visit runs block b of grid l for one time slice.
func (l *launch) visit(b *block) int {
	e := l.engine
	q := l.quantum
	if e.opt.Seed != 0 {
		q = 1 + e.rng.Intn(l.quantum)
	}
	l.runBlock(b, q)
	if e.err != nil {
		return visitFault
	}
	if e.weak && e.npend > 0 {
		l.flushDue()
	}
	if len(e.sys.timers) > 0 && e.sys.timers[0].due <= e.now() {
		if l.runDue(); e.err != nil {
			return visitFault
		}
	}
	if e.steps-e.lastProg > e.budget {
		if l.skipToNext() { // spinning on data in flight: move the clock to its arrival
			if e.err != nil {
				return visitFault
			}
			return visitOK
		}
		return visitSpin
	}
	return visitOK
}

// pass runs every live block of grid l once, starting the blocks not started yet (all of a
// grid's blocks are resident at once).
func (l *launch) pass() int {
	e := l.engine
	if e.opt.Seed != 0 {
		e.rng.Shuffle(len(l.blocks), func(i, j int) { l.blocks[i], l.blocks[j] = l.blocks[j], l.blocks[i] })
	}
	for i := 0; i < len(l.blocks); i++ {
		if r := l.visit(l.blocks[i]); r != visitOK {
			return r
		}
	}
	cs := l.cdim.size()
	for l.next < l.nblocks {
		if cs > 1 { // a cluster's blocks start together
			c := &cluster{arrivedIn: map[*warp]*[32]uint32{}, perBlock: map[*block]int{}}
			for r := 0; r < cs; r++ {
				b := l.newBlock(l.next)
				l.next++
				b.cl = c
				c.blocks = append(c.blocks, b)
				if err := l.startBlock(b); err != nil {
					e.err, e.errGrid = err, l
					return visitFault
				}
				l.blocks = append(l.blocks, b)
			}
			for _, b := range c.blocks {
				if r := l.visit(b); r != visitOK {
					return r
				}
			}
			continue
		}
		b := l.newBlock(l.next)
		l.next++
		if err := l.startBlock(b); err != nil {
			e.err, e.errGrid = err, l
			return visitFault
		}
		l.blocks = append(l.blocks, b)
		if r := l.visit(b); r != visitOK {
			return r
		}
		if b.done {
			l.blocks = l.blocks[:len(l.blocks)-1]
		}
	}
	n := 0
	for _, b := range l.blocks {
		if !b.done {
			l.blocks[n] = b
			n++
		}
	}
	clear(l.blocks[n:])
	l.blocks = l.blocks[:n]
	return visitOK
}

func (l *launch) finished() bool { return len(l.blocks) == 0 && l.next >= l.nblocks }

// stall kinds: why the grids in flight cannot go on by themselves
const (
	stallNone     = iota
	stallBlocked  // every live warp is blocked
	stallSpin     // warps run without progress for the step budget
	stallMbarrier // every live warp polls an mbarrier phase that cannot complete
)

// round runs one scheduling round over the grids in flight. It returns the grid that
// faulted (e.err holds the fault) or finished, if one did, and whether the grids stall.
func (e *engine) round() (ended *launch, stall int) {
	order := e.grids
	multi := len(e.grids) > 1
	if multi && e.opt.Seed != 0 {
		order = append([]*launch(nil), e.grids...)
		e.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	stepsBefore, progBefore, extBefore := e.steps, e.progress, e.extBlocked
	skipped := false
	for _, l := range order {
		if multi && e.opt.Seed != 0 && e.rng.Intn(4) == 0 {
			skipped = true // a slower GPU this round
			continue
		}
		passes := 1
		if multi && e.opt.Seed != 0 {
			passes += e.rng.Intn(3) // ... or a faster one
		}
		for p := 0; p < passes && !l.finished(); p++ {
			switch l.pass() {
			case visitFault:
				if e.errGrid == nil {
					e.errGrid = l
				}
				return e.errGrid, stallNone
			case visitSpin:
				return nil, stallSpin
			}
		}
		if l.finished() {
			return l, stallNone
		}
	}
	if skipped {
		return nil, stallNone
	}
	if e.progress == progBefore && e.steps-stepsBefore == e.extBlocked-extBefore {
		if e.weak && e.npend > 0 {
			e.grids[0].flushAll()
			return nil, stallNone
		}
		if e.grids[0].skipToNext() { // waiting for data in flight
			if e.err != nil {
				if e.errGrid == nil {
					e.errGrid = e.grids[0]
				}
				return e.errGrid, stallNone
			}
			return nil, stallNone
		}
		return nil, stallBlocked
	}
	if e.mbRounds++; e.progress != progBefore || !e.mbarrierStalled(stepsBefore) {
		e.mbRounds = 0
	} else if e.mbRounds >= mbStallRounds {
		return nil, stallMbarrier
	}
	return nil, stallNone
}

func (e *engine) mbarrierStalled(since int64) bool {
	for _, l := range e.grids {
		if !l.mbarrierStalled(since) {
			return false
		}
	}
	return true
}

// runAlone runs grid l, the engine's only one, to completion (System.Launch).
func (e *engine) runAlone(l *launch) error {
	e.add(l)
	for {
		ended, stall := e.round()
		switch stall {
		case stallBlocked:
			return l.stuck(KindDeadlock, "every live warp is blocked")
		case stallSpin:
			return l.stuck(KindNoProgress, fmt.Sprintf("no progress after %d steps (warp-instructions without a store, atomic, barrier, exit or completed extern call): warps spinning", e.budget))
		case stallMbarrier:
			return l.stuck(KindDeadlock, "every live warp polls an mbarrier phase that cannot complete")
		}
		if ended != nil {
			if e.err != nil {
				return e.err
			}
			e.grids = e.grids[:0]
			l.flushAll()
			if e.fences {
				clear(e.recs)
				e.sys.recPool = e.recs[:0]
			}
			return nil
		}
	}
}

// ---- the stream engine: grids in flight at once ----

// Running is a kernel started with System.Start: in flight until System.Run reports it
// finished.
type Running struct {
	// Kernel is the kernel's name and GPUs the GPUs its grid runs on.
	Kernel string
	GPUs   []int
	// Tag is the caller's, for its own bookkeeping (System.Start does not use it).
	Tag  any
	l    *launch
	done bool
	err  error
	st   Stats
}

// Done reports whether the kernel has finished (completed or faulted). A nil *Running, or a
// zero Running{} not made by System.Start, is done (nothing runs), and its Err says so.
func (r *Running) Done() bool { return r == nil || r.done || r.l == nil }

// Err is nil while the kernel runs and when it completed, else its fault (an *Error).
func (r *Running) Err() error {
	if r == nil {
		return &Error{Kind: KindLaunch, Msg: "a nil *Running (System.Start returns the kernel it starts)"}
	}
	if r.l == nil && !r.done {
		return &Error{Kind: KindLaunch, Kernel: r.Kernel, Msg: "a zero Running, not made by System.Start"}
	}
	return r.err
}

// Stats is the kernel's work, once it is done (the engine's counters over its lifetime
// include the kernels that ran beside it). A nil *Running's are zero.
func (r *Running) Stats() Stats {
	if r == nil {
		return Stats{}
	}
	return r.st
}

// Progress says what System.Run did.
type Progress struct {
	// Finished lists the kernels that ended during the call, in order; a faulted one has
	// Err set.
	Finished []*Running
	// Progressed reports that some kernel made progress (a store, a value-changing atomic,
	// a completed barrier, an exit, a completed extern call, a published store, a finished
	// kernel).
	Progressed bool
	// Stalled reports that every kernel in flight is blocked or spins without progress: only
	// work from outside (a kernel started, a host write) can move them. Abort turns that
	// into the deadlock or no-progress report.
	Stalled bool
	// InFlight is the number of kernels still running.
	InFlight int
}

// Start checks a launch at once and puts its grid in flight beside the kernels already
// running (of any GPU, kernel and shape): it runs as System.Run is called, interleaved with
// them (adversarially under a nonzero Options.Seed: blocks, warps and whole grids take
// random turns). Weak, NoSanitizer and StepBudget come from the first kernel started when
// none is in flight; a later kernel must agree on Weak and NoSanitizer. Kernels that run one
// after the other (one started after another finished) are ordered by the kernel boundary;
// kernels in flight together are not, so a race or a missing fence between them is
// reported as within one kernel.
func (s *System) Start(k Launch) (r *Running, err error) {
	if s == nil {
		return nil, nilSystemLaunch("Start", k.Entry)
	}
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, &Error{Kind: KindInternal, Kernel: k.Entry, Msg: fmt.Sprintf("emulator bug: %v", p)}
		}
	}()
	if m := s.reenteredMsg("Start"); m != "" {
		return nil, launchErr(k.Entry, "%s", m)
	}
	l, err := s.prepare(k)
	if err != nil {
		return nil, err
	}
	e := s.eng
	if e == nil || len(e.grids) == 0 {
		o := k.Options
		if e != nil && o.Seed != 0 {
			o.Seed += int64(s.engines) * 7919 // a new stretch of work draws new random choices
		}
		s.engines++
		e = s.newEngine(o)
		e.t0, e.streams = s.clock, true
		s.eng = e
	} else if k.Options.Weak != e.opt.Weak || k.Options.NoSanitizer != e.opt.NoSanitizer {
		return nil, launchErr(k.Entry, "Options.Weak %v and NoSanitizer %v differ from those of the kernels in flight (%v, %v)", k.Options.Weak, k.Options.NoSanitizer, e.opt.Weak, e.opt.NoSanitizer)
	}
	r = &Running{Kernel: k.Entry, GPUs: l.gpus, l: l}
	l.run = r
	e.add(l)
	return r, nil
}

// Compatible reports whether a kernel launched with o can start now beside the kernels in
// flight: none is in flight, or they agree on Weak and NoSanitizer (Start refuses it
// otherwise; wait for them to finish). A nil *System is compatible with nothing.
func (s *System) Compatible(o Options) bool {
	if s == nil {
		return false
	}
	e := s.eng
	return e == nil || len(e.grids) == 0 || o.Weak == e.opt.Weak && o.NoSanitizer == e.opt.NoSanitizer
}

// InFlight is the number of kernels started with Start that have not finished (0 for a nil
// *System).
func (s *System) InFlight() int {
	if s == nil || s.eng == nil {
		return 0
	}
	return len(s.eng.grids)
}

// Run runs the kernels in flight for about steps warp-instructions (at least one
// scheduling round), or until one finishes or they stall, and says what happened. A kernel
// that faults is finished with its error and the others go on. With no kernel in flight (or
// a nil *System) it does nothing, and so it does when called while the System runs
// kernels, from an Action or an extern function (it would re-enter the scheduler).
func (s *System) Run(steps int64) (pr Progress) {
	if s == nil || s.cur != nil {
		return Progress{}
	}
	e := s.eng
	if e == nil || len(e.grids) == 0 {
		return Progress{}
	}
	defer func() {
		if p := recover(); p != nil {
			err := &Error{Kind: KindInternal, Msg: fmt.Sprintf("emulator bug: %v", p)}
			for _, l := range e.grids {
				err.Kernel = l.fn.f.Name
				pr.Finished = append(pr.Finished, e.finish(l, err))
			}
			e.grids = nil
			pr.InFlight = 0
		}
	}()
	s.cur = e
	defer func() { s.clock, s.cur = e.now(), nil }()
	prog0, start := e.progress, e.steps
	for len(e.grids) > 0 {
		ended, stall := e.round()
		if stall != stallNone {
			pr.Stalled = true
			break
		}
		if ended != nil {
			err := e.err
			e.err, e.errGrid = nil, nil
			pr.Finished = append(pr.Finished, e.finish(ended, err))
			e.progressed()
			break
		}
		if e.steps-start >= steps {
			break
		}
	}
	pr.Progressed = e.progress != prog0
	pr.InFlight = len(e.grids)
	if len(e.grids) == 0 {
		e.idle()
	}
	return pr
}

// finish takes grid l out of flight, with err (nil: it completed).
func (e *engine) finish(l *launch, err error) *Running {
	for i, x := range e.grids {
		if x == l {
			e.grids = append(e.grids[:i], e.grids[i+1:]...)
			break
		}
	}
	if err != nil { // a faulted grid's blocks stop where they are
		for _, b := range l.blocks {
			if b.started && !b.done {
				e.liveBytes -= l.blockBytes
				b.done = true
			}
		}
		l.blocks = nil
	} else if e.npend > 0 { // the kernel boundary: its stores become visible
		var mine []*pendingStore
		for _, p := range e.pendQ {
			if p.blk.l == l {
				mine = append(mine, p)
			}
		}
		for _, p := range mine {
			l.apply(p, false)
		}
	}
	l.end = l.tick()
	if e.streams {
		if e.gpuAcqDone == nil {
			e.gpuAcqDone = make([]uint32, len(e.sys.gpus))
		}
		for _, g := range l.gpus {
			e.gpuAcqDone[g] = max(e.gpuAcqDone[g], l.acqMaxS)
		}
	}
	if len(e.grids) > 0 && e.gRace {
		e.retired = append(e.retired, l)
	}
	e.prune()
	r := l.run
	if r == nil {
		r = &Running{Kernel: l.fn.f.Name, GPUs: l.gpus, l: l}
	}
	r.done, r.err = true, err
	r.st = Stats{WarpInstructions: e.steps - l.steps0, ThreadInstructions: e.threadInstr - l.instr0, Blocks: l.nblocks}
	return r
}

// prune drops the race detector's state of finished grids that no grid in flight overlaps.
func (e *engine) prune() {
	if len(e.retired) == 0 {
		return
	}
	lo := ^uint32(0)
	for _, l := range e.grids {
		lo = min(lo, l.clk0)
	}
	n := 0
	for _, r := range e.retired {
		if r.end > lo {
			e.retired[n] = r
			n++
			continue
		}
		for i := uint32(0); i < uint32(r.nblocks); i++ {
			delete(e.gblocks, r.gbase+i)
		}
	}
	clear(e.retired[n:])
	e.retired = e.retired[:n]
}

// idle: no kernel is in flight; every buffered store becomes visible.
func (e *engine) idle() {
	if e.npend > 0 {
		(&launch{engine: e}).flushAll()
	}
	e.retired = nil
	e.gblocks = nil
	if e.fences {
		clear(e.recs)
		e.sys.recPool = e.recs[:0]
		e.recs = nil
		e.fences = false // a new engine starts with the next kernel
	}
}

// gridOf returns the grid (in flight or recently finished) whose block number i is.
func (e *engine) gridOf(i uint32) *launch {
	for _, l := range e.grids {
		if i >= l.gbase && i < l.gbase+uint32(l.nblocks) {
			return l
		}
	}
	for _, l := range e.retired {
		if i >= l.gbase && i < l.gbase+uint32(l.nblocks) {
			return l
		}
	}
	return nil
}

// Cancel ends r, a kernel in flight, with a no-progress error saying why and where its
// warps were (its blocks stop where they are), and returns that error; a kernel already
// finished, or nil, is left as it is (nil). It is for a host that gave up waiting for r.
func (s *System) Cancel(r *Running, why string) error {
	if s == nil {
		return errNilSystem("Cancel")
	}
	if err := s.reentered("Cancel"); err != nil {
		return err
	}
	e := s.eng
	if e == nil || r == nil || r.done {
		return nil
	}
	for _, l := range e.grids {
		if l != r.l {
			continue
		}
		x := l.stuck(KindNoProgress, why)
		e.finish(l, x)
		if len(e.grids) == 0 {
			e.idle()
		}
		return x
	}
	return nil
}

// Abort ends every kernel in flight with the report of why they cannot go on (after Run
// reported Stalled): a deadlock when every live warp is blocked, else no progress, naming
// every kernel, its GPUs and the Go lines where its warps wait or spin. why, when not
// empty, is added to the message (who would have had to start what). It returns the
// kernels it ended and the report, also set as each kernel's Err.
func (s *System) Abort(why string) (ended []*Running, err error) {
	if s == nil {
		return nil, errNilSystem("Abort")
	}
	if err := s.reentered("Abort"); err != nil {
		return nil, err
	}
	e := s.eng
	if e == nil || len(e.grids) == 0 {
		return nil, nil
	}
	kind, msg := KindNoProgress, "warps spinning"
	if e.allBlocked() {
		kind, msg = KindDeadlock, "every live warp is blocked"
	}
	var names []string
	var first *Error
	var lines []string
	for _, l := range e.grids {
		x := l.stuck(kind, msg)
		xe := x.(*Error)
		names = append(names, fmt.Sprintf("%s on GPU(s) %s", errName(l.fn.f.Name), intList(l.gpus)))
		if first == nil {
			first = xe
		}
		for _, w := range xe.Warps {
			if len(lines) < 64 {
				lines = append(lines, errName(l.fn.f.Name)+": "+w)
			}
		}
	}
	sum := &Error{Kind: kind, Kernel: first.Kernel, GPU: first.GPU, Block: first.Block, Thread: first.Thread, Instr: first.Instr, Pos: first.Pos,
		Msg: fmt.Sprintf("%s, in the %d kernel(s) in flight (%s)", first.Msg, len(e.grids), strings.Join(names, "; ")), Warps: lines}
	if why != "" {
		sum.Msg += "; " + why
	}
	e.err = nil
	for len(e.grids) > 0 {
		ended = append(ended, e.finish(e.grids[0], sum))
	}
	e.idle()
	return ended, sum
}

// allBlocked reports whether no live warp of the grids in flight can run.
func (e *engine) allBlocked() bool {
	for _, l := range e.grids {
		for _, b := range l.blocks {
			if !b.started || b.done {
				continue
			}
			for _, w := range b.warps {
				if w != nil && w.runm != 0 {
					return false
				}
			}
		}
	}
	return true
}

func intList(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}

// Check checks a launch as Start and Launch do (module, kernel, shape, limits, arguments)
// without running it.
func (s *System) Check(k Launch) (err error) {
	if s == nil {
		return nilSystemLaunch("Check", k.Entry)
	}
	defer func() {
		if p := recover(); p != nil {
			err = &Error{Kind: KindInternal, Kernel: k.Entry, Msg: fmt.Sprintf("emulator bug: %v", p)}
		}
	}()
	_, err = s.prepare(k)
	return err
}
