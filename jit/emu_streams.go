package jit

import (
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/kgen-dev/kgen/emu"
)

// Streams on the emulator. Every device has a default stream and the streams it made, each
// a FIFO of operations (kernel launches, copies in stream order, event records). A launch
// enqueues and returns, as on a GPU; the kernels at the heads of the queues run at once on
// the machine's emu.System (System.Start/Run), so kernels of different ranks, different
// kernels and shapes, started at different times, run concurrently, and a rank may be
// launches ahead of another. jit's streams are blocking streams: work on a device's default
// stream waits for the device's other streams' earlier work and the other way round (CUDA's
// legacy default stream).
//
// Who runs the kernels: on a machine of several ranks (RunRanks), a scheduler goroutine. A
// rank's every emulator call is a scheduling point: the rank asks for a turn and waits until
// the scheduler grants it; a synchronizing call waits until what it waits for is done. The
// scheduler grants turns and runs slices of the kernels in flight between them, choosing by
// the seed (Options.Seed: per-seed rank speeds, so that one rank often runs several calls
// ahead, and random slices); with seed 0 it grants turns in rank order and runs the kernels
// when no rank is ready. It makes its choices when no rank is running plain Go code (it
// waits for them to arrive), so a seed gives the same interleaving again; a rank that stays
// away (talking to another over a Go channel, say) is waited for only briefly. When every
// rank is blocked in a synchronizing call (or in a collective NVSHMEM call, or returned) and
// the kernels in flight cannot progress, that is a deadlock: the blocked ranks fail with
// emu's report naming the kernels and the Go lines where they wait. Devices that are not
// ranks of such a machine drive the kernels themselves in their synchronizing calls.

// emuOp is one operation in a stream.
type emuOp struct {
	q       *emuQueue
	desc    string               // "launch of K (grid 1x1x1, block 32x1x1)"
	launch  *emu.Launch          // a kernel, or
	fn      func() error         // a copy or an event record, run when the stream reaches it
	poll    func() (bool, error) // a stream wait (WaitValue32): done once it reports true
	after   []*emuOp             // work of other streams that must be done first
	run     *emu.Running
	done    bool
	err     error
	ctx     context.Context // LaunchConfig.Context: waits for the op end with it (nil: none)
	ctxTold bool            // a waiter has returned ctx's end (later waits wait on)
	call    int             // the number of the rank's launch with a LaunchConfig.Call (-1: none)
}

// emuCall is what the ranks' k-th launches with a LaunchConfig.Call were (emuMachine.calls).
type emuCall struct {
	desc []string
	in   []bool
	n    int
}

// noteCall records rank's k-th launch with a Call (m.mu held). Collective library calls
// are made by every rank in the same order; once every rank has made its k-th, their Calls
// are compared, and a disagreement (a different element count, type, op or root on some
// rank: kernels that would compute garbage or never meet) fails every rank's device with an
// error naming the odd ranks. Nothing waits for it: the ranks' streams run on their own.
func (m *emuMachine) noteCall(d *emuDevice, call string) int {
	if m.w == nil || m.w.n < 2 {
		return -1
	}
	k := d.calls
	d.calls++
	if m.calls == nil {
		m.calls = map[int]*emuCall{}
	}
	c := m.calls[k]
	if c == nil {
		c = &emuCall{desc: make([]string, m.w.n), in: make([]bool, m.w.n)}
		m.calls[k] = c
	}
	if !c.in[d.gpu] {
		c.in[d.gpu], c.desc[d.gpu] = true, call
		c.n++
	}
	if c.n == m.w.n {
		delete(m.calls, k)
		if dis := disagreement("rank", c.desc); dis != "" {
			m.failAll(fmt.Errorf("jit: the ranks' collective calls #%d disagree: %s; every rank must make the same collective calls in the same order", k+1, dis))
		}
	}
	return k
}

// failAll makes err every device's sticky error and drops their queued work (m.mu held).
func (m *emuMachine) failAll(err error) {
	for _, d := range m.devs {
		if d.err == nil {
			d.err = err
		}
		for _, q := range d.queues {
			for _, x := range q.ops {
				x.done = true
			}
		}
	}
	if m.sched != nil {
		m.sched.wakeAll()
	}
}

// missing says which ranks have not made the collective call k yet ("" when unknown).
func (m *emuMachine) missing(k int) string {
	c := m.calls[k]
	if k < 0 || c == nil {
		return ""
	}
	var out, in []int
	for r, ok := range c.in {
		if ok {
			in = append(in, r)
		} else {
			out = append(out, r)
		}
	}
	return fmt.Sprintf("; %s never made it (%s launched it)", plural("rank", out), joinInts(in))
}

// emuQueue is a stream's FIFO.
type emuQueue struct {
	d    *emuDevice
	ops  []*emuOp
	tail *emuOp // the last op enqueued
	def  bool   // the device's default stream
}

func (q *emuQueue) empty() bool { return len(q.ops) == 0 }

// rank states (the scheduler's view)
const (
	rsOutside = iota // running the program's Go code
	rsWant           // waiting for a turn
	rsTurn           // holding the turn (in an emulator call)
	rsBlocked        // waiting in a synchronizing call for cond
	rsParked         // waiting for the other ranks in a collective NVSHMEM call
	rsDone           // returned
)

// emuSched is the scheduler of a machine of several ranks.
type emuSched struct {
	m      *emuMachine
	cv     *sync.Cond   // on m.mu: the scheduler waits on it
	rcv    []*sync.Cond // on m.mu: rank r waits on rcv[r] for its turn
	st     []int
	cond   []func() bool
	werr   []error      // a deadlock report for a blocked rank
	dev    []*emuDevice // the device a blocked rank waits on
	holder int          // the rank holding the turn, or -1
	rng    *rand.Rand
	seed   int64
	speed  []int
	away   []time.Time // when each rank left its last emulator call (to run Go code)
	timer  *time.Timer
}

// arriveWait is how long the scheduler waits for ranks running Go code to reach their next
// emulator call before it goes on without them.
const arriveWait = 50 * time.Millisecond

// sliceSteps is how many warp-instructions the kernels run between two scheduling decisions.
const sliceSteps = 1 << 14

func (m *emuMachine) startSched(seed int64) {
	s := &emuSched{m: m, cv: sync.NewCond(&m.mu), st: make([]int, m.n), cond: make([]func() bool, m.n), werr: make([]error, m.n), dev: make([]*emuDevice, m.n), holder: -1, seed: seed,
		rng: rand.New(rand.NewSource(seed)), speed: make([]int, m.n), away: make([]time.Time, m.n)}
	now := time.Now()
	for r := range s.away {
		s.away[r] = now
	}
	for r := range s.speed {
		s.speed[r] = 1
		if seed != 0 {
			s.speed[r] = 1 << s.rng.Intn(4) // 1, 2, 4 or 8: some ranks run far ahead
		}
	}
	s.rcv = make([]*sync.Cond, m.n)
	for r := range s.rcv {
		s.rcv[r] = sync.NewCond(&m.mu)
	}
	m.sched = s
	go s.loop()
}

// signal wakes whoever waits on the machine (from outside m.mu).
func (m *emuMachine) signal() {
	m.lock()
	if m.sched != nil {
		m.sched.wakeAll()
	}
	m.mu.Unlock()
}

// wakeAll wakes the scheduler and every rank waiting for a turn (m.mu held).
func (s *emuSched) wakeAll() {
	s.cv.Broadcast()
	for _, c := range s.rcv {
		c.Broadcast()
	}
}

// failed is the world's failure (a rank failed), or nil.
func (m *emuMachine) failed() error {
	if m.w == nil {
		return nil
	}
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	return m.w.fail
}

// watch wakes the machine's waiters when ctx ends; the returned func stops it.
func (m *emuMachine) watch(ctx context.Context) func() bool {
	if ctx == nil || ctx.Done() == nil {
		return func() bool { return true }
	}
	return context.AfterFunc(ctx, m.signal)
}

// turn waits for rank's turn and returns with m.mu held; release ends the turn. On a
// machine without a scheduler it only locks.
func (m *emuMachine) turn(rank int) (release func()) {
	m.lock()
	s := m.sched
	if s == nil {
		return m.mu.Unlock
	}
	s.st[rank] = rsWant
	s.cv.Broadcast()
	for s.st[rank] != rsTurn {
		s.rcv[rank].Wait()
	}
	return func() {
		s.st[rank] = rsOutside
		s.away[rank] = time.Now()
		s.holder = -1
		s.cv.Broadcast()
		m.mu.Unlock()
	}
}

// park marks rank as waiting for the others in a collective call (not running Go code, not
// to be given turns) until unpark.
func (m *emuMachine) park(rank int) {
	m.lock()
	if s := m.sched; s != nil {
		s.st[rank] = rsParked
		s.cv.Broadcast()
	}
	m.mu.Unlock()
}

func (m *emuMachine) unpark(rank int) {
	m.lock()
	if s := m.sched; s != nil && s.st[rank] == rsParked {
		s.st[rank] = rsOutside
		s.away[rank] = time.Now()
		s.cv.Broadcast()
	}
	m.mu.Unlock()
}

// unparkAll: the collective call the parked ranks waited in is complete (every rank is in
// at most one).
func (m *emuMachine) unparkAll() {
	m.lock()
	if s := m.sched; s != nil {
		for r, st := range s.st {
			if st == rsParked {
				s.st[r] = rsOutside
				s.away[r] = time.Now()
			}
		}
		s.cv.Broadcast()
	}
	m.mu.Unlock()
}

// exitRank: rank's function has returned.
func (m *emuMachine) exitRank(rank int) {
	m.lock()
	if s := m.sched; s != nil {
		s.st[rank] = rsDone
		s.cv.Broadcast()
	}
	m.mu.Unlock()
}

// await blocks rank (m.mu held, turn held or not) until cond holds, driving the kernels
// when there is no scheduler; it returns with m.mu held (and the turn, with a scheduler).
// what describes the call in errors.
func (m *emuMachine) await(d *emuDevice, ctx context.Context, what string, cond func() bool) error {
	m.advance()
	if cond() {
		return nil
	}
	if (ctx == nil || ctx.Done() == nil) && m.w != nil && m.w.ctx != nil {
		ctx = m.w.ctx
	}
	stop := m.watch(ctx)
	defer stop()
	s := m.sched
	if s == nil {
		return m.drive(d, ctx, what, cond)
	}
	rank := d.gpu
	s.dev[rank] = d
	s.st[rank] = rsBlocked
	s.cond[rank] = cond
	s.werr[rank] = nil
	s.holder = -1
	s.cv.Broadcast()
	for {
		for s.st[rank] != rsTurn {
			if s.st[rank] == rsBlocked && (ctx != nil && ctx.Err() != nil || m.failed() != nil || d.expired() != nil || d.err != nil) {
				s.st[rank] = rsWant // take a turn to return with
				s.cv.Broadcast()
			}
			s.rcv[rank].Wait()
		}
		s.cond[rank] = nil
		if err := s.werr[rank]; err != nil {
			s.werr[rank] = nil
			return err
		}
		m.advance()
		if cond() {
			return nil
		}
		if ctx != nil && ctx.Err() != nil {
			d.told(ctx)
			return fmt.Errorf("jit: rank %d gave up waiting in %s: %w", rank, what, ctx.Err())
		}
		if err := d.giveUp(); err != nil {
			return err
		}
		if d.err != nil {
			return d.sticky()
		}
		if err := m.failed(); err != nil {
			return &stoppedError{rank, what, err}
		}
		s.st[rank] = rsBlocked // woken for nothing: wait again
		s.cond[rank] = cond
		s.holder = -1
		s.cv.Broadcast()
	}
}

// drive runs the kernels in flight until cond holds (a machine without a scheduler). It lets
// other goroutines in between slices, and reports a deadlock only after the kernels have
// stalled for arriveWait with nothing new enqueued.
func (m *emuMachine) drive(d *emuDevice, ctx context.Context, what string, cond func() bool) error {
	var stalled time.Time
	for !cond() {
		if m.sys.InFlight() == 0 {
			if w := m.stuckWaits(); w != "" {
				return fmt.Errorf("jit: %s on GPU %d waits for a stream that can never go on (deadlock): a stream wait that no kernel in flight can satisfy: %s", what, d.gpu, w)
			}
			return fmt.Errorf("jit: %s on GPU %d waits for work that was never enqueued", what, d.gpu)
		}
		if ctx != nil && ctx.Err() != nil {
			d.told(ctx)
			return fmt.Errorf("jit: GPU %d gave up waiting in %s: %w", d.gpu, what, ctx.Err())
		}
		if err := d.giveUp(); err != nil {
			return err
		}
		if d.err != nil {
			return d.sticky()
		}
		pr := m.sys.Run(sliceSteps)
		m.advance()
		if cond() {
			return nil
		}
		switch {
		case !pr.Stalled || pr.Progressed:
			stalled = time.Time{}
		case stalled.IsZero():
			stalled = time.Now()
		case time.Since(stalled) > arriveWait:
			why := fmt.Sprintf("nothing else can run: the host waits in %s on GPU %d", what, d.gpu)
			if w := m.stuckWaits(); w != "" {
				why += "; stream waits not satisfied: " + w
			}
			_, err := m.sys.Abort(why)
			m.advance()
			return fmt.Errorf("jit: %s on GPU %d waits for kernels that can never finish: %w", what, d.gpu, err)
		}
		// Let other goroutines using the machine launch or copy in between.
		m.mu.Unlock()
		if stalled.IsZero() {
			runtime.Gosched()
		} else {
			time.Sleep(time.Millisecond)
		}
		m.lock()
	}
	return nil
}

// advance moves every stream on: starts the kernels at the heads of the queues, takes
// finished ones off, runs copies and records the streams reach (m.mu held).
func (m *emuMachine) advance() {
	for changed := true; changed; {
		changed = false
		for _, d := range m.devs {
			for _, q := range d.queues {
				for len(q.ops) > 0 {
					op := q.ops[0]
					if !op.done && !m.step(op) {
						break
					}
					q.ops = q.ops[1:]
					if len(q.ops) == 0 {
						q.ops = nil
					}
					changed = true
					if op.err != nil {
						d.fault(op)
					}
				}
			}
		}
	}
}

// step starts or completes op at the head of its queue; it reports whether op is done.
func (m *emuMachine) step(op *emuOp) bool {
	for _, a := range op.after {
		if !a.done {
			return false
		}
	}
	switch {
	case op.launch != nil && op.run == nil:
		if !m.sys.Compatible(op.launch.Options) {
			return false // other weak-memory or sanitizer options: after the kernels in flight
		}
		r, err := m.sys.Start(*op.launch)
		if err != nil {
			op.done, op.err = true, err
			return true
		}
		op.run = r
		return false
	case op.launch != nil:
		if !op.run.Done() {
			return false
		}
		op.done, op.err = true, op.run.Err()
		return true
	}
	if op.poll != nil {
		ok, err := op.poll()
		if err == nil && !ok {
			return false
		}
		op.done, op.err = true, err
		return true
	}
	op.err = op.fn()
	op.done = true
	return true
}

// stuckWaits describes the stream waits (WaitValue32) at the heads of the machine's queues
// that are not satisfied ("" when none), for deadlock reports (m.mu held).
func (m *emuMachine) stuckWaits() string {
	var out []string
	for _, d := range m.devs {
		for _, q := range d.queues {
			if len(q.ops) > 0 && q.ops[0].poll != nil && !q.ops[0].done {
				out = append(out, fmt.Sprintf("GPU %d: %s", d.gpu, q.ops[0].desc))
			}
		}
	}
	return strings.Join(out, "; ")
}

// fault makes op's failure the device's sticky error and fails its queued work.
func (d *emuDevice) fault(op *emuOp) {
	if d.err == nil {
		d.err = fmt.Errorf("jit: rank %d (emulated GPU %d): %s failed: %w", d.gpu, d.gpu, op.desc, op.err)
		if m := d.m; m.shm != nil && m.shm.dev != nil && m.sys.InFlight() == 0 {
			m.shm.dev.Reset()
		}
	}
	for _, q := range d.queues {
		for _, x := range q.ops {
			x.done = true
		}
	}
}

// enqueue appends op to q (m.mu held), ordered after the work of the device's other
// streams that the legacy default stream orders it after.
func (m *emuMachine) enqueue(q *emuQueue, op *emuOp) {
	op.q = q
	d := q.d
	if q.def {
		for _, o := range d.queues {
			if o != q && o.tail != nil && !o.tail.done {
				op.after = append(op.after, o.tail)
			}
		}
	} else if t := d.defq.tail; t != nil && !t.done {
		op.after = append(op.after, t)
	}
	q.ops = append(q.ops, op)
	q.tail = op
	if op.ctx != nil && op.ctx.Done() != nil {
		context.AfterFunc(op.ctx, m.signal)
	}
	m.advance()
	if m.sched != nil {
		m.sched.cv.Broadcast()
	}
}

// expired returns an error when a wait for d's work must end because the context of an op
// not done yet (LaunchConfig.Context) has ended (m.mu held).
func (d *emuDevice) expired() error {
	if op := d.expiredOp(); op != nil {
		return fmt.Errorf("jit: rank %d gave up waiting for %s: %w%s", d.gpu, op.desc, op.ctx.Err(), d.m.missing(op.call))
	}
	return nil
}

// expiredOp is the first op of d whose context has ended and whose waiter has not been told
// yet (m.mu held).
func (d *emuDevice) expiredOp() *emuOp {
	for _, q := range d.queues {
		for _, op := range q.ops {
			if op.ctx != nil && !op.done && !op.ctxTold && op.ctx.Err() != nil {
				return op
			}
		}
	}
	return nil
}

// giveUp returns the expiry of d's first expired op to a waiter, once: the op itself stays in
// flight, as a GPU's kernel runs on when its host stops waiting, so later waits wait for it
// (and end in a deadlock report if it can never finish) instead of failing for it again.
func (d *emuDevice) giveUp() error {
	op := d.expiredOp()
	if op == nil {
		return nil
	}
	err := d.expired()
	op.ctxTold = true
	return err
}

// told marks d's ops of context ctx as reported: a waiter has just returned ctx's end, so a
// later wait (another stream's, with a live context) does not fail for them again (m.mu held).
func (d *emuDevice) told(ctx context.Context) {
	for _, q := range d.queues {
		for _, op := range q.ops {
			if op.ctx == ctx {
				op.ctxTold = true
			}
		}
	}
}

// idle reports whether none of d's streams has work.
func (d *emuDevice) idle() bool {
	for _, q := range d.queues {
		if !q.empty() {
			return false
		}
	}
	return true
}

// queueOf is the queue of stream s of d (nil: the default stream).
func (d *emuDevice) queueOf(s stream) *emuQueue {
	if es, ok := s.(*emuStream); ok && es.q != nil {
		return es.q
	}
	return d.defq
}

// syncAll waits (m.mu held) until every stream of d has finished its work; it returns the
// device's sticky error.
func (d *emuDevice) syncAll(ctx context.Context, what string) error {
	if err := d.m.await(d, ctx, what, d.idle); err != nil {
		return err
	}
	return d.err
}

// ---- the scheduler ----

func (s *emuSched) loop() {
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		if s.holder >= 0 {
			s.cv.Wait()
			continue
		}
		outside, done, blocked := 0, 0, 0
		var ready []int
		var wait time.Duration // until the last rank just away is waited for no longer
		failed := m.failed() != nil
		for r, st := range s.st {
			switch st {
			case rsParked:
				if failed {
					outside++ // it returns from its collective call with the failure
				}
			case rsOutside:
				outside++
				if d := arriveWait - time.Since(s.away[r]); d > wait {
					wait = d
				}
			case rsDone:
				done++
			case rsWant:
				ready = append(ready, r)
			case rsBlocked:
				m.advance()
				if s.cond[r]() || s.werr[r] != nil || m.failed() != nil || s.dev[r] != nil && (s.dev[r].expired() != nil || s.dev[r].err != nil) {
					ready = append(ready, r)
				} else {
					blocked++
				}
			}
		}
		if done == m.n {
			if m.sys.InFlight() > 0 {
				m.sys.Abort("every rank has returned")
			}
			m.sched = nil
			return
		}
		inflight := m.sys.InFlight() > 0
		if wait > 0 {
			// Wait for the ranks running Go code to reach a scheduling point, so that the
			// choice does not depend on timing (a rank away longer is not waited for).
			s.sleep(wait)
			continue
		}
		if len(ready) > 0 {
			if inflight && s.seed != 0 && s.rng.Intn(2) == 0 {
				s.runSlice(int64(1 + s.rng.Intn(sliceSteps)))
				continue
			}
			r := s.pick(ready)
			s.st[r] = rsTurn
			s.holder = r
			s.rcv[r].Signal()
			continue
		}
		if !inflight {
			if blocked > 0 && outside == 0 {
				if w := m.stuckWaits(); w != "" {
					// Every rank is blocked, parked or returned, no kernel runs, and a
					// stream waits on memory nothing will write: a deadlock.
					for r, st := range s.st {
						if st == rsBlocked {
							s.werr[r] = fmt.Errorf("jit: rank %d waits for a stream that can never go on (deadlock): no kernel is in flight and a stream wait is not satisfied: %s", r, w)
						}
					}
					continue // the next round gives them turns to return the report with
				}
			}
			s.cv.Wait() // ranks parked in collective calls, or away: they will come back
			continue
		}
		pr := s.runSlice(sliceSteps)
		if !pr.Stalled {
			continue
		}
		if outside > 0 {
			s.sleep(arriveWait) // a rank away may still start what the kernels wait for
			continue
		}
		// Every rank is blocked, parked or returned, and the kernels cannot go on: a deadlock.
		var waiting, parked, gone []string
		for r, st := range s.st {
			switch st {
			case rsBlocked:
				waiting = append(waiting, fmt.Sprint(r))
			case rsParked:
				parked = append(parked, fmt.Sprint(r))
			case rsDone:
				gone = append(gone, fmt.Sprint(r))
			}
		}
		why := fmt.Sprintf("rank(s) %s wait for them", strings.Join(waiting, ", "))
		if len(waiting) == 0 {
			why = "no rank waits for them"
		}
		if len(parked) > 0 {
			why += fmt.Sprintf("; rank(s) %s wait in a collective NVSHMEM call", strings.Join(parked, ", "))
		}
		if len(gone) > 0 {
			why += fmt.Sprintf("; rank(s) %s have returned", strings.Join(gone, ", "))
		}
		if w := m.stuckWaits(); w != "" {
			why += "; stream waits not satisfied: " + w
		}
		_, err := m.sys.Abort(why)
		m.advance()
		for r, st := range s.st {
			if st == rsBlocked {
				s.werr[r] = fmt.Errorf("jit: rank %d waits for kernels that can never finish (deadlock): %w", r, err)
			}
		}
	}
}

// runSlice runs the kernels for about n warp-instructions (m.mu held), then lets in the
// goroutines waiting for the machine's lock (ranks arriving at a call), so that they are
// seen at the next decision.
func (s *emuSched) runSlice(n int64) emu.Progress {
	m := s.m
	pr := m.sys.Run(n)
	m.advance()
	if m.arriving.Load() > 0 {
		m.mu.Unlock()
		for i := 0; m.arriving.Load() > 0 && i < 1000; i++ {
			runtime.Gosched()
		}
		m.mu.Lock()
	}
	return pr
}

// pick chooses the rank to take the next turn among ready ones.
func (s *emuSched) pick(ready []int) int {
	if s.seed == 0 {
		return ready[0]
	}
	total := 0
	for _, r := range ready {
		total += s.speed[r]
	}
	x := s.rng.Intn(total)
	for _, r := range ready {
		if x -= s.speed[r]; x < 0 {
			return r
		}
	}
	return ready[len(ready)-1]
}

// sleep waits on the machine for at most d (m.mu held).
func (s *emuSched) sleep(d time.Duration) {
	if s.timer == nil {
		s.timer = time.AfterFunc(d, s.m.signal)
	} else {
		s.timer.Reset(d)
	}
	s.cv.Wait()
}
