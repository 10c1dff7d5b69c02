package ref

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/ptx"
)

// TestEmuArgs: a host twin is encoded in parameter order; a field of another element type,
// a struct of another kernel or a field of an unsupported type is refused, naming the field.
func TestEmuArgs(t *testing.T) {
	spec, err := kernels.Find(kernels.ID{Family: kernels.FamilyP2PBarrier, DType: dsl.U32})
	if err != nil {
		t.Fatal(err)
	}
	b, err := spec.BuildVariant(kernels.Config{Target: ptx.SM90, DType: dsl.U32})
	if err != nil {
		t.Fatal(err)
	}
	fn, err := entry(b.Module, b.Entry)
	if err != nil {
		t.Fatal(err)
	}
	pads := jit.AnyPtr{Addr: 0x1000, Elem: dsl.U64}
	got, err := emuArgs(fn, b.Params, launch.P2PBarrier{Pads: pads, Rank: 1, NGPUs: 2, Epoch: 7})
	if err != nil || len(got) != 4 || got[0] != uint64(0x1000) || got[1] != uint32(1) || got[3] != uint32(7) {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, c := range []struct {
		args any
		want string
	}{
		{launch.P2PBarrier{Pads: jit.AnyPtr{Addr: 0x1000, Elem: dsl.F32}}, "field Pads is a pointer to f32"},
		{launch.MMBarrier{}, "field FlagsMC fills parameter flags_mc, but parameter 0 is pads"},
		{struct {
			Pads               jit.AnyPtr
			Rank, NGPUs, Epoch int
		}{Pads: pads}, "field Rank has type int"},
	} {
		if _, err := emuArgs(fn, b.Params, c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%T: %v, want %q", c.args, err, c.want)
		}
	}
}
