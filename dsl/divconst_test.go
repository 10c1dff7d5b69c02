package dsl_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// TestDivByConstant runs Div and Rem of runtime values by constants (WithShiftDivision) on
// the emulator against Go's / and % (both truncate toward zero) for u32, s32, u64 and s64:
// powers of two (shifts and masks, signed ones with the bias toward zero), u32 divisors with
// a multiply-high magic number, and divisors that keep div/rem (7 as u32, every non-power of
// two signed, the 64-bit non-powers). The values include 0, the divisor's neighbours, the
// extremes of each type and random ones. It also checks which constants left a div or rem
// in the PTX, that a kernel without the option keeps them all, and that ptxas takes the
// module.
func TestDivByConstant(t *testing.T) {
	types := []struct {
		t      dsl.Type
		signed bool
		bits   int
		divs   []int64
		keep   []int64 // divisors expected to keep div/rem
	}{
		{dsl.U32, false, 32, []int64{1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 24, 25, 64, 100, 128, 641, 1000, 4096, 1 << 20, 1 << 31, math.MaxInt32, math.MaxUint32}, []int64{7, math.MaxInt32}},
		{dsl.I32, true, 32, []int64{1, 2, 3, 4, 8, 16, 64, 100, 128, 1 << 20, 1 << 30, math.MaxInt32, -1, -4}, []int64{3, 100, math.MaxInt32, -1, -4}},
		{dsl.U64, false, 64, []int64{1, 2, 3, 4, 16, 128, 1 << 40, 1000}, []int64{3, 1000}},
		{dsl.I64, true, 64, []int64{1, 2, 4, 8, 1 << 40, 3, -8}, []int64{3, -8}},
	}
	plain := dsl.New("plain", dsl.WithTarget(ptx.SM90))
	x := k0Load(plain)
	plain.Store(plain.PtrParam("out", dsl.U32).At(uint32(0)), x.Div(uint32(8)).Add(x.Rem(uint32(3))))
	if m, err := plain.Build(); err != nil || !regexp.MustCompile(`div\.u32 [^,]+, [^,]+, 8;`).MatchString(m.String()) || !regexp.MustCompile(`rem\.u32 [^,]+, [^,]+, 3;`).MatchString(m.String()) {
		t.Fatalf("without WithShiftDivision Div and Rem by constants stay div and rem (%v):\n%v", err, m)
	}
	// SetShiftDivision turns it on and off within a kernel.
	mixed := dsl.New("mixed", dsl.WithTarget(ptx.SM90))
	y := k0Load(mixed)
	out := mixed.PtrParam("out", dsl.U32)
	mixed.SetShiftDivision(true)
	mixed.Store(out.At(uint32(0)), y.Div(uint32(8)))
	mixed.SetShiftDivision(false)
	mixed.Store(out.At(uint32(1)), y.Div(uint32(16)))
	if m, err := mixed.Build(); err != nil || strings.Contains(m.String(), ", 8;") || !regexp.MustCompile(`div\.u32 [^,]+, [^,]+, 16;`).MatchString(m.String()) {
		t.Fatalf("SetShiftDivision(true) then (false): want the division by 8 as a shift and the one by 16 kept (%v):\n%v", err, m)
	}
	for _, tc := range types {
		t.Run(tc.t.String(), func(t *testing.T) {
			// The values: around 0, each divisor and the type's extremes, and random ones.
			var xs []uint64 // bit patterns of the type's width
			add := func(v int64) { xs = append(xs, uint64(v)) }
			for _, v := range []int64{0, 1, 2, 3, 5, 7, 100, -1, -2, -3, -7, -100} {
				add(v)
			}
			for _, c := range tc.divs {
				for _, d := range []int64{-1, 0, 1} {
					add(c + d)
					add(-c + d)
					add(2*c + d)
				}
			}
			if tc.bits == 32 {
				for _, v := range []int64{math.MaxInt32, math.MinInt32, math.MaxInt32 - 1, math.MinInt32 + 1, math.MaxUint32, math.MaxUint32 - 1, 1 << 31} {
					add(v)
				}
			} else {
				for _, v := range []int64{math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1, -1 << 32, 1 << 32} {
					add(v)
				}
			}
			r := rand.New(rand.NewPCG(1, uint64(tc.bits)))
			for range 200 {
				xs = append(xs, r.Uint64())
			}
			if tc.bits == 32 {
				for i := range xs {
					xs[i] &= math.MaxUint32
				}
			}
			n := len(xs)
			eb := tc.bits / 8

			k := dsl.New("divconst", dsl.WithTarget(ptx.SM90), dsl.WithShiftDivision())
			in, out := k.PtrParam("in", tc.t), k.PtrParam("out", tc.t)
			i := k.GlobalThreadIdx(dsl.X)
			k.If(i.Lt(uint32(n)), func() {
				x := k.Load(in.At(i))
				for j, c := range tc.divs {
					cv := k.Const(tc.t, c)
					at := i.Mul(uint32(2 * len(tc.divs))).Add(uint32(2 * j))
					k.Store(out.At(at), x.Div(cv))
					k.Store(out.At(at.Add(uint32(1))), x.Rem(cv))
				}
			})
			m, sys := onOneGPU(t, k)
			assemble(t, m)
			// div and rem stay exactly for the divisors in keep.
			divs := regexp.MustCompile(`(?m)^\s*(div|rem)\.[su](32|64) [^,]+, [^,]+, (-?\d+);`).FindAllStringSubmatch(m.String(), -1)
			kept := map[string]bool{}
			for _, d := range divs {
				kept[d[3]] = true
			}
			for _, c := range tc.divs {
				lit := fmt.Sprint(c)
				if !tc.signed && c < 0 {
					lit = fmt.Sprint(uint64(c))
				}
				want := false
				for _, x := range tc.keep {
					want = want || x == c
				}
				if kept[lit] != want {
					t.Errorf("divisor %d: div/rem left in the PTX %v, want %v", c, kept[lit], want)
				}
			}

			pin, _ := sys.Malloc(0, eb*n)
			pout, _ := sys.Malloc(0, eb*n*2*len(tc.divs))
			var got []uint64
			if tc.bits == 32 {
				w := make([]uint32, n)
				for i, x := range xs {
					w[i] = uint32(x)
				}
				if err := emu.WriteSlice(sys, pin, w); err != nil {
					t.Fatal(err)
				}
			} else if err := emu.WriteSlice(sys, pin, xs); err != nil {
				t.Fatal(err)
			}
			if err := sys.Launch(emu.Launch{Module: m, Entry: "divconst", Grid: emu.D1(1), Block: emu.D1(n), Args: []any{pin, pout}}); err != nil {
				t.Fatal(err)
			}
			if tc.bits == 32 {
				g, err := emu.ReadSlice[uint32](sys, pout, n*2*len(tc.divs))
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range g {
					got = append(got, uint64(v))
				}
			} else {
				g, err := emu.ReadSlice[uint64](sys, pout, n*2*len(tc.divs))
				if err != nil {
					t.Fatal(err)
				}
				got = g
			}
			bad := 0
			for i, x := range xs {
				for j, c := range tc.divs {
					wq, wr := goDivRem(x, c, tc.signed, tc.bits)
					gq, gr := got[i*2*len(tc.divs)+2*j], got[i*2*len(tc.divs)+2*j+1]
					if (gq != wq || gr != wr) && bad < 10 {
						bad++
						t.Errorf("%s %#x / %d: got q %#x r %#x, want q %#x r %#x", tc.t, x, c, gq, gr, wq, wr)
					}
				}
			}
		})
	}
}

// goDivRem is Go's x / c and x % c in the type's width and signedness, as bit patterns of
// that width (PTX's div and rem; the overflowing MinInt / -1 is not among the inputs' pairs
// that matter: its quotient wraps in both).
func goDivRem(x uint64, c int64, signed bool, bits int) (uint64, uint64) {
	mask := uint64(math.MaxUint64)
	if bits == 32 {
		mask = math.MaxUint32
	}
	if !signed {
		cu := uint64(c) & mask
		return (x / cu) & mask, (x % cu) & mask
	}
	if bits == 32 {
		a, b := int32(uint32(x)), int32(c)
		if a == math.MinInt32 && b == -1 {
			return uint64(uint32(a)), 0
		}
		return uint64(uint32(a / b)), uint64(uint32(a % b))
	}
	a := int64(x)
	if a == math.MinInt64 && c == -1 {
		return uint64(a), 0
	}
	return uint64(a / c), uint64(a % c)
}

// k0Load declares a u32 pointer parameter "in" of k and loads its first element.
func k0Load(k *dsl.Kernel) dsl.Value {
	return k.Load(k.PtrParam("in", dsl.U32).At(uint32(0)))
}
