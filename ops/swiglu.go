package ops

import (
	"context"
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// SwiGLUOptions are SwiGLU's less common settings; nil computes every row.
type SwiGLUOptions struct {
	// Rows, when set, is a one-element int32 tensor on the device holding a row count: only
	// the first min(rows, max(Rows[0], 0)) rows are computed and the others of out are not
	// written. An MoE dispatch's received rows, Offsets[experts] (a Narrow of the offsets),
	// is such a count: the call then costs the rows received, not the capacity, with no host
	// round trip.
	Rows Tensor[int32]
	// Counts and Stride, when Counts is set, select the masked layout (an MoE low-latency
	// dispatch's, as ops.GroupedMatmulOptions.Counts): group g's rows are g*Stride <= r <
	// g*Stride + Counts[g] for g < len(Counts), and only those are computed (the call costs
	// the rows counted, not len(Counts)*Stride) and written. Counts is [groups] int32 on the
	// device (at most kernels.SwiGLUMaxGroups), each clamped to [0, Stride] by the kernel
	// (device data is not checked on the host); Stride is positive and Stride*groups at most
	// the rows. Rows must then be unset.
	Counts Tensor[int32]
	Stride int
}

// SwiGLU writes out[r, c] = silu(gateUp[r, c]) * gateUp[r, F+c], the gated activation of a
// feed-forward block (kernels.SwiGLU): gateUp is [rows, 2F], each row its F gate values
// then its F up values (x times the stacked [W1 | W3] weights, [K, 2F]: gate columns
// first), out is [rows, F]; bf16 or f16, computed in f32 and rounded once. F is a multiple
// of 8; both tensors are contiguous, start on 16 bytes and do not share memory. With
// Options.Counts it runs swiglu_masked (kernels.SwiGLUMasked) over the masked layout's
// counted rows only.
func SwiGLU[T jit.Elem](ctx context.Context, s *jit.Stream, out, gateUp Tensor[T], o *SwiGLUOptions) error {
	const op = "SwiGLU"
	d, rows, f2, err := matrixOp(ctx, op, out, gateUp, ptx.BF16, ptx.F16)
	if err != nil {
		return err
	}
	if f2%2 != 0 {
		return fmt.Errorf("ops: %s: gateUp has %d columns; want 2F (F gate columns, then F up columns)", op, f2)
	}
	f := f2 / 2
	if out.rank != 2 || out.shape[0] != rows || out.shape[1] != f {
		return fmt.Errorf("ops: %s: out has shape %v; want [%d %d] (gateUp's rows, half its columns)", op, out.Shape(), rows, f)
	}
	if err := kernels.SwiGLUCheckShape(rows, f); err != nil {
		return fmt.Errorf("ops: %s: gateUp is %d x %d: %w", op, rows, f2, err)
	}
	for _, x := range []struct {
		name string
		t    Tensor[T]
	}{{"gateUp", gateUp}, {"out", out}} {
		if err := contiguous(op, x.name, "swiglu", x.t); err != nil {
			return err
		}
		if err := need16(op, x.name, "swiglu", x.t); err != nil {
			return err
		}
	}
	if o != nil && o.Counts.buf != nil {
		return swigluMasked(ctx, s, d, out, gateUp, rows, f, o)
	}
	if o != nil && o.Stride != 0 {
		return fmt.Errorf("ops: %s: SwiGLUOptions.Stride %d without Counts: the masked layout takes both (Counts: the groups' row counts)", op, o.Stride)
	}
	count, has := jit.AnyPtr{Elem: ptx.S32}, uint32(0)
	if o != nil && o.Rows.buf != nil {
		if err := sameDevice(op, "Rows", d, o.Rows); err != nil {
			return err
		}
		if o.Rows.rank != 1 || o.Rows.shape[0] != 1 {
			return fmt.Errorf("ops: %s: Rows has shape %v; want [1] (one row count)", op, o.Rows.Shape())
		}
		if err := apart(op, "Rows", o.Rows, "out", out, false); err != nil {
			return err
		}
		count, has = ptrOf(o.Rows), 1
	}
	ak := argKey{ptr: [8]jit.DevicePtr{gateUp.Ptr(), out.Ptr(), count.Addr}, scalar: [2]uint64{uint64(has)}}
	return swigluLaunch(ctx, s, d, out, gateUp, kernels.FamilySwiGLU, rows, f, ak, func() []any {
		return []any{ptrOf(gateUp), ptrOf(out), count, uint32(rows), uint32(f), has}
	})
}

// swigluLaunch launches SwiGLU's kernel of family fam (swiglu or swiglu_masked) over rows x
// f outputs on stream s, its plan cached per (family, type, shape, target) and its
// arguments (args) per argument key ak.
func swigluLaunch[T jit.Elem](ctx context.Context, s *jit.Stream, d *jit.Device, out, gateUp Tensor[T], fam kernels.Family, rows, f int, ak argKey, args func() []any) error {
	const op = "SwiGLU"
	if err := streamOn(op, s, d); err != nil {
		return err
	}
	if err := apart(op, "gateUp", gateUp, "out", out, false); err != nil {
		return err
	}
	dt := jit.ElemType[T]()
	st := stateOf(d)
	key := planKey{op: string(fam), in: dt, dims: [3]int{rows, f}, target: st.target}
	p := st.lookup(key)
	if p == nil {
		fn, name, err := st.registered(ctx, kernels.ID{Family: fam, DType: dsl.Type(dt)}, key.target)
		if err != nil {
			return planFailed(op, d, err)
		}
		sh := kernels.SwiGLUShape(rows, f, d.Info().Multiproc)
		p = &plan{fn: fn, name: name, grid: sh.Grid, block: sh.Block}
		st.store(key, p)
	}
	lc := jit.LaunchConfig{Grid: jit.D1(p.grid), Block: jit.D1(p.block), Stream: s, Context: ctx}
	if enc := p.cached(&ak); enc != nil {
		return launch(op, d, p.fn, lc, enc)
	}
	return p.first(op, d, lc, &ak, args())
}

// swigluMasked is SwiGLU over the masked layout of o.Counts and o.Stride (the shapes and
// the tensors' layout already checked).
func swigluMasked[T jit.Elem](ctx context.Context, s *jit.Stream, d *jit.Device, out, gateUp Tensor[T], rows, f int, o *SwiGLUOptions) error {
	const op = "SwiGLU"
	if o.Rows.buf != nil {
		return fmt.Errorf("ops: %s: SwiGLUOptions.Rows and Counts are both set: the masked layout (Counts, Stride) takes no row count", op)
	}
	if err := sameDevice(op, "Counts", d, o.Counts); err != nil {
		return err
	}
	if o.Counts.rank != 1 {
		return fmt.Errorf("ops: %s: Counts has shape %v; want [groups] (one row count per group)", op, o.Counts.Shape())
	}
	groups := o.Counts.shape[0]
	if err := kernels.SwiGLUMaskedCheckShape(rows, f, groups, o.Stride); err != nil {
		return fmt.Errorf("ops: %s: SwiGLUOptions.Counts %v and Stride %d over %d rows: %w", op, o.Counts.Shape(), o.Stride, rows, err)
	}
	if err := contiguous(op, "Counts", "swiglu_masked", o.Counts); err != nil {
		return err
	}
	if err := apart(op, "Counts", o.Counts, "out", out, false); err != nil {
		return err
	}
	ak := argKey{ptr: [8]jit.DevicePtr{gateUp.Ptr(), out.Ptr(), o.Counts.Ptr()}, scalar: [2]uint64{uint64(groups), uint64(o.Stride)}}
	return swigluLaunch(ctx, s, d, out, gateUp, kernels.FamilySwiGLUMasked, rows, f, ak, func() []any {
		return []any{ptrOf(gateUp), ptrOf(out), ptrOf(o.Counts), uint32(rows), uint32(f), uint32(groups), uint32(o.Stride)}
	})
}
