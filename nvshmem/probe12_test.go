package nvshmem

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
)

// TestProbe12Misuse: misuse the builder could see and did not refuse, or refused with a
// message that named neither the operand nor the rule: collectives whose static counts
// overrun a buffer (Fcollect into fewer elements than src holds: NVSHMEM writes n_pes *
// size(src) elements; ReduceScatter of a block larger than src: it reads n_pes blocks of
// src), integer constants that do not fit the argument (a PE of 2^40 or a negative signal
// value: "Call nvshmem_float_put argument 3"), and zero Values and Ptrs (they read
// "pe is , not an integer" and "NVSHMEM has no  operations"). Each is a Build error at the
// caller's line naming the operand.
func TestProbe12Misuse(t *testing.T) {
	f32 := func(k *dsl.Kernel, name string) dsl.Ptr { return k.PtrParam(name, dsl.F32) }
	cases := []struct {
		name string
		f    func(k *dsl.Kernel)
		want string
	}{
		{"fcollect dst smaller than src", func(k *dsl.Kernel) {
			Fcollect(k, Block, TeamWorld, SpanOf(f32(k, "d"), 4), SpanOf(f32(k, "s"), 8))
		}, "Fcollect: dst holds 4 elements, src 8"},
		{"fcollect dst not whole blocks", func(k *dsl.Kernel) {
			Fcollect(k, Block, TeamWorld, SpanOf(f32(k, "d"), 12), SpanOf(f32(k, "s"), 8))
		}, "Fcollect: dst holds 12 elements, src 8"},
		{"reducescatter src smaller than dst", func(k *dsl.Kernel) {
			ReduceScatter(k, Block, TeamWorld, Sum, SpanOf(f32(k, "d"), 8), SpanOf(f32(k, "s"), 4))
		}, "ReduceScatter sum: dst holds 8 elements, src 4"},
		{"pe 2^40", func(k *dsl.Kernel) { p := f32(k, "p"); Put(k, Thread, p, p, 1<<40) }, "Put: pe 1099511627776 does not fit"},
		{"pe uint64 max", func(k *dsl.Kernel) { p := f32(k, "p"); G(k, p, ^uint64(0)) }, "G: pe 18446744073709551615 does not fit"},
		{"root 2^33", func(k *dsl.Kernel) { p := f32(k, "p"); Broadcast(k, Block, TeamWorld, p, p, 1<<33) }, "Broadcast: root 8589934592 does not fit"},
		{"team 2^35", func(k *dsl.Kernel) { Barrier(k, Block, 1<<35) }, "team 34359738368 does not fit"},
		{"negative signal value", func(k *dsl.Kernel) { Signal(k, k.PtrParam("s", dsl.U64), -1, SignalSet, 0) }, "Signal: value -1 is negative"},
		{"zero pe Value", func(k *dsl.Kernel) { p := f32(k, "p"); Put(k, Thread, p, p, dsl.Value{}) }, "Put: pe is the zero dsl.Value"},
		{"zero signal value", func(k *dsl.Kernel) { Signal(k, k.PtrParam("s", dsl.U64), dsl.Value{}, SignalSet, 0) }, "Signal: value is the zero dsl.Value"},
		{"zero dst Ptr", func(k *dsl.Kernel) { Put(k, Thread, dsl.Ptr{}, f32(k, "p"), 0) }, "Put: dst is the zero dsl.Ptr"},
		{"zero src Tensor", func(k *dsl.Kernel) { Get(k, Warp, f32(k, "p"), dsl.Tensor{}, 0) }, "Get: src is the zero dsl.Tensor"},
		{"zero count Value", func(k *dsl.Kernel) { p := f32(k, "p"); Put(k, Thread, SpanOf(p, dsl.Value{}), p, 0) }, "Put: dst count is the zero dsl.Value"},
	}
	line := regexp.MustCompile(`nvshmem/probe12_test\.go:\d+: `)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := dsl.New("misuse")
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panic: %v", r)
					}
				}()
				c.f(k)
				_, err = k.Build()
			}()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v; want one saying %q", err, c.want)
			}
			if !line.MatchString(err.Error()) {
				t.Errorf("error %q is not at a line of this file", err)
			}
		})
	}
	// What fits still builds: a dst of n_pes blocks, a src of several blocks, PE and signal
	// values at their limits.
	k := dsl.New("fits")
	d, s := f32(k, "d"), f32(k, "s")
	Fcollect(k, Block, TeamWorld, SpanOf(d, 32), SpanOf(s, 8))
	ReduceScatter(k, Block, TeamWorld, Sum, SpanOf(d, 4), SpanOf(s, 16))
	Put(k, Thread, d, s, 1<<31-1)
	Signal(k, k.PtrParam("sig", dsl.U64), ^uint64(0), SignalSet, int32(-1<<31))
	if _, err := k.Build(); err != nil {
		t.Fatal(err)
	}
}
