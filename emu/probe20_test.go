package emu

import (
	"math"
	"strings"
	"testing"
)

// spinKernel waits until the word at a is not zero.
const spinKernel = `
.visible .entry k(.param .u64 a)
{
	.reg .u64 %rd<2>;
	.reg .u32 %r<2>;
	.reg .pred %p<2>;
	ld.param.u64 %rd0, [a];
L:
	ld.volatile.global.u32 %r0, [%rd0];
	setp.eq.u32 %p0, %r0, 0;
	@%p0 bra L;
	ret;
}`

// TestProbe20ClockEnd: an action scheduled at math.MaxInt64 moved the clock there, and the
// steps of the next launch wrapped it to a negative time (Now -9223372036854775805: time
// ran backwards). At takes a time past MaxTime as MaxTime (an action scheduled after the
// clock passed it runs at once). Probe 20.
func TestProbe20ClockEnd(t *testing.T) {
	m := asm(t, spinKernel)
	s := newSys(t, 1)
	a := mustMalloc(t, s, 0, 4)
	set := func(d *Delivery) error { return d.Store(a, []byte{1, 0, 0, 0}) }
	s.At(math.MaxInt64, set) // the launch waits for it: the clock jumps to its time
	must(t, launch1(s, m, "k", 1, 1, a))
	t1 := s.Now()
	if t1 < 1<<62 { // MaxTime
		t.Fatalf("after an action at math.MaxInt64 and a launch, Now is %d; want at least 2^62 (MaxTime)", t1)
	}
	must(t, s.Memset(a, 0, 4))
	s.At(t1+1000, set) // past MaxTime: runs at once
	must(t, launch1(s, m, "k", 1, 1, a))
	if t2 := s.Now(); t2 < t1 {
		t.Errorf("a launch after time %d ended at %d: the clock ran backwards", t1, t2)
	}
}

// TestProbe20Reentered: an Action that called Abort while Run ran the kernels ended them,
// and the Run around it then reported the aborted kernel finished with no error (it had
// never completed); a Launch or RunScheduled from an Action during a launch ran a nested
// scheduler whose clock ran backwards. Such calls are errors now (Run does nothing).
// Probe 20.
func TestProbe20Reentered(t *testing.T) {
	m := asm(t, spinKernel)
	const want = "while the System runs kernels (from an Action or an extern function)"
	for _, what := range []string{"Abort", "Cancel", "RunScheduled", "Launch", "Start"} {
		s := newSys(t, 1)
		a := mustMalloc(t, s, 0, 4)
		b := mustMalloc(t, s, 0, 4)
		must(t, s.Write(b, []byte{1, 0, 0, 0}))
		var r *Running
		var inner error
		s.At(100, func(d *Delivery) error {
			switch what {
			case "Abort":
				_, inner = s.Abort("from an action")
			case "Cancel":
				inner = s.Cancel(r, "from an action")
			case "RunScheduled":
				inner = s.RunScheduled()
			case "Launch":
				inner = launch1(s, m, "k", 1, 1, b)
			case "Start":
				_, inner = s.Start(Launch{Module: m, Entry: "k", Grid: D1(1), Block: D1(1), Args: []any{b}})
			}
			if pr := s.Run(1000); pr.InFlight != 0 || len(pr.Finished) != 0 {
				t.Errorf("%s: Run from an action: %+v; want nothing done", what, pr)
			}
			return d.Store(a, []byte{1, 0, 0, 0}) // the kernel completes
		})
		var err error
		r, err = s.Start(Launch{Module: m, Entry: "k", Grid: D1(1), Block: D1(1), Args: []any{a}})
		must(t, err)
		for i := 0; i < 100 && s.InFlight() > 0; i++ {
			s.Run(1 << 20)
		}
		if inner == nil || !strings.Contains(inner.Error(), "System."+what+" "+want) {
			t.Errorf("System.%s from an action while Run runs kernels: %v; want an error holding %q", what, inner, want)
		}
		if !r.Done() || r.Err() != nil || s.InFlight() != 0 {
			t.Errorf("%s: the kernel: done %v, error %v, %d in flight; want it completed", what, r.Done(), r.Err(), s.InFlight())
		}
	}
}

// TestProbe20SetNodesInFlight: SetNodes while a kernel was in flight moved the GPU whose
// memory it read to another node, and the kernel's legal peer load then faulted as an
// access to another node's memory. The topology is fixed while kernels run. Probe 20.
func TestProbe20SetNodesInFlight(t *testing.T) {
	m := asm(t, spinKernel)
	s := newSys(t, 2)
	sym, err := s.MallocSymmetric(4)
	must(t, err)
	r, err := s.Start(Launch{Module: m, Entry: "k", GPUs: []int{0}, Grid: D1(1), Block: D1(1), Args: []any{sym.On(1)}}) // GPU 1's copy
	must(t, err)
	s.Run(1000)
	if err := s.SetNodes(2); err == nil || !strings.Contains(err.Error(), "the topology is fixed while kernels run") {
		t.Errorf("SetNodes with a kernel in flight: %v; want an error", err)
	}
	must(t, s.Write(sym.On(1), []byte{1, 0, 0, 0}))
	for i := 0; i < 100 && s.InFlight() > 0; i++ {
		s.Run(1 << 20)
	}
	if !r.Done() || r.Err() != nil {
		t.Errorf("the kernel: done %v, %v; want it completed", r.Done(), r.Err())
	}
	if err := s.SetNodes(2); err != nil { // between kernels it may
		t.Errorf("SetNodes with no kernel in flight: %v", err)
	}
}

// TestProbe20EmptyAccessAtEnd: an empty Delivery.Store right after the end of an allocation
// divided by zero describing the miss (the element size of "index 1 of an array" was the
// length, 0), a panic that RunScheduled did not recover (during a launch it was an
// "emulator bug"; nvshmem/shmemu's puts of 0 elements could reach it); an empty Load past the
// end was an error where System.Read of nothing is not. An empty access touches nothing.
// Probe 20.
func TestProbe20EmptyAccessAtEnd(t *testing.T) {
	s := newSys(t, 1)
	a := mustMalloc(t, s, 0, 16)
	s.At(1, func(d *Delivery) error { return d.Store(a+16, nil) })
	s.At(2, func(d *Delivery) error { return d.Load(a+80, nil) })
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("RunScheduled panicked: %v", p)
			}
		}()
		err = s.RunScheduled()
	}()
	if err != nil {
		t.Errorf("empty Delivery accesses past an allocation's end: %v; want none (they touch nothing)", err)
	}
	if err := s.Write(a+16, nil); err != nil {
		t.Errorf("System.Write of nothing: %v", err)
	}
}
