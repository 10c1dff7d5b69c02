package emu

import (
	"fmt"
	"testing"
	"time"
)

// TestProbe11Options: launch options out of their range are refused by Launch and Start
// naming the field, at once; the largest Quantum still lets the step budget end a spinning
// kernel. Before: Quantum 2^40 gave a spinning warp a turn of 2^40 instructions, so neither
// its StepBudget of 1000 nor (through jit) its launch's context could end it (no answer in
// 20 s, and Device.Close blocked behind it); negative values were taken as the defaults.
func TestProbe11Options(t *testing.T) {
	m := asm(t, `
.visible .entry spin(.param .u64 a)
{
	.reg .u32 %r<2>;
	mov.u32 %r0, 0;
L:
	add.u32 %r0, %r0, 1;
	bra.uni L;
}`)
	run := func(o Options, start bool) error {
		s := newSys(t, 1)
		a := mustMalloc(t, s, 0, 64)
		done := make(chan error, 1)
		go func() {
			defer func() {
				if p := recover(); p != nil {
					done <- fmt.Errorf("panic: %v", p)
				}
			}()
			l := Launch{Module: m, Entry: "spin", Grid: D1(1), Block: D1(64), Args: []any{a}, Options: o}
			if !start {
				done <- s.Launch(l)
				return
			}
			_, err := s.Start(l)
			done <- err
		}()
		select {
		case err := <-done:
			return err
		case <-time.After(60 * time.Second):
			t.Fatalf("%+v: no answer in 60 s", o)
			return nil
		}
	}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Quantum: 1 << 40, StepBudget: 1000}, "Options.Quantum 1099511627776 is outside 0..65536"},
		{Options{Quantum: MaxQuantum + 1, Seed: 3}, "Options.Quantum 65537"},
		{Options{Quantum: -1}, "Options.Quantum -1"},
		{Options{StepBudget: -5}, "Options.StepBudget -5 is negative"},
		{Options{MaxDelay: -1, Weak: true}, "Options.MaxDelay -1 is negative"},
	} {
		for _, start := range []bool{false, true} {
			wantErr(t, run(c.o, start), KindLaunch, c.want)
		}
	}
	// The largest quantum: the budget still ends the spin, on either schedule.
	for _, seed := range []int64{0, 5} {
		wantErr(t, run(Options{Quantum: MaxQuantum, StepBudget: 1000, Seed: seed}, false), KindNoProgress, "no progress after 1000 steps", "spinning")
	}
}
