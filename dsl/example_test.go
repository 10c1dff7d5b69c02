package dsl_test

import (
	"fmt"
	"strings"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// body returns the instructions of the module's kernel, one per line.
func body(m *ptx.Module) string {
	var out []string
	for _, in := range m.Funcs[len(m.Funcs)-1].Body {
		out = append(out, ptx.FormatInstr(in))
	}
	return strings.Join(out, "\n")
}

// A kernel is Go code: parameters, indices, typed arithmetic and a runtime If.
func ExampleNew() {
	k := dsl.New("scale", dsl.WithTarget(ptx.SM90), dsl.WithoutLoc())
	x := k.PtrParam("x", dsl.F32)
	n := k.Param("n", dsl.U32)
	i := k.GlobalThreadIdx(dsl.X)
	k.If(i.Lt(n), func() {
		k.Store(x.At(i), k.Load(x.At(i)).Mul(2.0))
	})
	m, err := k.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(body(m))
	// Output:
	// ld.param.u64 %ud0, [x];
	// cvta.to.global.u64 %ud1, %ud0;
	// ld.param.u32 %u0, [n];
	// mov.u32 %u1, %ctaid.x;
	// mov.u32 %u2, %ntid.x;
	// mov.u32 %u3, %tid.x;
	// mad.lo.u32 %u4, %u1, %u2, %u3;
	// setp.lt.u32 %p0, %u4, %u0;
	// @!%p0 bra $L__scale_1;
	// mul.wide.u32 %ud2, %u4, 4;
	// add.s64 %ud3, %ud1, %ud2;
	// ld.global.f32 %f0, [%ud3];
	// mul.f32 %f1, %f0, 0f40000000;
	// st.global.f32 [%ud3], %f1;
	// $L__scale_1:
	// ret;
}

// Misuse is recorded with the Go source line and returned by Build, never panicked.
func ExampleKernel_Build() {
	k := dsl.New("bad")
	a := k.Param("a", dsl.F32)
	b := k.Param("b", dsl.I32)
	a.Add(b) // a type mismatch: no implicit conversions
	_, err := k.Build()
	fmt.Println(strings.Contains(err.Error(), "dsl/example_test.go:"), strings.Contains(err.Error(), "type mismatch: f32 and s32"))
	// Output: true true
}

// A partition of a tile over 128 threads with 4 values per thread gives each thread 4
// consecutive floats, which Copy moves with one 128-bit access.
func ExampleTensor_LocalPartition() {
	k := dsl.New("copy4", dsl.WithoutLoc())
	src := k.MakeTensor(k.PtrParam("src", dsl.F32), layout.MustParse("512:1"))
	dst := k.MakeTensor(k.PtrParam("dst", dsl.F32), layout.MustParse("512:1"))
	thr := layout.MustParse("128:1") // 128 threads
	tid := k.ThreadIdx(dsl.X)
	frag := k.Fragment(dsl.F32, src.LocalPartition(thr, tid, 4))
	k.Copy(src.LocalPartition(thr, tid, 4), frag)
	k.Copy(frag, dst.LocalPartition(thr, tid, 4))
	m, err := k.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, line := range strings.Split(body(m), "\n") {
		if strings.Contains(line, ".v4.") {
			fmt.Println(line)
		}
	}
	// Output:
	// ld.global.v4.f32 {%f0, %f1, %f2, %f3}, [%ud4];
	// st.global.v4.f32 [%ud5], {%f0, %f1, %f2, %f3};
}

// Go control flow runs at build time: this loop unrolls into four loads.
func ExampleKernel_For() {
	k := dsl.New("sum", dsl.WithoutLoc())
	p := k.PtrParam("p", dsl.F32)
	n := k.Param("n", dsl.U32)
	acc := k.Var(dsl.F32, 0.0)
	for j := 0; j < 4; j++ { // compile time: unrolled
		k.Set(acc, acc.Add(k.Load(p.At(j))))
	}
	k.For(4, n, 1, func(j dsl.Value) { // run time: a loop in the PTX
		k.Set(acc, acc.Add(k.Load(p.At(j))))
	})
	k.Store(p, acc)
	m, _ := k.Build()
	fmt.Println(strings.Count(body(m), "ld.global.f32"), strings.Count(body(m), "bra.uni"))
	// Output: 5 1
}

// VectorAddArgs declares vector_add's parameters once: pointers to the element type, and a
// u32 length.
type VectorAddArgs struct {
	A, B, C dsl.Ptr
	N       dsl.Value `kgen:"u32"`
}

// Params declares a kernel's parameters from a struct, in field order.
func ExampleParams() {
	k := dsl.New("vector_add_f32", dsl.WithoutLoc())
	a := dsl.Params[VectorAddArgs](k, dsl.F32)
	i := k.GlobalThreadIdx(dsl.X)
	k.If(i.Lt(a.N), func() {
		k.Store(a.C.At(i), k.Load(a.A.At(i)).Add(k.Load(a.B.At(i))))
	})
	if _, err := k.Build(); err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range k.Params() {
		fmt.Println(p.Name, p.Type, p.Pointer)
	}
	// Output:
	// a f32 true
	// b f32 true
	// c f32 true
	// n u32 false
}
