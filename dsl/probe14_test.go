package dsl_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe14WildCounts: LoadVec and MultimemLoadReduce of a negative or huge element count
// record a Build error and return a few poisoned values; they allocated the count first (a
// negative one panicked: makeslice; 2^40 died out of memory). SharedArray and LocalArray of
// a Type out of range record an error (integer divide by zero); probe 14.
func TestProbe14WildCounts(t *testing.T) {
	try := func(what string, f func(k *dsl.Kernel) int) {
		t.Helper()
		k := dsl.New("k", dsl.WithTarget(ptx.SM90))
		n := -1
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("%s panicked: %v", what, r)
				}
			}()
			n = f(k)
		}()
		if n > 64 {
			t.Errorf("%s returned %d values", what, n)
		}
		if _, err := k.Build(); err == nil {
			t.Errorf("%s: Build passed", what)
		}
	}
	for _, n := range []int{-1, 3, 1 << 40} {
		try("LoadVec", func(k *dsl.Kernel) int { return len(k.LoadVec(k.PtrParam("p", dsl.F32), n)) })
		try("MultimemLoadReduce", func(k *dsl.Kernel) int {
			return len(k.MultimemLoadReduce(k.PtrParam("p", dsl.F32), dsl.Sum, n))
		})
	}
	try("SharedArray of type 255", func(k *dsl.Kernel) int { k.SharedArray(ptx.Type(255), 64); return 0 })
	try("LocalArray of type 255", func(k *dsl.Kernel) int { k.LocalArray(ptx.Type(255), 64); return 0 })
	k := dsl.New("k", dsl.WithTarget(ptx.SM90))
	if v := k.LoadVec(k.PtrParam("p", dsl.F32), 4); len(v) != 4 {
		t.Errorf("LoadVec of 4: %d values", len(v))
	}
	if _, err := k.Build(); err != nil {
		t.Error(err)
	}
}

// TestProbe14LongNamesBounded: errors about a 100 KB kernel, extern, parameter or barrier
// name quote an excerpt (they quoted it whole, some twice); nil *Error and *Func answer;
// probe 14.
func TestProbe14LongNamesBounded(t *testing.T) {
	long := "n" + strings.Repeat("x", 100000)
	k := dsl.New(long, dsl.WithTarget(ptx.SM90))
	k.Param(long+"-", dsl.U32)
	k.Param("p", dsl.U32)
	k.Param("p", dsl.U32)
	k.Extern(long, nil, dsl.U32)
	k.Extern(long, nil, dsl.U64)
	k.NamedBarrierFor(long, 7)
	_, err := k.Build()
	if err == nil {
		t.Fatal("Build passed")
	}
	_, err2 := k.Build()
	for i, e := range []error{err, err2} {
		if n := len(e.Error()); n > 4000 {
			t.Errorf("Build %d: a %d-byte error: %.300s", i+1, n, e)
		}
	}
	var e *dsl.Error
	var f *dsl.Func
	if !strings.Contains(e.Error(), "nil *Error") || f.Name() != "" {
		t.Error("nil *Error or *Func")
	}
}

// TestProbe14PtrOfNoSize: PtrFrom, a PeerTable parameter and DynamicShared of a Type of no
// size (out of range, .pred) record an error and give a pointer of bytes, so that the copies
// and vector widths over it do not divide by zero (they did: dsl's copy of a peer's data in
// HierAllGather and MoECombine); Operand and GMMAMajor out of range print as numbers (an
// index panic); probe 14.
func TestProbe14PtrOfNoSize(t *testing.T) {
	type args struct {
		Peers dsl.PeerTable
	}
	for _, dt := range []dsl.Type{ptx.Type(255), ptx.Pred} {
		k := dsl.New("k", dsl.WithTarget(ptx.SM90))
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("%s: panic: %v", dt, r)
				}
			}()
			a := dsl.Params[args](k, dt)
			p := a.Peers.Peer(0)
			k.Store(p, k.Load(p))
			q := k.PtrFrom(k.Load(k.PtrParam("q", dsl.U64)), dt, ptx.SpaceGlobal)
			k.Copy(k.MakeTensor(q, layout.MustParse("(8):(1)")), k.MakeTensor(k.DynamicShared(dt, 16), layout.MustParse("(8):(1)")))
		}()
		if _, err := k.Build(); err == nil || !strings.Contains(err.Error(), "no memory type") {
			t.Errorf("%s: Build: %v; want no memory type", dt, err)
		}
	}
	if dsl.Operand(7).String() != "Operand(7)" || dsl.GMMAMajor(-1).String() != "GMMAMajor(-1)" {
		t.Error("Operand or GMMAMajor out of range")
	}
}
