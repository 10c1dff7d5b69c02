package dsl_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// axpyArgs mixes every field kind and tag form.
type axpyArgs struct {
	Alpha dsl.Value
	X, Y  dsl.Ptr
	Out   dsl.Ptr `kgen:"name=y_out,type=f32"`
	Bufs  dsl.PeerTable
	NGPUs dsl.Value `kgen:"u32"`
}

func TestParamsDeclaresInFieldOrder(t *testing.T) {
	k := dsl.New("k", dsl.WithoutLoc())
	a := dsl.Params[axpyArgs](k, dsl.F16)
	k.Store(a.Out.At(0), k.Load(a.Bufs.Peer(a.NGPUs.Sub(1))).To(dsl.F32).Add(a.Alpha.To(dsl.F32)))
	got, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}

	// The same kernel declared by hand.
	h := dsl.New("k", dsl.WithoutLoc())
	alpha := h.Param("alpha", dsl.F16)
	h.PtrParam("x", dsl.F16)
	h.PtrParam("y", dsl.F16)
	out := h.PtrParam("y_out", dsl.F32)
	bufs := h.PtrParam("bufs", dsl.U64)
	ngpus := h.Param("ngpus", dsl.U32)
	peer := h.PtrFrom(h.Load(bufs.At(ngpus.Sub(1))), dsl.F16, ptx.SpaceGlobal)
	h.Store(out.At(0), h.Load(peer).To(dsl.F32).Add(alpha.To(dsl.F32)))
	want, err := h.Build()
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Fatalf("Params built\n%s\nby hand\n%s", got, want)
	}
	wantInfo := []dsl.ParamInfo{{Name: "alpha", Type: dsl.F16}, {Name: "x", Type: dsl.F16, Pointer: true},
		{Name: "y", Type: dsl.F16, Pointer: true}, {Name: "y_out", Type: dsl.F32, Pointer: true},
		{Name: "bufs", Type: dsl.U64, Pointer: true}, {Name: "ngpus", Type: dsl.U32}}
	if fmt.Sprint(k.Params()) != fmt.Sprint(wantInfo) {
		t.Fatalf("Params() = %v, want %v", k.Params(), wantInfo)
	}
	if a.Bufs.Elem() != dsl.F16 || a.Bufs.Table().Elem() != dsl.U64 || a.X.Elem() != dsl.F16 || a.NGPUs.Type() != dsl.U32 {
		t.Fatalf("handle types: bufs %s (table %s), x %s, ngpus %s", a.Bufs.Elem(), a.Bufs.Table().Elem(), a.X.Elem(), a.NGPUs.Type())
	}
}

type (
	unexportedArgs struct {
		A dsl.Ptr
		b dsl.Value //lint:ignore U1000 the misuse under test
	}
	wrongTypeArgs struct {
		A dsl.Ptr
		N uint32
	}
	badTagKeyArgs struct {
		A dsl.Ptr `kgen:"elem=f32"`
	}
	badTagTypeArgs struct {
		N dsl.Value `kgen:"type=f33"`
	}
	dupArgs struct {
		In   dsl.Ptr
		Also dsl.Ptr `kgen:"name=in"`
	}
	embeddedArgs struct {
		dsl.Ptr
	}
	badNameArgs struct {
		A dsl.Ptr `kgen:"name=1a"`
	}
)

func TestParamsMisuse(t *testing.T) {
	checkMisuses(t, "dsl/params_test.go", []misuse{
		{"not a struct", "Params[int]: not a struct", func(k *dsl.Kernel) int {
			return at(func() { dsl.Params[int](k, dsl.F32) })
		}},
		{"unexported field", "field b: unexported", func(k *dsl.Kernel) int {
			return at(func() { dsl.Params[unexportedArgs](k, dsl.F32) })
		}},
		{"unsupported field type", "field N: type uint32 is not a parameter type", func(k *dsl.Kernel) int {
			return at(func() { dsl.Params[wrongTypeArgs](k, dsl.F32) })
		}},
		{"unknown tag key", "field A: tag elem=f32: unknown key elem", func(k *dsl.Kernel) int {
			return at(func() { dsl.Params[badTagKeyArgs](k, dsl.F32) })
		}},
		{"unknown tag type", "field N: tag type=f33: unknown type f33", func(k *dsl.Kernel) int {
			return at(func() { dsl.Params[badTagTypeArgs](k, dsl.F32) })
		}},
		{"duplicate name", "field Also: parameter name in is also field In's", func(k *dsl.Kernel) int {
			return at(func() { dsl.Params[dupArgs](k, dsl.F32) })
		}},
		{"embedded field", "field Ptr: embedded", func(k *dsl.Kernel) int {
			return at(func() { dsl.Params[embeddedArgs](k, dsl.F32) })
		}},
		{"bad PTX name", "parameter name 1a is not a valid PTX identifier", func(k *dsl.Kernel) int {
			return at(func() { dsl.Params[badNameArgs](k, dsl.F32) })
		}},
		{"declared twice", `parameter "a" declared twice`, func(k *dsl.Kernel) int {
			dsl.Params[wrongTypeArgs](k, dsl.F32)
			return at(func() { k.Param("a", dsl.U32) })
		}},
	})
}

// A field in error still gets a placeholder handle: the body builds on and Build reports
// only the declaration's error.
func TestParamsPlaceholders(t *testing.T) {
	k := dsl.New("k")
	a := dsl.Params[dupArgs](k, dsl.F32)
	k.Store(a.Also.At(1), k.Load(a.In))
	_, err := k.Build()
	if err == nil || strings.Count(err.Error(), "\n") != 0 || !strings.Contains(err.Error(), "field Also") {
		t.Fatalf("want one error about field Also, got %v", err)
	}
}
