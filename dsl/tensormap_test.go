package dsl_test

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// tmapArgs declares a tensor map beside a pointer.
type tmapArgs struct {
	Src dsl.TensorMap
	Out dsl.Ptr `kgen:"u64"`
}

// TestTensorMapParam declares a tensor map through Params, reads its first and last words
// through Addr (a generic load from the parameter's generic address) and checks the PTX
// (ptxas accepts it for sm_90a), the declared ParamInfo and the words on the emulator.
func TestTensorMapParam(t *testing.T) {
	k := dsl.New("tmap", dsl.WithTarget(ptx.SM90a), dsl.WithoutLoc())
	a := dsl.Params[tmapArgs](k, dsl.BF16)
	p := k.PtrFrom(a.Src.Addr(), dsl.U64, ptx.SpaceGeneric)
	k.Store(a.Out.At(0), k.Load(p.At(0)))
	k.Store(a.Out.At(1), k.Load(p.At(dsl.TensorMapBytes/8-1)))
	m, sys := onOneGPU(t, k)
	text := m.String()
	for _, want := range []string{".param .align 64 .b8 src[128]", "mov.u64 %ud0, src;", "cvta.param.u64 %ud1, %ud0;"} {
		if !strings.Contains(text, want) {
			t.Fatalf("PTX lacks %q:\n%s", want, text)
		}
	}
	if a.Src.Elem() != dsl.BF16 {
		t.Fatalf("Elem() = %s, want bf16", a.Src.Elem())
	}
	info := k.Params()
	if len(info) != 2 || info[0] != (dsl.ParamInfo{Name: "src", Type: dsl.BF16, TensorMap: true}) {
		t.Fatalf("Params() = %v", info)
	}
	assemble(t, m)

	g, _ := sys.Malloc(0, 4096)
	out, _ := sys.Malloc(0, 16)
	tm := emu.TensorMap{Elem: ptx.BF16, Rank: 2, Global: g, Dims: [5]uint64{64, 32}, Strides: [5]uint64{0, 128}, Box: [5]uint32{64, 8}, Swizzle: 128}
	enc := tm.Encode()
	if err := sys.Launch(emu.Launch{Module: m, Entry: "tmap", Grid: emu.D1(1), Block: emu.D1(1), Args: []any{tm, out}}); err != nil {
		t.Fatal(err)
	}
	got, _ := emu.ReadSlice[uint64](sys, out, 2)
	if want := []uint64{binary.LittleEndian.Uint64(enc[:8]), binary.LittleEndian.Uint64(enc[120:])}; got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("words read through Addr: %#x, want %#x", got, want)
	}
}

// TestTensorMapParamMisuse checks the declaration's errors name the parameter at the caller's line.
func TestTensorMapParamMisuse(t *testing.T) {
	checkMisuses(t, "dsl/tensormap_test.go", []misuse{
		{"no memory type", `tensor map parameter "m": no memory type pred`, func(k *dsl.Kernel) int {
			return at(func() { k.TensorMapParam("m", dsl.Bool) })
		}},
		{"declared twice", `parameter "m" declared twice`, func(k *dsl.Kernel) int {
			k.TensorMapParam("m", dsl.F16)
			return at(func() { k.TensorMapParam("m", dsl.F16) })
		}},
		{"bad name", `parameter name "1m" is not a valid PTX identifier`, func(k *dsl.Kernel) int {
			return at(func() { k.TensorMapParam("1m", dsl.F16) })
		}},
	})
	checkMisuses(t, "dsl/tensormap_test.go", []misuse{
		{"before sm_90", `tensor map parameter "m": TMA tensor maps need sm_90 or newer (target sm_80)`, func(k *dsl.Kernel) int {
			return at(func() { k.TensorMapParam("m", dsl.F16) })
		}},
		{"through Params before sm_90", `TMA tensor maps need sm_90`, func(k *dsl.Kernel) int {
			return at(func() { dsl.Params[tmapArgs](k, dsl.F16) })
		}},
	}, dsl.WithTarget(ptx.SM80))
}
