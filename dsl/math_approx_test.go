package dsl_test

import (
	"math"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// TestTanhRcpApprox: Tanh and RcpApprox emit tanh.approx.f32 and rcp.approx.ftz.f32, fold
// constants, refuse other types with the rule, and compute
// tanh(x) and 1/x on the emulator.
func TestTanhRcpApprox(t *testing.T) {
	type args struct {
		In, Out dsl.Ptr `kgen:"f32"`
	}
	k := dsl.New("approx", dsl.WithTarget(ptx.SM80))
	a := dsl.Params[args](k, dsl.F32)
	x := k.Load(a.In)
	k.Store(a.Out, x.Tanh())
	k.Store(a.Out.At(1), x.RcpApprox())
	k.Store(a.Out.At(2), k.Const(dsl.F32, float32(0.5)).Tanh())
	m, sys := onOneGPU(t, k)
	s := m.String()
	for _, want := range []string{"tanh.approx.f32", "rcp.approx.ftz.f32"} {
		if !strings.Contains(s, want) {
			t.Errorf("PTX lacks %s", want)
		}
	}
	in, _ := sys.Malloc(0, 4)
	out, _ := sys.Malloc(0, 12)
	if err := emu.WriteSlice(sys, in, []float32{-0.75}); err != nil {
		t.Fatal(err)
	}
	if err := sys.Launch(emu.Launch{Module: m, Entry: "approx", Grid: emu.D1(1), Block: emu.D1(1), Args: []any{in, out}}); err != nil {
		t.Fatal(err)
	}
	got, err := emu.ReadSlice[float32](sys, out, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{math.Tanh(-0.75), 1 / -0.75, math.Tanh(0.5)} {
		if math.Abs(float64(got[i])-want) > 1e-6 {
			t.Errorf("value %d = %v, want %v", i, got[i], want)
		}
	}

	bad := dsl.New("bad", dsl.WithTarget(ptx.SM80))
	b := dsl.Params[args](bad, dsl.F32)
	bad.Store(b.Out, bad.Load(b.In).To(dsl.F64).Tanh().To(dsl.F32))
	if _, err := bad.Build(); err == nil || !strings.Contains(err.Error(), "Tanh is defined for F32") {
		t.Errorf("f64 Tanh: err %v", err)
	}
}
