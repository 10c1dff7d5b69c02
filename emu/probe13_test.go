package emu

import (
	"fmt"
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

// TestProbe13IntArgRange: a Go int argument must be a value of its parameter's type, as
// docs/emu.md says ("accepted when it fits the parameter"): a negative int for a .u64 or
// .u32 parameter, or 2^31 for a .s32, is refused naming the argument (the check was of the
// width only: -1 reached a .u64 address as 0xffffffffffffffff and a .u32 count as
// 4294967295); bit types take either range; probe 13.
func TestProbe13IntArgRange(t *testing.T) {
	s := newSys(t, 1)
	m := asm(t, `
.visible .entry k(.param .u64 a, .param .u32 n, .param .s32 d, .param .b32 b, .param .u16 h)
{
	.reg .b32 %r<4>;
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [a];
	ld.param.u32 %r1, [n];
	ld.param.s32 %r2, [d];
	add.s32 %r1, %r1, %r2;
	ld.param.b32 %r3, [b];
	add.s32 %r1, %r1, %r3;
	st.global.u32 [%rd1], %r1;
	ret;
}`)
	a := mustMalloc(t, s, 0, 4)
	run := func(args ...any) error {
		return s.Launch(Launch{Module: m, Entry: "k", Grid: D1(1), Block: D1(1), Args: args})
	}
	for _, c := range []struct {
		args []any
		want string
	}{
		{[]any{-1, 1, 1, 1, 1}, "argument 1 (a): -1 does not fit"},
		{[]any{a, -1, 1, 1, 1}, "argument 2 (n): -1 does not fit the 4-byte .u32"},
		{[]any{a, 1 << 32, 1, 1, 1}, "argument 2 (n): 4294967296 does not fit"},
		{[]any{a, 1, 1 << 31, 1, 1}, "argument 3 (d): 2147483648 does not fit the 4-byte .s32"},
		{[]any{a, 1, -(1 << 31) - 1, 1, 1}, "argument 3 (d)"},
		{[]any{a, 1, 1, 1 << 32, 1}, "argument 4 (b)"},
		{[]any{a, 1, 1, -(1 << 31) - 1, 1}, "argument 4 (b)"},
		{[]any{a, 1, 1, 1, -1}, "argument 5 (h): -1 does not fit the 2-byte .u16"},
		{[]any{a, 1, 1, 1, 1 << 16}, "argument 5 (h)"},
	} {
		err := run(c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("args %v: %v; want an error holding %q", c.args, err, c.want)
		}
	}
	// In range (a .b32 takes either sign's range), the kernel runs: 4294967295 + (-3) + 2^31 wraps.
	must(t, run(int(a), 1<<32-1, -3, 1<<31, 1<<16-1))
	if got, want := readU32(t, s, a, 1)[0], uint32((1<<32-1-3+1<<31)%(1<<32)); got != want {
		t.Errorf("stored %d, want %d", got, want)
	}
	must(t, run(a, 0, -(1<<31), -1, 0))
}

// TestProbe13ZeroSystem: a zero System (not made by New) refuses MallocSymmetric naming
// it and takes RegisterExtern (both panicked: assignment to entry in nil map; probe 13).
func TestProbe13ZeroSystem(t *testing.T) {
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v", r)
		}
	}()
	s := &System{}
	if _, err := s.MallocSymmetric(64); err == nil || !strings.Contains(err.Error(), "no GPUs") {
		t.Errorf("MallocSymmetric on a zero System: %v; want an error naming it", err)
	}
	s.RegisterExtern("f", func(*ExternCall) error { return nil })
	if _, err := s.Malloc(0, 8); err == nil {
		t.Error("Malloc on a zero System made memory")
	}
}

// TestProbe13LongNamesBounded: a kernel of 300 parameters with 1 KB names and a 100 KB name
// gives short launch errors: a wrong argument count, a missing entry and a fault quote
// excerpts of the name, the parameter list and the kernel list. Before: each quoted them
// whole (hundreds of KB; probe 13).
func TestProbe13LongNamesBounded(t *testing.T) {
	name := "k" + strings.Repeat("x", 100000)
	var params []string
	for i := 0; i < 300; i++ {
		params = append(params, fmt.Sprintf(".param .u32 p%s%d", strings.Repeat("y", 1000), i))
	}
	m := asm(t, `
.visible .entry `+name+`(`+strings.Join(params, ", ")+`)
{
	.reg .b64 %rd<2>;
	mov.u64 %rd1, 0;
	st.global.u32 [%rd1], 7;
	ret;
}`)
	s := newSys(t, 1)
	args := make([]any, 300)
	for i := range args {
		args[i] = uint32(1)
	}
	for what, k := range map[string]Launch{
		"one argument of 300": {Module: m, Entry: name, Args: []any{uint32(1)}},
		"a missing entry":     {Module: m, Entry: name + "q", Args: args},
		"a fault":             {Module: m, Entry: name, Args: args},
	} {
		k.Grid, k.Block = D1(1), D1(1)
		err := s.Launch(k)
		if err != nil && !strings.Contains(err.Error(), map[string]string{"one argument of 300": "takes 300 arguments", "a missing entry": "has no kernel", "a fault": "null"}[what]) {
			t.Errorf("%s: %.300v", what, err)
		}
		if err == nil || len(err.Error()) > 2000 {
			n := 0
			if err != nil {
				n = len(err.Error())
			}
			t.Errorf("%s: %d bytes: %.300v", what, n, err)
		}
	}
}
