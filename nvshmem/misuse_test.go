package nvshmem

import (
	"regexp"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
)

// TestMisuse checks that misuse is a build error recorded at the caller's line, with a
// message that says what is wrong.
func TestMisuse(t *testing.T) {
	cases := []struct {
		name string
		f    func(k *dsl.Kernel)
		want string
	}{
		{"dtype mismatch", func(k *dsl.Kernel) {
			Put(k, Block, SpanOf(k.PtrParam("d", dsl.F32), 4), SpanOf(k.PtrParam("s", dsl.F16), 4), 1)
		}, "dst holds f32, src holds f16; the dtypes must match"},
		{"signal not u64", func(k *dsl.Kernel) {
			p := k.PtrParam("p", dsl.F32)
			PutSignalNBI(k, Warp, SpanOf(p, 4), SpanOf(p, 4), k.PtrParam("sig", dsl.U32), 1, SignalSet, 0)
		}, "a signal is one uint64, got u32"},
		{"signal of two words", func(k *dsl.Kernel) {
			Signal(k, SpanOf(k.PtrParam("sig", dsl.U64), 2), 1, SignalAdd, 0)
		}, "a signal is one uint64, got 2 elements"},
		{"unknown signal op", func(k *dsl.Kernel) {
			Signal(k, k.PtrParam("sig", dsl.U64), 1, SignalOp(3), 0)
		}, "unknown signal operation 3"},
		{"AMO type", func(k *dsl.Kernel) {
			AtomicFetchAdd(k, k.PtrParam("p", dsl.F32), 1.0, 0)
		}, "NVSHMEM defines it for int32, int64 (NVSHMEM's long), uint32, uint64, not f32"},
		{"AMO operand missing", func(k *dsl.Kernel) {
			Atomic(k, AtomicAddOp, k.PtrParam("p", dsl.I32), nil, nil, 0)
		}, "needs a value"},
		{"AMO value type", func(k *dsl.Kernel) {
			AtomicSet(k, k.PtrParam("p", dsl.I64), k.Param("v", dsl.I32), 0)
		}, "value is s32, the destination holds s64"},
		{"half p", func(k *dsl.Kernel) { P(k, k.PtrParam("p", dsl.F16), 1.0, 0) }, "2-byte aggregate"},
		{"bool reduce", func(k *dsl.Kernel) {
			p := k.PtrParam("p", dsl.F32)
			Reduce(k, Block, TeamWorld, Xor, SpanOf(p, 4), SpanOf(p, 4))
		}, "NVSHMEM has no xor reduction of f32"},
		{"scope", func(k *dsl.Kernel) { BarrierAll(k, Scope(7)) }, "unknown scope Scope(7)"},
		{"fragment", func(k *dsl.Kernel) {
			p := k.PtrParam("p", dsl.F32)
			tt := k.MakeTensor(p, layout.Must(layout.MakeLayout(layout.Int(4))))
			Put(k, Thread, tt, k.Fragment(dsl.F32, tt), 0)
		}, "src is a register fragment"},
		{"shared memory", func(k *dsl.Kernel) {
			Put(k, Thread, SpanOf(k.PtrParam("p", dsl.F32), 4), SpanOf(k.SharedArray(dsl.F32, 4), 4), 0)
		}, "src points into shared memory"},
		{"not a buffer", func(k *dsl.Kernel) { Get(k, Thread, 3, 4, 0) }, "dst is int; want a dsl.Tensor"},
		{"pe type", func(k *dsl.Kernel) {
			p := k.PtrParam("p", dsl.F32)
			Put(k, Thread, p, p, 1.5)
		}, "pe is float64"},
		{"negative count", func(k *dsl.Kernel) {
			p := k.PtrParam("p", dsl.F32)
			Put(k, Thread, SpanOf(p, -1), p, 0)
		}, "dst count -1 is negative"},
	}
	line := regexp.MustCompile(`nvshmem/misuse_test\.go:\d+: `)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := dsl.New("misuse")
			c.f(k)
			_, err := k.Build()
			if err == nil {
				t.Fatal("built")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
			if !line.MatchString(err.Error()) {
				t.Errorf("error %q is not at a line of this file", err)
			}
		})
	}
}
