package dsl_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/tooltest"
	"github.com/kgen-dev/kgen/ptx"
)

// assemble checks that ptxas accepts the module.
func assemble(t *testing.T, m *ptx.Module) {
	t.Helper()
	ptxas := tooltest.Ptxas(t)
	d := t.TempDir()
	f := filepath.Join(d, "k.ptx")
	if err := os.WriteFile(f, []byte(m.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-arch=" + string(m.Target), f, "-o", filepath.Join(d, "k.cubin")}
	for _, fn := range m.Funcs {
		if fn.Extern {
			args = append(args, "-c") // relocatable: the externs are linked later
			break
		}
	}
	if out, err := exec.Command(ptxas, args...).CombinedOutput(); err != nil {
		t.Fatalf("ptxas: %v\n%s\n%s", err, out, m)
	}
}

// TestEveryOperationAssembles builds a kernel using every operation of the first DSL version
// for each supported type and target and checks ptxas accepts it.
func TestEveryOperationAssembles(t *testing.T) {
	for _, target := range []ptx.Target{ptx.SM80, ptx.SM90} {
		for _, dt := range []dsl.Type{dsl.I32, dsl.U32, dsl.I64, dsl.U64, dsl.I16, dsl.U16, dsl.I8, dsl.U8, dsl.F32, dsl.F64, dsl.F16, dsl.BF16} {
			t.Run(string(target)+"/"+dt.String(), func(t *testing.T) {
				k := dsl.New("ops", dsl.WithTarget(target))
				p := k.PtrParam("p", dt)
				n := k.Param("n", dsl.U32)
				i := k.GlobalThreadIdx(dsl.X)
				s := k.SharedArray(dt, 64)
				k.Store(s.At(k.ThreadIdx(dsl.X).Rem(64)), k.Load(p.At(i)))
				k.SyncThreads()
				k.If(i.Lt(n), func() {
					a := k.Load(p.At(i))
					b := k.Load(p.At(i.Add(1)))
					acc := k.Var(dt, 0)
					k.Set(acc, a.Add(b).Sub(a).Mul(b))
					k.Set(acc, acc.Min(a).Max(b))
					k.Set(acc, k.FMA(a, b, acc))
					if dt != dsl.F16 && dt != dsl.BF16 {
						k.Set(acc, acc.Div(k.Const(dt, 3)))
					}
					if dt.IsInt() {
						k.Set(acc, acc.Rem(7).And(a).Or(b).Xor(acc).Shl(2).Shr(1).Not())
					}
					if dt.Kind() == ptx.KindSigned || dt.IsFloat() {
						k.Set(acc, acc.Neg().Abs())
					}
					k.Set(acc, k.Select(a.Lt(b), acc, a))
					k.If(acc.Ge(a).And(b.Ne(a)), func() {
						k.Store(p.At(i), acc.To(dsl.F32).To(dt))
					}).Else(func() {
						k.Store(p.At(i), 1)
					})
				})
				k.For(0, n, 1, func(j dsl.Value) {
					k.Store(p.At(j), k.Load(p.At(j), dsl.Volatile()), dsl.Relaxed(dsl.GPU))
				})
				k.While(func() dsl.Value { return k.Load(p, dsl.Acquire(dsl.System)).Eq(0) }, func() {})
				if dt.Bits() <= 32 {
					v := k.LoadVec(p.At(4), 4)
					k.StoreVec(p.At(8), v)
				}
				m, err := k.Build()
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(m.String(), ".loc") {
					t.Error("no .loc lines")
				}
				assemble(t, m)
			})
		}
	}
}

func TestConstantsFold(t *testing.T) {
	k := dsl.New("fold")
	p := k.PtrParam("p", dsl.U32)
	c := k.Const(dsl.U32, 6).Mul(7).Add(0xFFFFFFFF) // wraps to 41
	k.Store(p, c)
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	s := m.String()
	if !strings.Contains(s, "st.global.u32 [%ud1], 41;") || strings.Contains(s, "mul.lo") {
		t.Fatalf("constants did not fold:\n%s", s)
	}
}
