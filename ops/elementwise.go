package ops

import (
	"context"
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// Add writes out = a + b element by element (f32 or f16; kernels.VectorAdd). The three
// tensors have one shape and are contiguous and 16-byte aligned (the kernel moves 128-bit
// vectors); out may be a or b, but not share part of their memory.
func Add[T jit.Elem](ctx context.Context, s *jit.Stream, out, a, b Tensor[T]) error {
	const op = "Add"
	d, n, err := streamOperands(ctx, op, "vector_add", out, a, b)
	if err != nil {
		return err
	}
	if err := streamOn(op, s, d); err != nil {
		return err
	}
	if err := apart(op, "a", a, "out", out, true); err != nil {
		return err
	}
	if err := apart(op, "b", b, "out", out, true); err != nil {
		return err
	}
	p, err := streamPlan(ctx, d, "vector_add", jit.ElemType[T](), n)
	if err != nil {
		return planFailed(op, d, err)
	}
	lc := jit.LaunchConfig{Grid: jit.D1(p.grid), Block: jit.D1(p.block), Stream: s, Context: ctx}
	ak := argKey{ptr: [8]jit.DevicePtr{a.Ptr(), b.Ptr(), out.Ptr()}}
	if enc := p.cached(&ak); enc != nil {
		return launch(op, d, p.fn, lc, enc)
	}
	return p.first(op, d, lc, &ak, []any{ptrOf(a), ptrOf(b), ptrOf(out), uint32(n)})
}

// Axpy computes y = alpha*x + y element by element (f32 or f16, one rounding; kernels.Axpy):
// y is the output and an input. x and y have one shape and are contiguous and 16-byte
// aligned; x may be y itself, but not share part of its memory.
func Axpy[T jit.Elem](ctx context.Context, s *jit.Stream, y, x Tensor[T], alpha T) error {
	const op = "Axpy"
	d, n, err := streamOperands(ctx, op, "axpy", y, x)
	if err != nil {
		return err
	}
	if err := streamOn(op, s, d); err != nil {
		return err
	}
	if err := apart(op, "x", x, "y", y, true); err != nil {
		return err
	}
	p, err := streamPlan(ctx, d, "axpy", jit.ElemType[T](), n)
	if err != nil {
		return planFailed(op, d, err)
	}
	lc := jit.LaunchConfig{Grid: jit.D1(p.grid), Block: jit.D1(p.block), Stream: s, Context: ctx}
	ak := argKey{ptr: [8]jit.DevicePtr{x.Ptr(), y.Ptr()}, scalar: [2]uint64{bitsOf(alpha)}}
	if enc := p.cached(&ak); enc != nil {
		return launch(op, d, p.fn, lc, enc)
	}
	return p.first(op, d, lc, &ak, []any{alpha, ptrOf(x), ptrOf(y), uint32(n)})
}

// streamOperands checks an element-wise op's operands (the first is the output) and returns
// their device and element count.
func streamOperands[T jit.Elem](ctx context.Context, op, kernel string, ts ...Tensor[T]) (*jit.Device, int, error) {
	if err := begin(ctx, op); err != nil {
		return nil, 0, err
	}
	names := []string{"out", "a", "b"}
	if op == "Axpy" {
		names = []string{"y", "x"}
	}
	if err := dtypeIn(op, names[0], jit.ElemType[T](), ptx.F32, ptx.F16); err != nil {
		return nil, 0, err
	}
	d, err := deviceOf(op, names[0], ts[0])
	if err != nil {
		return nil, 0, err
	}
	for i, t := range ts {
		if err := sameDevice(op, names[i], d, t); err != nil {
			return nil, 0, err
		}
		if err := sameShape(op, names[i], t, names[0], ts[0]); err != nil {
			return nil, 0, err
		}
		if err := contiguous(op, names[i], kernel, t); err != nil {
			return nil, 0, err
		}
		if err := need16(op, names[i], kernel, t); err != nil {
			return nil, 0, err
		}
	}
	n := ts[0].Len()
	if n > math.MaxUint32 {
		return nil, 0, fmt.Errorf("ops: %s: %d elements: %s takes fewer than 2^32", op, n, kernel)
	}
	return d, n, nil
}

// streamPlan is the plan of vector_add or axpy for n elements of dt.
func streamPlan(ctx context.Context, d *jit.Device, family string, dt ptx.Type, n int) (*plan, error) {
	st := stateOf(d)
	key := planKey{op: family, in: dt, dims: [3]int{n}, target: st.target}
	if p := st.lookup(key); p != nil {
		return p, nil
	}
	fn, name, err := st.registered(ctx, kernels.ID{Family: kernels.Family(family), DType: dsl.Type(dt)}, key.target)
	if err != nil {
		return nil, err
	}
	sh := kernels.StreamShape(n, dsl.Type(dt))
	p := &plan{fn: fn, name: name, grid: sh.Grid, block: sh.Block}
	st.store(key, p)
	return p, nil
}

// Transpose writes out = in^T for a rows x cols matrix in (f32 or f16; kernels.Transpose):
// out is cols x rows. Both are contiguous row-major and 16-byte aligned, and do not share
// memory (no transpose in place). (A transposed view costs nothing: Tensor.Transpose; this
// op moves the elements.)
func Transpose[T jit.Elem](ctx context.Context, s *jit.Stream, out, in Tensor[T]) error {
	const op = "Transpose"
	d, m, n, err := matrixOp(ctx, op, out, in, ptx.F32, ptx.F16)
	if err != nil {
		return err
	}
	dt := jit.ElemType[T]()
	if out.rank != 2 || out.shape[0] != n || out.shape[1] != m {
		return fmt.Errorf("ops: %s: out has shape %v; want [%d %d] (in's transposed)", op, out.Shape(), n, m)
	}
	if err := contiguous(op, "in", "transpose", in); err != nil {
		return err
	}
	if err := contiguous(op, "out", "transpose", out); err != nil {
		return err
	}
	if err := need16(op, "in", "transpose", in); err != nil {
		return err
	}
	if err := need16(op, "out", "transpose", out); err != nil {
		return err
	}
	if err := kernels.TransposeCheckShape(m, n); err != nil {
		return fmt.Errorf("ops: %s: in: %w", op, err)
	}
	const maxGridY = 65535
	if (m+31)/32 > maxGridY {
		return fmt.Errorf("ops: %s: in has %d rows: transpose's grid takes at most %d (65535 tiles of 32 along y)", op, m, maxGridY*32)
	}
	if err := streamOn(op, s, d); err != nil {
		return err
	}
	if err := apart(op, "in", in, "out", out, false); err != nil {
		return err
	}
	st := stateOf(d)
	key := planKey{op: "transpose", in: dt, dims: [3]int{m, n}, target: st.target}
	p := st.lookup(key)
	if p == nil {
		fn, name, err := st.registered(ctx, kernels.ID{Family: kernels.FamilyTranspose, DType: dsl.Type(dt)}, key.target)
		if err != nil {
			return planFailed(op, d, err)
		}
		p = &plan{fn: fn, name: name, block: 256}
		st.store(key, p)
	}
	lc := jit.LaunchConfig{Grid: jit.Dim3{X: (n + 31) / 32, Y: (m + 31) / 32, Z: 1}, Block: jit.D1(p.block), Stream: s, Context: ctx}
	ak := argKey{ptr: [8]jit.DevicePtr{in.Ptr(), out.Ptr()}}
	if enc := p.cached(&ak); enc != nil {
		return launch(op, d, p.fn, lc, enc)
	}
	return p.first(op, d, lc, &ak, []any{ptrOf(in), ptrOf(out), uint32(m), uint32(n)})
}
