package emu

import (
	"math"
	"strings"
	"testing"
)

// TestProbe13NilModuleRunning: System.Load(nil) is an error naming the nil module (it
// panicked: nil pointer in ptx.Verify), and a nil *Running is done, with an Err saying it is
// nil and zero Stats (Done, Err and Stats panicked); probe 13.
func TestProbe13NilModuleRunning(t *testing.T) {
	s := newSys(t, 1)
	noPanic := func(what string, call func()) {
		t.Helper()
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("%s panicked: %v", what, r)
			}
		}()
		call()
	}
	noPanic("Load(nil)", func() {
		err := s.Load(nil)
		if err == nil || !strings.Contains(err.Error(), "nil *ptx.Module") {
			t.Errorf("Load(nil) = %v; want an error naming the nil module", err)
		}
	})
	noPanic("nil *Running", func() {
		var r *Running
		if !r.Done() {
			t.Error("a nil *Running is not done: a wait for it would never end")
		}
		if err := r.Err(); err == nil || !strings.Contains(err.Error(), "nil *Running") {
			t.Errorf("nil *Running's Err = %v; want an error saying it is nil (a nil error reads as a completed kernel)", err)
		}
		if st := r.Stats(); st != (Stats{}) {
			t.Errorf("nil *Running's Stats = %+v", st)
		}
	})
	// A launch of a real module after the nil Load still runs.
	m := asm(t, `
.visible .entry k(.param .u64 a)
{
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [a];
	st.global.u32 [%rd1], 7;
	ret;
}`)
	a := mustMalloc(t, s, 0, 4)
	must(t, launch1(s, m, "k", 1, 1, a))
	if got := readU32(t, s, a, 1)[0]; got != 7 {
		t.Errorf("stored %d, want 7", got)
	}
}

// TestProbe13SetLimitsNegative: SetLimits refuses a negative MaxMemory or MaxThreads naming
// the field, and keeps the limits it had (a negative value became the default silently: a
// caller lowering the cap with a wrapped or mistyped value ran with 64 GiB); zero still
// means the default; probe 13.
func TestProbe13SetLimitsNegative(t *testing.T) {
	s := newSys(t, 1)
	must(t, s.SetLimits(Limits{MaxMemory: 1 << 20, MaxThreads: 1 << 10}))
	for _, c := range []struct {
		l     Limits
		field string
	}{
		{Limits{MaxMemory: -1}, "Limits.MaxMemory -1"},
		{Limits{MaxMemory: math.MinInt64, MaxThreads: 5}, "Limits.MaxMemory"},
		{Limits{MaxMemory: 1 << 30, MaxThreads: -(1 << 40)}, "Limits.MaxThreads"},
	} {
		err := s.SetLimits(c.l)
		if err == nil || !strings.Contains(err.Error(), c.field) || !strings.Contains(err.Error(), "negative") {
			t.Errorf("SetLimits(%+v) = %v; want an error naming %s as negative", c.l, err, c.field)
		}
		if got := s.Limits(); got != (Limits{MaxMemory: 1 << 20, MaxThreads: 1 << 10}) {
			t.Errorf("after the refused SetLimits(%+v) the limits are %+v; want them unchanged", c.l, got)
		}
	}
	must(t, s.SetLimits(Limits{MaxThreads: 64}))
	if got := s.Limits(); got != (Limits{MaxMemory: DefaultLimits.MaxMemory, MaxThreads: 64}) {
		t.Errorf("SetLimits with MaxMemory 0: %+v; want the default MaxMemory", got)
	}
}
