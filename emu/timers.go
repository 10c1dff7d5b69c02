package emu

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"time"
)

// Logical time and scheduled actions: how the emulator delivers data late (NVSHMEM's
// transfers between nodes).
//
// The emulator's clock counts steps: each warp instruction any GPU issues advances it by one,
// and it carries over from launch to launch (the host's own work takes no time). When every
// live warp is blocked (in an extern call that waits, at a barrier...) and an action is
// scheduled, the clock jumps to that action's time instead of reporting a deadlock: waiting
// for data in flight is not a deadlock. A step stands for StepTime of a GPU's time when
// converting a Network's latency and bandwidth. Actions due at one time run in the order
// they were scheduled.

// StepTime is the time one step of the emulator's logical clock stands for.
const StepTime = time.Nanosecond

// Network is how data moves between the nodes of a System (SetNodes): a transfer of n bytes
// between two GPUs of different nodes occupies their link for n/BytesPerSecond and arrives
// Latency after that. The emulator only records the Network; extern functions that move
// data between nodes (NVSHMEM's emulation) use it with System.At.
type Network struct {
	Latency        time.Duration
	BytesPerSecond float64
}

// DefaultNetwork is the Network of a System until SetNetwork: 2 us and 50 GB/s (a 400 Gb/s
// NIC), so that transfers between nodes arrive a few scheduling rounds late.
var DefaultNetwork = Network{Latency: 2 * time.Microsecond, BytesPerSecond: 50e9}

// Steps returns the logical time a transfer of n bytes occupies the link (n/BytesPerSecond)
// and its latency, in steps (at least 1 each when positive).
// A time past the clock's range is math.MaxInt64 (never a wrapped, negative one).
func (n Network) Steps(bytes int) (busy, latency int64) {
	latency = int64(n.Latency / StepTime)
	if n.BytesPerSecond > 0 && bytes > 0 {
		f := float64(bytes) / n.BytesPerSecond * float64(time.Second/StepTime)
		if f >= math.MaxInt64 || f != f {
			busy = math.MaxInt64
		} else {
			busy = max(int64(f), 1)
		}
	}
	return busy, max(latency, 0)
}

// Check returns an error naming the field and its range when n is outside SetNetwork's bounds.
func (n Network) Check() error {
	if n.Latency < 0 || n.Latency > MaxLatency {
		return fmt.Errorf("emu: network latency %v: want 0 to %v", n.Latency, MaxLatency)
	}
	if n.BytesPerSecond != n.BytesPerSecond || n.BytesPerSecond < 0 || n.BytesPerSecond > 0 && n.BytesPerSecond < MinBytesPerSecond {
		return fmt.Errorf("emu: network bandwidth %g bytes/s: want 0 (unlimited) or at least %g", n.BytesPerSecond, MinBytesPerSecond)
	}
	return nil
}

func (n Network) String() string {
	return fmt.Sprintf("latency %v, %.3g bytes/s", n.Latency, n.BytesPerSecond)
}

// Bounds of a Network: a latency of at most MaxLatency, and a bandwidth of 0 (unlimited) or
// at least MinBytesPerSecond, so that a run's logical clock stays far from overflowing.
const (
	MaxLatency        = time.Hour
	MinBytesPerSecond = 1.0
)

// SetNetwork sets how data moves between nodes. The latency is 0 to MaxLatency; a
// BytesPerSecond of 0 means unlimited bandwidth, else it is at least MinBytesPerSecond.
func (s *System) SetNetwork(n Network) error {
	if s == nil {
		return errNilSystem("SetNetwork")
	}
	if err := n.Check(); err != nil {
		return err
	}
	s.net = &n
	return nil
}

// Network returns how data moves between nodes (DefaultNetwork unless SetNetwork, and for a
// nil *System).
func (s *System) Network() Network {
	if s == nil || s.net == nil {
		return DefaultNetwork
	}
	return *s.net
}

// Action is a scheduled action (System.At): it runs once, when the clock reaches its time,
// and moves data with d. An error stops the running launch (or is returned by
// RunScheduled). While the System runs kernels (Launch, Run) an Action, like an extern
// function, must not call Launch, Start, RunScheduled, Cancel or Abort (they return an
// error) or Run (it does nothing).
type Action func(d *Delivery) error

type timer struct {
	due int64
	seq uint64
	f   Action
}

type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	return h[i].due < h[j].due || h[i].due == h[j].due && h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(*timer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return t
}

// Now returns the logical time (steps since the System was made; 0 for a nil *System).
func (s *System) Now() int64 {
	if s == nil {
		return 0
	}
	if s.cur != nil {
		return s.cur.now()
	}
	return s.clock
}

func (l *launch) now() int64 { return l.t0 + l.steps + l.skip }

// MaxActions bounds the actions that scheduled actions schedule while RunScheduled runs, and
// while a launch runs those due at one logical time: an action that schedules another
// (itself) without end is an error after that many more, not a hang. The actions already
// scheduled when it starts all run, however many.
const MaxActions = 1 << 20

// MaxTime is the last logical time an action may be scheduled at (At takes a later time as
// MaxTime): the steps run after it, 2^62 more, cannot wrap the clock past math.MaxInt64 to
// a negative time (an action at math.MaxInt64 left Now negative after the next launch).
const MaxTime = 1 << 62

// At schedules f to run at logical time t (now, if t is in the past; MaxTime, if t is
// later): during a launch when the clock reaches t, else at the next launch that runs that
// long, or RunScheduled. A nil f only wakes the clock at t (for an extern call that waits
// until then). On a nil *System it does nothing (RunScheduled and every launch of it are
// errors).
func (s *System) At(t int64, f Action) {
	if s == nil {
		return
	}
	s.tseq++
	heap.Push(&s.timers, &timer{due: min(t, MaxTime), seq: s.tseq, f: f})
}

// Scheduled returns the number of actions not run yet (0 for a nil *System).
func (s *System) Scheduled() int {
	if s == nil {
		return 0
	}
	return len(s.timers)
}

// RunScheduled runs every scheduled action now, in time order, from the host (as if it
// waited for them): the clock moves to the last one's time. It returns the first error.
func (s *System) RunScheduled() error {
	if s == nil {
		return errNilSystem("RunScheduled")
	}
	if err := s.reentered("RunScheduled"); err != nil {
		return err
	}
	s.hostSync()
	var errs []error
	limit := len(s.timers) + MaxActions // those scheduled now, and MaxActions they schedule
	for ran := 0; len(s.timers) > 0; ran++ {
		if ran == limit {
			errs = append(errs, fmt.Errorf("emu: RunScheduled: %d actions ran and %d more are scheduled: an action that schedules another without end (the rest stay scheduled)", ran, len(s.timers)))
			break
		}
		t := heap.Pop(&s.timers).(*timer)
		s.clock = max(s.clock, t.due)
		if t.f != nil {
			if err := t.f(&Delivery{s: s}); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// CancelScheduled drops every scheduled action (after a failed launch); on a nil *System it
// does nothing.
func (s *System) CancelScheduled() {
	if s != nil {
		s.timers = nil
	}
}

// runDue runs the actions due by now; an error faults the launch.
func (l *launch) runDue() {
	s := l.sys
	limit := len(s.timers) + MaxActions // those scheduled now, and MaxActions they schedule
	for ran := 0; len(s.timers) > 0 && s.timers[0].due <= l.now() && l.err == nil; ran++ {
		if ran == limit {
			l.err = &Error{Kind: KindExtern, Kernel: l.fn.f.Name, Msg: fmt.Sprintf("scheduled delivery: %d actions ran at time %d and more are due then: an action that schedules another at the same time without end", ran, l.now())}
			return
		}
		t := heap.Pop(&s.timers).(*timer)
		if t.f == nil {
			continue
		}
		if err := t.f(&Delivery{s: s, l: l}); err != nil {
			l.err = &Error{Kind: KindExtern, Kernel: l.fn.f.Name, Msg: "scheduled delivery: " + err.Error()}
		}
	}
}

// skipToNext moves the clock to the next scheduled action's time and runs what is due; it
// reports whether there was one (the launch was waiting for it, not deadlocked).
func (l *launch) skipToNext() bool {
	s := l.sys
	if len(s.timers) == 0 {
		return false
	}
	if d := s.timers[0].due - l.now(); d > 0 {
		l.skip += d
	}
	l.runDue()
	l.progressed()
	return true
}

// Delivery moves the data of a scheduled action: strong (immediately visible) accesses of
// global memory of any GPU, as ExternCall's are.
type Delivery struct {
	s *System
	l *launch // nil outside a launch
}

// errDelivery is the error of a Delivery method on one the emulator did not make (nil or a
// zero Delivery{}), or nil.
func (d *Delivery) errDelivery(op string) error {
	if d == nil || d.s == nil {
		return fmt.Errorf("emu: Delivery.%s on a nil or zero Delivery (use the one the emulator passes the Action)", op)
	}
	return nil
}

// Now returns the logical time of the delivery (0 for a nil or zero Delivery).
func (d *Delivery) Now() int64 {
	if d.errDelivery("Now") != nil {
		return 0
	}
	return d.s.Now()
}

// Load reads len(p) bytes of global memory at addr (none, at any address, for an empty p,
// as System.Read).
func (d *Delivery) Load(addr uint64, p []byte) error {
	if err := d.errDelivery("Load"); err != nil {
		return err
	}
	if len(p) == 0 {
		return nil
	}
	b, f := d.s.globalSpan(addr, len(p))
	if f != nil {
		return errors.New(f.msg)
	}
	copy(p, b)
	return nil
}

// Store writes p to global memory at addr (nothing, at any address, for an empty p, as
// System.Write: an empty store right after an allocation's end divided by zero describing
// the miss, a panic RunScheduled did not recover).
func (d *Delivery) Store(addr uint64, p []byte) error {
	if err := d.errDelivery("Store"); err != nil {
		return err
	}
	if len(p) == 0 {
		return nil
	}
	b, f := d.s.globalSpan(addr, len(p))
	if f != nil {
		return errors.New(f.msg)
	}
	copy(b, p)
	if l := d.l; l != nil {
		if l.weak && l.recordedSpan(addr, len(p)) {
			l.overwrite(addr, len(p), false)
		}
		l.progressed()
	}
	return nil
}

// Atomic applies f to the size-byte (4 or 8) value at addr and returns the old value. A nil
// f is an error.
func (d *Delivery) Atomic(addr uint64, size int, f func(old uint64) uint64) (uint64, error) {
	if err := d.errDelivery("Atomic"); err != nil {
		return 0, err
	}
	if f == nil {
		return 0, errors.New("emu: Delivery.Atomic: the update function f is nil")
	}
	if size != 4 && size != 8 {
		return 0, fmt.Errorf("Atomic: size %d (want 4 or 8)", size)
	}
	b, fl := d.s.globalSpan(addr, size)
	if fl != nil {
		return 0, errors.New(fl.msg)
	}
	old := getN(b, size)
	if nv := f(old); nv != old {
		putN(b, size, nv)
		if d.l != nil {
			d.l.progressed()
		}
	}
	return old, nil
}
