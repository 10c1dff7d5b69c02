package dsl_test

import (
	"math"
	"regexp"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/ptx"
)

// bf16Mul builds out[i] = a[i] * b[i] in bf16.
func bf16Mul(k *dsl.Kernel) {
	a, b, out := k.PtrParam("a", dsl.BF16), k.PtrParam("b", dsl.BF16), k.PtrParam("out", dsl.BF16)
	n := k.Param("n", dsl.U32)
	i := k.GlobalThreadIdx(dsl.X)
	k.If(i.Lt(n), func() {
		k.Store(out.At(i), k.Load(a.At(i)).Mul(k.Load(b.At(i))))
	})
}

// TestBF16MulSignedZero checks that bf16 Mul keeps the sign of a zero product: sm_80 has no
// mul.bf16, so Mul is fma.rn.bf16 with a -0 addend (bits 0x8000); a +0 addend would turn
// -0 products into +0. Both targets assemble and run on the emulator against Go.
func TestBF16MulSignedZero(t *testing.T) {
	vals := []uint16{0x0000, 0x8000, 0x3f80, 0xbf80, 0x4040, 0xc2f7, 0x0001, 0x8001, 0x7f7f, 0x7f80, 0xff80}
	var as, bs []uint16
	for _, x := range vals {
		for _, y := range vals {
			as, bs = append(as, x), append(bs, y)
		}
	}
	n := len(as)
	for _, target := range []ptx.Target{ptx.SM80, ptx.SM90} {
		t.Run(string(target), func(t *testing.T) {
			k := dsl.New("bf16mul", dsl.WithTarget(target))
			bf16Mul(k)
			m, sys := onOneGPU(t, k)
			assemble(t, m)
			if target == ptx.SM80 {
				// The addend is a register moved from 0x8000 (-0), used as fma's last operand.
				re := regexp.MustCompile(`mov\.b16 (%rs\d+), (?:32768|0x8000);(?s:.*)fma\.rn\.bf16 %rs\d+, %rs\d+, %rs\d+, (%rs\d+);`)
				g := re.FindStringSubmatch(m.String())
				if g == nil || g[1] != g[2] {
					t.Fatalf("sm_80 bf16 Mul is not fma.rn.bf16 with a -0 (0x8000) addend:\n%s", m)
				}
			}
			pa, _ := sys.Malloc(0, 2*n)
			pb, _ := sys.Malloc(0, 2*n)
			po, _ := sys.Malloc(0, 2*n)
			if err := emu.WriteSlice(sys, pa, as); err != nil {
				t.Fatal(err)
			}
			if err := emu.WriteSlice(sys, pb, bs); err != nil {
				t.Fatal(err)
			}
			err := sys.Launch(emu.Launch{Module: m, Entry: "bf16mul", Grid: emu.D1(1), Block: emu.D1(n),
				Args: []any{pa, pb, po, uint32(n)}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := emu.ReadSlice[uint16](sys, po, n)
			if err != nil {
				t.Fatal(err)
			}
			zeros := 0
			for i := range got {
				// Two bf16 values multiply exactly in f32, so one rounding to bf16 is the reference.
				p := fp.BF16ToF32(as[i]) * fp.BF16ToF32(bs[i])
				want := fp.F32ToBF16(p)
				if math.IsNaN(float64(p)) {
					if g := fp.BF16ToF32(got[i]); !math.IsNaN(float64(g)) {
						t.Errorf("%#04x * %#04x: got %#04x, want a NaN", as[i], bs[i], got[i])
					}
					continue
				}
				if want&0x7fff == 0 {
					zeros++
				}
				if got[i] != want {
					t.Errorf("%#04x * %#04x: got %#04x, want %#04x", as[i], bs[i], got[i], want)
				}
			}
			if zeros == 0 {
				t.Fatal("no zero products among the cases")
			}
		})
	}
}
