package ref

import (
	"errors"
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
)

func init() {
	registerOwn("swiglu", oneGPU, byElem{f16: swiglu[fp.F16], bf16: swiglu[fp.BF16]}.run)
	registerOwn("swiglu_masked", oneGPU, byElem{f16: swigluMasked[fp.F16], bf16: swigluMasked[fp.BF16]}.run)
}

// swiglu checks kernels.SwiGLU on rows x F (F: Problem.Cols rounded up to a multiple of 8,
// default 24; rows: Size/F) with a device row count of about two thirds of the rows: each
// computed value against silu(g)*u in float64 rounded to the type (one unit of the last
// place: the f32 evaluation may round the other way), the rows past the count and a canary
// row after the end unwritten.
func swiglu[T jit.Elem](r *run) (err error) {
	s, err := openSingle(r)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	dt := r.p.DType
	f := 24
	if r.p.Cols > 0 {
		f = (r.p.Cols + 7) / 8 * 8
	}
	rows := max(1, r.size(1000)/f)
	if err := kernels.SwiGLUCheckShape(rows, f); err != nil {
		return err
	}
	count := rows - rows/3
	gu := r.random(dt, rows*2*f, -6, 6)
	const canary = 3
	init := make([]float64, (rows+1)*f)
	for i := range init {
		init[i] = canary
	}
	pg, po, pc := alloc[T](s, rows*2*f, gu), alloc[T](s, (rows+1)*f, init), alloc[int32](s, 1, nil)
	if s.err == nil {
		s.err = pc.CopyFromHost([]int32{int32(count)})
	}
	r.res.Shape = fmt.Sprintf("rows=%d F=%d count=%d", rows, f, count)
	sh := kernels.SwiGLUShape(rows, f, 4)
	if err := s.launch1(sh, launch.SwiGLU[T]{GateUp: pg, Out: po, Count: pc, Rows: uint32(rows), F: uint32(f), HasCount: 1}); err != nil {
		return err
	}
	got, err := readBack(s, po, (rows+1)*f)
	if err != nil {
		return err
	}
	want := make([]float64, len(got))
	for i := range want {
		row, c := i/f, i%f
		if row >= count {
			want[i] = canary
			continue
		}
		g, u := gu[row*2*f+c], gu[row*2*f+f+c]
		want[i] = round(dt, g/(1+math.Exp(-g))*u)
	}
	atol := 0x1p-126 // f32 flushes below
	if dt == dsl.F16 {
		atol = 0x1p-24 // f16's subnormal spacing
	}
	return r.check("out", got, want, atol, ulpTol(dt, 1))
}

// swigluMasked checks kernels.SwiGLUMasked on rows x F (as swiglu: F from Problem.Cols,
// default 24; rows: Size/F) in the masked layout of min(7, rows) groups at a stride of
// rows/groups, their device counts cycling through the stride, 0, the stride+7 (clamped),
// stride-1, about half the stride and -2 (clamped to 0): each computed value as swiglu's,
// every other row (past a group's count, after the last group's slots, and a canary row
// after the end) unwritten.
func swigluMasked[T jit.Elem](r *run) (err error) {
	s, err := openSingle(r)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	dt := r.p.DType
	f := 24
	if r.p.Cols > 0 {
		f = (r.p.Cols + 7) / 8 * 8
	}
	rows := max(1, r.size(1000)/f)
	groups := min(7, rows)
	stride := rows / groups
	if err := kernels.SwiGLUMaskedCheckShape(rows, f, groups, stride); err != nil {
		return err
	}
	counts := make([]int32, groups)
	valid := make([]bool, rows+1)
	for g := range counts {
		counts[g] = int32([]int{stride, 0, stride + 7, stride - 1, stride/2 + 1, -2}[g%6])
		for i := 0; i < min(max(int(counts[g]), 0), stride); i++ {
			valid[g*stride+i] = true
		}
	}
	gu := r.random(dt, rows*2*f, -6, 6)
	const canary = 3
	init := make([]float64, (rows+1)*f)
	for i := range init {
		init[i] = canary
	}
	pg, po, pc := alloc[T](s, rows*2*f, gu), alloc[T](s, (rows+1)*f, init), alloc[int32](s, groups, nil)
	if s.err == nil {
		s.err = pc.CopyFromHost(counts)
	}
	r.res.Shape = fmt.Sprintf("rows=%d F=%d groups=%d stride=%d counts=%v", rows, f, groups, stride, counts)
	sh := kernels.SwiGLUShape(rows, f, 4)
	if err := s.launch1(sh, launch.SwiGLUMasked[T]{GateUp: pg, Out: po, Counts: pc, Rows: uint32(rows), F: uint32(f), Groups: uint32(groups), Stride: uint32(stride)}); err != nil {
		return err
	}
	got, err := readBack(s, po, (rows+1)*f)
	if err != nil {
		return err
	}
	want := make([]float64, len(got))
	for i := range want {
		row, c := i/f, i%f
		if !valid[row] {
			want[i] = canary
			continue
		}
		g, u := gu[row*2*f+c], gu[row*2*f+f+c]
		want[i] = round(dt, g/(1+math.Exp(-g))*u)
	}
	atol := 0x1p-126 // f32 flushes below
	if dt == dsl.F16 {
		atol = 0x1p-24 // f16's subnormal spacing
	}
	return r.check("out", got, want, atol, ulpTol(dt, 1))
}
