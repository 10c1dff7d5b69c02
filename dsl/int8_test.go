package dsl_test

import (
	"math/rand"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// int8Ops are the operations arith8 checks, each on x and y (as int64 holding the 8-bit
// value) and its DSL form; the Go side wraps as Go's uint8/int8 arithmetic does.
type int8Op struct {
	name   string
	signed bool // only for I8
	dsl    func(k *dsl.Kernel, x, y dsl.Value) dsl.Value
	u8     func(x, y uint8) uint8
	i8     func(x, y int8) int8
}

func nonzero(k *dsl.Kernel, y dsl.Value) dsl.Value { return k.Select(y.Eq(0), k.Const(y.Type(), 1), y) }
func nz[T uint8 | int8](y T) T {
	if y == 0 {
		return 1
	}
	return y
}

var int8Ops = []int8Op{
	{"add", false, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value { return x.Add(y) },
		func(x, y uint8) uint8 { return x + y }, func(x, y int8) int8 { return x + y }},
	{"sub", false, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value { return x.Sub(y) },
		func(x, y uint8) uint8 { return x - y }, func(x, y int8) int8 { return x - y }},
	{"mul", false, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value { return x.Mul(y) },
		func(x, y uint8) uint8 { return x * y }, func(x, y int8) int8 { return x * y }},
	{"div", false, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value { return x.Div(nonzero(k, y)) },
		func(x, y uint8) uint8 { return x / nz(y) }, func(x, y int8) int8 { return x / nz(y) }},
	{"rem", false, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value { return x.Rem(nonzero(k, y)) },
		func(x, y uint8) uint8 { return x % nz(y) }, func(x, y int8) int8 { return x % nz(y) }},
	{"min", false, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value { return x.Min(y) },
		func(x, y uint8) uint8 { return min(x, y) }, func(x, y int8) int8 { return min(x, y) }},
	{"max", false, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value { return x.Max(y) },
		func(x, y uint8) uint8 { return max(x, y) }, func(x, y int8) int8 { return max(x, y) }},
	{"and", false, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value { return x.And(y) },
		func(x, y uint8) uint8 { return x & y }, func(x, y int8) int8 { return x & y }},
	{"or", false, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value { return x.Or(y) },
		func(x, y uint8) uint8 { return x | y }, func(x, y int8) int8 { return x | y }},
	{"xor", false, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value { return x.Xor(y) },
		func(x, y uint8) uint8 { return x ^ y }, func(x, y int8) int8 { return x ^ y }},
	{"not", false, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value { return x.Not() },
		func(x, y uint8) uint8 { return ^x }, func(x, y int8) int8 { return ^x }},
	{"shl", false, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value { return x.Shl(y.To(dsl.U32).And(15)) },
		func(x, y uint8) uint8 { return x << (y & 15) }, func(x, y int8) int8 { return x << (uint8(y) & 15) }},
	{"shl3", false, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value { return x.Shl(3) },
		func(x, y uint8) uint8 { return x << 3 }, func(x, y int8) int8 { return x << 3 }},
	{"shr", false, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value { return x.Shr(y.To(dsl.U32).And(15)) },
		func(x, y uint8) uint8 { return x >> (y & 15) }, func(x, y int8) int8 { return x >> (uint8(y) & 15) }},
	{"fma", false, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value { return k.FMA(x, y, x) },
		func(x, y uint8) uint8 { return x*y + x }, func(x, y int8) int8 { return x*y + x }},
	{"const", false, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value {
		if x.Type() == dsl.I8 {
			return x.Add(-100).Mul(3).Sub(120)
		}
		return x.Add(200).Mul(3).Sub(250)
	}, func(x, y uint8) uint8 { return (x+200)*3 - 250 }, func(x, y int8) int8 { return (x-100)*3 - 120 }},
	{"chain", false, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value { return x.Add(y).Shr(1).Max(x.Sub(y).Div(3)) },
		func(x, y uint8) uint8 { return max((x+y)>>1, (x-y)/3) }, func(x, y int8) int8 { return max((x+y)>>1, (x-y)/3) }},
	{"select", false, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value { return k.Select(x.Add(y).Lt(x), x.Mul(y), y.Sub(x)) },
		func(x, y uint8) uint8 {
			if x+y < x {
				return x * y
			}
			return y - x
		}, func(x, y int8) int8 {
			if x+y < x {
				return x * y
			}
			return y - x
		}},
	{"var", false, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value {
		acc := k.Var(x.Type(), 0)
		for i := 0; i < 3; i++ {
			k.Set(acc, acc.Mul(x).Add(y))
		}
		return acc
	}, func(x, y uint8) uint8 {
		var acc uint8
		for i := 0; i < 3; i++ {
			acc = acc*x + y
		}
		return acc
	}, func(x, y int8) int8 {
		var acc int8
		for i := 0; i < 3; i++ {
			acc = acc*x + y
		}
		return acc
	}},
	{"narrow", false, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value {
		return x.To(dsl.I32).Mul(y.To(dsl.I32)).Add(1000).To(x.Type())
	}, func(x, y uint8) uint8 { return uint8(int32(x)*int32(y) + 1000) }, func(x, y int8) int8 { return int8(int32(x)*int32(y) + 1000) }},
	{"widen16", false, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value {
		return x.To(dsl.U16).Mul(y.To(dsl.U16)).To(x.Type())
	}, func(x, y uint8) uint8 { return uint8(uint16(x) * uint16(y)) }, func(x, y int8) int8 { return int8(uint16(x) * uint16(y)) }},
	{"float", false, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value {
		return x.To(dsl.F32).Mul(0.5).To(x.Type()).Add(y)
	}, func(x, y uint8) uint8 { return uint8(float32(x)*0.5) + y }, func(x, y int8) int8 { return int8(float32(x)*0.5) + y }},
	{"signs", false, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value {
		if x.Type() == dsl.I8 {
			return x.To(dsl.U8).Add(y.To(dsl.U8)).To(dsl.I8)
		}
		return x.To(dsl.I8).Sub(y.To(dsl.I8)).To(dsl.U8)
	}, func(x, y uint8) uint8 { return uint8(int8(x) - int8(y)) }, func(x, y int8) int8 { return int8(uint8(x) + uint8(y)) }},
	{"neg", true, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value { return x.Neg() },
		nil, func(x, y int8) int8 { return -x }},
	{"abs", true, func(k *dsl.Kernel, x, y dsl.Value) dsl.Value { return x.Abs() },
		nil, func(x, y int8) int8 {
			if x < 0 {
				return -x
			}
			return x
		}},
}

// arith8 builds a kernel where thread i computes every op of int8Ops on a[i], b[i] and
// writes, per op, three I32 values: the result widened, the result shifted right by 3, and
// whether it is below a constant. The last two see the whole 16-bit register, so a result
// not wrapped back to its byte (or not sign/zero-extended) shows.
func arith8(k *dsl.Kernel, dt dsl.Type) {
	a, b := k.PtrParam("a", dt), k.PtrParam("b", dt)
	w := k.PtrParam("w", dsl.I32)
	n := k.Param("n", dsl.U32)
	i := k.GlobalThreadIdx(dsl.X)
	lim := any(100)
	if dt == dsl.I8 {
		lim = -3
	}
	k.If(i.Lt(n), func() {
		x, y := k.Load(a.At(i)), k.Load(b.At(i))
		j := 0
		for _, op := range int8Ops {
			if op.signed && dt != dsl.I8 {
				continue
			}
			r := op.dsl(k, x, y)
			k.Store(w.At(n.Mul(uint32(3*j)).Add(i)), r.To(dsl.I32))
			k.Store(w.At(n.Mul(uint32(3*j+1)).Add(i)), r.Shr(3).To(dsl.I32))
			k.Store(w.At(n.Mul(uint32(3*j+2)).Add(i)), k.Select(r.Lt(lim), k.Const(dsl.I32, 1), 0))
			j++
		}
	})
}

// TestInt8ArithmeticAssembles checks that 8-bit arithmetic passes ptx.Verify and ptxas: it
// runs in the 16-bit forms (no add.u8, setp.lt.s8, selp.u8 ...).
func TestInt8ArithmeticAssembles(t *testing.T) {
	for _, target := range []ptx.Target{ptx.SM80, ptx.SM90} {
		for _, dt := range []dsl.Type{dsl.U8, dsl.I8} {
			t.Run(string(target)+"/"+dt.String(), func(t *testing.T) {
				build(t, target, func(k *dsl.Kernel) { arith8(k, dt) })
			})
		}
	}
}

// TestInt8ArithmeticOnEmulator runs arith8 on the emulator over edge values (0, 1, 127, 128,
// 255, ...) in every pair and random pairs, against Go's uint8 and int8 arithmetic.
func TestInt8ArithmeticOnEmulator(t *testing.T) {
	edges := []uint8{0, 1, 2, 3, 5, 7, 8, 15, 16, 63, 64, 100, 126, 127, 128, 129, 130, 156, 200, 250, 253, 254, 255}
	var xs, ys []uint8
	for _, x := range edges {
		for _, y := range edges {
			xs, ys = append(xs, x), append(ys, y)
		}
	}
	rng := rand.New(rand.NewSource(1))
	for len(xs) < 1024 {
		xs, ys = append(xs, uint8(rng.Intn(256))), append(ys, uint8(rng.Intn(256)))
	}
	n := len(xs)
	for _, dt := range []dsl.Type{dsl.U8, dsl.I8} {
		t.Run(dt.String(), func(t *testing.T) {
			k := dsl.New("arith8")
			arith8(k, dt)
			m, err := k.Build()
			if err != nil {
				t.Fatal(err)
			}
			var ops []int8Op
			for _, op := range int8Ops {
				if !op.signed || dt == dsl.I8 {
					ops = append(ops, op)
				}
			}
			sys, err := emu.New(1)
			if err != nil {
				t.Fatal(err)
			}
			pa, _ := sys.Malloc(0, n)
			pb, _ := sys.Malloc(0, n)
			pw, _ := sys.Malloc(0, 4*3*len(ops)*n)
			if err := emu.WriteSlice(sys, pa, xs); err != nil {
				t.Fatal(err)
			}
			if err := emu.WriteSlice(sys, pb, ys); err != nil {
				t.Fatal(err)
			}
			err = sys.Launch(emu.Launch{Module: m, Entry: "arith8", Grid: emu.D1((n + 127) / 128), Block: emu.D1(128),
				Args: []any{pa, pb, pw, uint32(n)}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := emu.ReadSlice[int32](sys, pw, 3*len(ops)*n)
			if err != nil {
				t.Fatal(err)
			}
			bad := 0
			for j, op := range ops {
				for i := 0; i < n; i++ {
					var want [3]int32
					if dt == dsl.U8 {
						r := op.u8(xs[i], ys[i])
						want = [3]int32{int32(r), int32(r >> 3), b2i(r < 100)}
					} else {
						r := op.i8(int8(xs[i]), int8(ys[i]))
						want = [3]int32{int32(r), int32(r >> 3), b2i(r < -3)}
					}
					for c := 0; c < 3; c++ {
						if g := got[(3*j+c)*n+i]; g != want[c] && bad < 10 {
							bad++
							t.Errorf("%s(%d, %d) [%d]: got %d, want %d", op.name, xs[i], ys[i], c, g, want[c])
						}
					}
				}
			}
		})
	}
}

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}
