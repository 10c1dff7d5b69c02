package dsl_test

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// misuse is one misuse case: f builds it into k and returns the line where the misuse is
// written (see at); Build must fail with an error naming that line and holding want.
type misuse struct {
	name, want string
	f          func(k *dsl.Kernel) int
}

// checkMisuses runs each case on a new kernel (targeting sm_90 unless opts say otherwise)
// and checks Build's error carries the case's file:line (file: the test file, from the
// module root) and its message.
func checkMisuses(t *testing.T, file string, cases []misuse, opts ...dsl.Option) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := dsl.New("k", opts...)
			line := c.f(k)
			_, err := k.Build()
			if err == nil {
				t.Fatal("Build accepted the misuse")
			}
			loc := fmt.Sprintf("%s:%d: ", file, line)
			if !strings.Contains(err.Error(), loc) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q\nwant it to contain %q and %q", err, loc, c.want)
			}
		})
	}
}

// at runs f and returns the line it was called from, where the misuse is written.
func at(f func()) int {
	_, _, line, _ := runtime.Caller(1)
	f()
	return line
}

// TestMisuse checks that each misuse is reported by Build with the caller's file:line.
func TestMisuse(t *testing.T) {
	other := dsl.New("other")
	foreign := other.Param("x", dsl.F32)
	foreignPtr := other.PtrParam("p", dsl.F32)

	cases := []misuse{ // want: a fragment of the message
		{"type mismatch in Add", "type mismatch", func(k *dsl.Kernel) int {
			a, b := k.Param("a", dsl.F32), k.Param("b", dsl.I32)
			return at(func() { a.Add(b) })
		}},
		{"value of another kernel", "belongs to kernel other", func(k *dsl.Kernel) int {
			a := k.Param("a", dsl.F32)
			return at(func() { a.Mul(foreign) })
		}},
		{"pointer of another kernel", "pointer belongs to kernel other", func(k *dsl.Kernel) int {
			return at(func() { k.Load(foreignPtr) })
		}},
		{"store of the wrong type", "type mismatch", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.F32)
			v := k.Param("v", dsl.U32)
			return at(func() { k.Store(p, v) })
		}},
		{"float constant as integer", "float constant", func(k *dsl.Kernel) int {
			a := k.Param("a", dsl.U32)
			return at(func() { a.Add(1.5) })
		}},
		{"constant overflow", "overflows", func(k *dsl.Kernel) int {
			a := k.Param("a", dsl.U16)
			return at(func() { a.Add(70000) })
		}},
		{"fp8 constant overflow", "overflows e4m3 (largest finite 448", func(k *dsl.Kernel) int {
			return at(func() { k.Var(dsl.E4M3, 500.0) })
		}},
		{"fp8 e4m3 infinity", "overflows e4m3", func(k *dsl.Kernel) int {
			return at(func() { k.Const(dsl.E4M3, math.Inf(1)) })
		}},
		{"fp8 arithmetic", "Add is not defined for e5m2", func(k *dsl.Kernel) int {
			v := k.Var(dsl.E5M2, 1.0)
			return at(func() { v.Add(v) })
		}},
		{"negative unsigned constant", "negative constant", func(k *dsl.Kernel) int {
			a := k.Param("a", dsl.U32)
			return at(func() { a.Sub(-1) })
		}},
		{"non-Bool condition", "not Bool", func(k *dsl.Kernel) int {
			a := k.Param("a", dsl.U32)
			return at(func() { k.If(a, func() {}) })
		}},
		{"remainder of floats", "Rem is not defined for f32", func(k *dsl.Kernel) int {
			a := k.Param("a", dsl.F32)
			return at(func() { a.Rem(a) })
		}},
		{"Set of a value that is not a variable", "is not a variable (make one with Var)", func(k *dsl.Kernel) int {
			a := k.Param("a", dsl.U32)
			sum := a.Add(1)
			return at(func() { k.Set(sum, 7) })
		}},
		{"shift of a float", "Shl is not defined for f32", func(k *dsl.Kernel) int {
			a := k.Param("a", dsl.F32)
			return at(func() { a.Shl(2) })
		}},
		{"float index", "index is f32", func(k *dsl.Kernel) int {
			p, i := k.PtrParam("p", dsl.F32), k.Param("i", dsl.F32)
			return at(func() { p.At(i) })
		}},
		{"duplicate parameter", "declared twice", func(k *dsl.Kernel) int {
			k.Param("a", dsl.U32)
			return at(func() { k.Param("a", dsl.U32) })
		}},
		{"bad parameter name", "not a valid PTX identifier", func(k *dsl.Kernel) int {
			return at(func() { k.Param("a b", dsl.U32) })
		}},
		{"Bool parameter", "cannot be a kernel parameter", func(k *dsl.Kernel) int {
			return at(func() { k.Param("flag", dsl.Bool) })
		}},
		{"acquire store (wrong semantics)", "cannot be Acquire", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.U32)
			return at(func() { k.Store(p, 1, dsl.Acquire(dsl.GPU)) })
		}},
		{"release load (wrong semantics)", "cannot be Release", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.U32)
			return at(func() { k.Load(p, dsl.Release(dsl.GPU)) })
		}},
		{"vector of 3", "vector length 3", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.F32)
			return at(func() { k.LoadVec(p, 3) })
		}},
		{"vector wider than 128 bits", "at most 128 bits", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.F64)
			return at(func() { k.LoadVec(p, 4) })
		}},
		{"misaligned vector", "not aligned", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.F32)
			return at(func() { k.LoadVec(p.At(1), 4) })
		}},
		{"set a constant", "is a constant", func(k *dsl.Kernel) int {
			c := k.Const(dsl.U32, 3)
			return at(func() { k.Set(c, 4) })
		}},
		{"FMA type mismatch", "FMA: type mismatch", func(k *dsl.Kernel) int {
			a, b := k.Param("a", dsl.F32), k.Param("b", dsl.F64)
			return at(func() { k.FMA(a, b, a) })
		}},
		{"convert a Bool", "cannot convert", func(k *dsl.Kernel) int {
			a := k.Param("a", dsl.U32)
			return at(func() { a.Lt(3).To(dsl.F32) })
		}},
		{"non-positive loop step", "step must be positive", func(k *dsl.Kernel) int {
			n := k.Param("n", dsl.U32)
			return at(func() { k.For(0, n, 0, func(dsl.Value) {}) })
		}},
		{"float loop bounds", "not an integer type", func(k *dsl.Kernel) int {
			n := k.Param("n", dsl.F32)
			return at(func() { k.For(0.0, n, 1.0, func(dsl.Value) {}) })
		}},
		{"zero Value", "invalid (zero) Value", func(k *dsl.Kernel) int {
			a := k.Param("a", dsl.U32)
			return at(func() { a.Add(dsl.Value{}) })
		}},
		{"select without a type", "at least one Value", func(k *dsl.Kernel) int {
			c := k.Param("a", dsl.U32).Lt(2)
			return at(func() { k.Select(c, 1, 2) })
		}},
		{"bad axis", "axis 7", func(k *dsl.Kernel) int {
			return at(func() { k.ThreadIdx(dsl.Axis(7)) })
		}},
		{"unsupported Go constant", "from Go string", func(k *dsl.Kernel) int {
			a := k.Param("a", dsl.U32)
			return at(func() { a.Add("one") })
		}},
		{"ordering on local memory (wrong state space)", "does not apply to local memory", func(k *dsl.Kernel) int {
			p := k.LocalArray(dsl.U32, 4)
			return at(func() { k.Store(p, 1, dsl.Release(dsl.GPU)) })
		}},
		{"empty shared array", "size 0 must be positive", func(k *dsl.Kernel) int {
			return at(func() { k.SharedArray(dsl.F32, 0) })
		}},
		{"multimem on shared memory (wrong state space)", "multimem addresses are global", func(k *dsl.Kernel) int {
			s := k.SharedArray(dsl.F32, 8)
			return at(func() { k.MultimemStore(s, []dsl.Value{k.Const(dsl.F32, 1)}) })
		}},
		{"multimem accumulator on max", "applies to Sum only", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.F16)
			return at(func() { k.MultimemLoadReduce(p, dsl.Max, 2, dsl.AccF32()) })
		}},
		{"fp8 multimem on elements", "fp8 multimem moves packed 32-bit words", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.E4M3)
			return at(func() { k.MultimemLoadReduce(p, dsl.Sum, 4, dsl.AccF16()) })
		}},
		{"fp8 multimem before sm_100a", "needs an sm_100a-class target", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.E5M2)
			return at(func() { k.MultimemLoadReduce(p.As(dsl.E5M2x4), dsl.Sum, 1) })
		}},
		{"f16 accumulator on f16", "AccF16 applies to fp8 words", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.F16)
			return at(func() { k.MultimemLoadReduce(p, dsl.Sum, 2, dsl.AccF16()) })
		}},
		{"wrap-safe wait on a float", "GeWrap compares u32 or u64 counters, not f32", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.F32)
			return at(func() { k.WaitUntil(p, dsl.GeWrap, float32(1)) })
		}},
		{"bitcast across widths", "needs two 16-, 32- or 64-bit types of the same width", func(k *dsl.Kernel) int {
			a := k.Param("a", dsl.F32)
			return at(func() { a.Bitcast(dsl.U64) })
		}},
		{"pointer view off its element", "not a multiple of", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.U8)
			return at(func() { p.At(2).As(dsl.U32) })
		}},
		{"multimem store with Acquire", "cannot be Acquire (use Release)", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.F32)
			return at(func() { k.MultimemStore(p, []dsl.Value{k.Const(dsl.F32, 1)}, dsl.Acquire(dsl.System)) })
		}},
		{"multimem.ld_reduce with Release", "cannot be Release (use Acquire)", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.F32)
			return at(func() { k.MultimemLoadReduce(p, dsl.Sum, 1, dsl.Release(dsl.GPU)) })
		}},
		{"volatile multimem", "no volatile form", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.U32)
			return at(func() { k.MultimemReduce(p, dsl.Sum, []dsl.Value{k.Const(dsl.U32, 1)}, dsl.Volatile()) })
		}},
		{"multimem integer vector", "no vectors", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.U32)
			return at(func() { k.MultimemLoadReduce(p, dsl.Sum, 4) })
		}},
		{"reduction with exch", "exch has no reduction form", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.U32)
			return at(func() { k.Reduce(dsl.AtomExch, p, 1) })
		}},
		{"atomic on local memory (wrong state space)", "atomics apply to global or shared", func(k *dsl.Kernel) int {
			p := k.LocalArray(dsl.U32, 2)
			return at(func() { k.Atomic(dsl.AtomAdd, p, 1) })
		}},
		{"atomic inc on f32", "inc and dec take u32", func(k *dsl.Kernel) int {
			p := k.PtrParam("p", dsl.F32)
			return at(func() { k.Atomic(dsl.AtomInc, p, 1.0) })
		}},
		{"extern declared twice differently", "declared twice with different signatures", func(k *dsl.Kernel) int {
			k.Extern("f", nil, dsl.U64)
			return at(func() { k.Extern("f", nil, dsl.U32) })
		}},
		{"call with the wrong arity", "takes 2 arguments, got 1", func(k *dsl.Kernel) int {
			f := k.Extern("g", nil, dsl.U64, dsl.I32)
			return at(func() { k.Call(f, uint64(1)) })
		}},
		{"copy between different element types", "element types differ", func(k *dsl.Kernel) int {
			a := k.MakeTensor(k.PtrParam("a", dsl.F32), layout.MustParse("8:1"))
			b := k.MakeTensor(k.PtrParam("b", dsl.F16), layout.MustParse("8:1"))
			return at(func() { k.Copy(a, b) })
		}},
		{"copy between different sizes", "sizes differ", func(k *dsl.Kernel) int {
			a := k.MakeTensor(k.PtrParam("a", dsl.F32), layout.MustParse("8:1"))
			b := k.MakeTensor(k.PtrParam("b", dsl.F32), layout.MustParse("4:1"))
			return at(func() { k.Copy(a, b) })
		}},
		{"partition not divisible", "not divisible by 3 threads", func(k *dsl.Kernel) int {
			a := k.MakeTensor(k.PtrParam("a", dsl.F32), layout.MustParse("8:1"))
			return at(func() { a.LocalPartition(layout.MustParse("3:1"), k.ThreadIdx(dsl.X), 1) })
		}},
		{"tile rank mismatch", "tensor has rank 2", func(k *dsl.Kernel) int {
			a := k.MakeTensor(k.PtrParam("a", dsl.F32), layout.MustParse("(8,8):(8,1)"))
			return at(func() { a.LocalTile([]int{4}, 0) })
		}},
		{"bitwise reduction of floats", "BitAnd is not defined for f32", func(k *dsl.Kernel) int {
			v := k.Param("v", dsl.F32)
			return at(func() { k.WarpReduce(v, dsl.BitAnd) })
		}},
		{"address of a fragment", "has no address", func(k *dsl.Kernel) int {
			a := k.MakeTensor(k.PtrParam("a", dsl.F32), layout.MustParse("4:1"))
			f := k.Fragment(dsl.F32, a)
			return at(func() { f.At(0) })
		}},
		{"swizzle on global memory", "apply to shared memory", func(k *dsl.Kernel) int {
			p := k.PtrParam("a", dsl.F32)
			return at(func() { k.MakeSwizzledTensor(p, layout.Swizzle{B: 3, M: 0, S: 3}, layout.MustParse("64:1")) })
		}},
		{"shuffle of a Bool", "cannot shuffle a pred", func(k *dsl.Kernel) int {
			c := k.Param("a", dsl.U32).Lt(3)
			return at(func() { k.ShuffleXor(c, 1) })
		}},
		{"bad named barrier", "NamedBarrier: id 16", func(k *dsl.Kernel) int {
			return at(func() { k.NamedBarrier(16, 64) })
		}},
		{"exp of f16", "Exp is defined for F32", func(k *dsl.Kernel) int {
			v := k.Param("v", dsl.F16)
			return at(func() { v.Exp() })
		}},
		{"bf16 division", "Div is not defined for bf16", func(k *dsl.Kernel) int {
			a := k.Param("a", dsl.BF16)
			return at(func() { a.Div(a) })
		}},
	}
	checkMisuses(t, "dsl/misuse_test.go", cases)
	if len(cases) < 25 {
		t.Fatalf("only %d misuse cases", len(cases))
	}
}

func TestMultimemNeedsSM90(t *testing.T) {
	k := dsl.New("k", dsl.WithTarget(ptx.SM80))
	p := k.PtrParam("p", dsl.F32)
	line := at(func() { k.MultimemLoadReduce(p, dsl.Sum, 4) })
	_, err := k.Build()
	loc := fmt.Sprintf("dsl/misuse_test.go:%d: ", line)
	if err == nil || !strings.Contains(err.Error(), loc) || !strings.Contains(err.Error(), "multimem needs sm_90 or later (target is sm_80)") {
		t.Fatalf("got %v", err)
	}
}

func TestBadKernelName(t *testing.T) {
	_, err := dsl.New("1bad").Build()
	if err == nil || !strings.Contains(err.Error(), "misuse_test.go:") {
		t.Fatalf("got %v", err)
	}
}

func TestBadTarget(t *testing.T) {
	_, err := dsl.New("k", dsl.WithTarget(ptx.Target("sm_1"))).Build()
	if err == nil || !strings.Contains(err.Error(), `unknown target "sm_1"`) {
		t.Fatalf("got %v", err)
	}
}

func TestBuildTwice(t *testing.T) {
	k := dsl.New("k")
	if _, err := k.Build(); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Build(); err == nil || !strings.Contains(err.Error(), "Build called twice") {
		t.Fatalf("got %v", err)
	}
}
