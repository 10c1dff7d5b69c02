package ops

import (
	"context"
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// The row kernels' argument lists (plan.kind).
const (
	rowPlain   = iota // in, out, rows, cols
	rowSplit          // in, out, scratch, rows, cols, parts (co-resident)
	rowStrided        // in, out, rows, cols, ld(s)
)

// Softmax writes out[r, :] = softmax(in[r, :]) for each row of the rows x cols matrix in
// (f32, f16 or bf16; computed in f32). Rows may be strided (a view of a wider matrix, a
// Slice of columns): each row's elements must be contiguous and rows must not overlap. out
// has in's shape and type, may be in itself, and may be strided too.
//
// Dense, 16-byte-aligned matrices run the library's softmax as kernels.ChooseRowKernel picks
// it for the device (softmax_split, several blocks a row, for few long rows); strided ones
// run kernels.SoftmaxStrided (block or warp per row).
func Softmax[T jit.Elem](ctx context.Context, s *jit.Stream, out, in Tensor[T]) error {
	const op = "Softmax"
	d, rows, cols, err := matrixOp(ctx, op, out, in, ptx.F32, ptx.F16, ptx.BF16)
	if err != nil {
		return err
	}
	dt := jit.ElemType[T]()
	if err := sameShape(op, "out", out, "in", in); err != nil {
		return err
	}
	ldIn, err := rowLd(op, "in", in)
	if err != nil {
		return err
	}
	ldOut, err := rowLd(op, "out", out)
	if err != nil {
		return err
	}
	if err := streamOn(op, s, d); err != nil {
		return err
	}
	if err := apart(op, "in", in, "out", out, true); err != nil {
		return err
	}
	st := stateOf(d)
	key := planKey{op: "softmax", in: dt, dims: [3]int{rows, cols}, lds: [4]int{ldIn, ldOut}, target: st.target}
	if aligned16(in) && aligned16(out) {
		key.flags = 1
	}
	p := st.lookup(key)
	if p == nil {
		if p, err = planRows(ctx, st, key, kernels.FamilySoftmax); err != nil {
			return planFailed(op, d, err)
		}
	}
	return launchRows(ctx, op, st, p, s, ptrOf(in), ptrOf(out), ldIn, ldOut)
}

// RowSum writes out[r] = in[r, 0] + ... + in[r, cols-1] (in f32) for each row of the rows x
// cols matrix in (f32, f16 or bf16). Rows may be strided as Softmax's; out is a contiguous
// vector of rows float32.
//
// Dense, 16-byte-aligned matrices run the library's row_sum as kernels.ChooseRowKernel picks
// it (row_sum_split for few long rows); strided ones kernels.RowSumStrided.
func RowSum[T jit.Elem](ctx context.Context, s *jit.Stream, out Tensor[float32], in Tensor[T]) error {
	const op = "RowSum"
	d, rows, cols, err := matrixOp(ctx, op, out, in, ptx.F32, ptx.F16, ptx.BF16)
	if err != nil {
		return err
	}
	dt := jit.ElemType[T]()
	if out.rank != 1 || out.shape[0] != rows {
		return fmt.Errorf("ops: %s: out has shape %v; want [%d] (one sum per row of in)", op, out.Shape(), rows)
	}
	if err := contiguous(op, "out", "row_sum", out); err != nil {
		return err
	}
	ld, err := rowLd(op, "in", in)
	if err != nil {
		return err
	}
	if err := streamOn(op, s, d); err != nil {
		return err
	}
	if err := apart(op, "in", in, "out", out, false); err != nil {
		return err
	}
	st := stateOf(d)
	key := planKey{op: "row_sum", in: dt, dims: [3]int{rows, cols}, lds: [4]int{ld, cols}, target: st.target}
	if aligned16(in) {
		key.flags = 1
	}
	p := st.lookup(key)
	if p == nil {
		if p, err = planRows(ctx, st, key, kernels.FamilyRowSum); err != nil {
			return planFailed(op, d, err)
		}
	}
	return launchRows(ctx, op, st, p, s, ptrOf(in), ptrOf(out), ld, -1)
}

// launchRows launches a row kernel's plan p on rows of in into out: in, out, rows, cols and
// the strided kernels' row strides ldIn (and ldOut, RowSum's -1: none), or the split
// kernels' scratch and parts. The encoded arguments are kept for the next call with the same
// operands and stream.
func launchRows(ctx context.Context, op string, st *devState, p *plan, s *jit.Stream, in, out jit.AnyPtr, ldIn, ldOut int) error {
	lc := jit.LaunchConfig{Grid: jit.D1(p.grid), Block: jit.D1(p.block), Stream: s, Context: ctx, CoResident: p.kind == rowSplit}
	ak := argKey{ptr: [8]jit.DevicePtr{in.Addr, out.Addr}}
	if p.kind == rowSplit {
		ak.s = s
	}
	if enc := p.cached(&ak); enc != nil {
		return launch(op, st.d, p.fn, lc, enc)
	}
	rows, cols := uint32(p.rows), uint32(p.cols)
	var args []any
	switch p.kind {
	case rowSplit:
		sc, err := st.scratchFor(s, p.split.ScratchWords)
		if err != nil {
			return planFailed(op, st.d, err)
		}
		args = []any{in, out, sc, rows, cols, uint32(p.split.Parts)}
	case rowStrided:
		args = []any{in, out, rows, cols, uint32(ldIn)}
		if ldOut >= 0 {
			args = append(args, uint32(ldOut))
		}
	default:
		args = []any{in, out, rows, cols}
	}
	return p.first(op, st.d, lc, &ak, args)
}

// planRows chooses and loads the row kernel of family f (FamilySoftmax or FamilyRowSum) for
// key: the library's kernel (ChooseRowKernel) for dense aligned rows, else the strided one.
func planRows(ctx context.Context, st *devState, key planKey, f kernels.Family) (*plan, error) {
	rows, cols := key.dims[0], key.dims[1]
	// The strided kernels step through rows and columns in u32 as the library's do.
	if err := kernels.CheckRowShape(rows, cols); err != nil {
		return nil, fmt.Errorf("in is %d x %d: %w", rows, cols, err)
	}
	dt := dsl.Type(key.in)
	dense := key.lds[0] == cols && key.lds[1] == cols && key.flags == 1
	p := &plan{rows: rows, cols: cols}
	if dense {
		rl, err := kernels.ChooseRowKernel(f, dt, rows, cols, max(st.d.Info().Multiproc, 1))
		if err != nil {
			return nil, err
		}
		if p.fn, p.name, err = st.registered(ctx, rl.ID, key.target); err != nil {
			return nil, err
		}
		p.grid, p.block = rl.Grid, rl.Block
		if rl.Split {
			p.kind, p.split, p.coResident = rowSplit, rl.SplitShape, true
		}
	} else {
		sh := kernels.SoftmaxShape(rows, cols)
		name := fmt.Sprintf("softmax_strided_%s", dt)
		write := func(k *dsl.Kernel) { kernels.SoftmaxStrided(k, dt); k.LaunchBounds(1024, 0) }
		if f == kernels.FamilyRowSum {
			sh = kernels.RowSumShape(rows, cols)
			name = fmt.Sprintf("row_sum_strided_%s", dt)
			write = func(k *dsl.Kernel) { kernels.RowSumStrided(k, dt); k.LaunchBounds(1024, 0) }
		}
		fn, err := st.function(ctx, name, key.target, write)
		if err != nil {
			return nil, err
		}
		p.fn, p.name, p.grid, p.block, p.kind = fn, name, sh.Grid, sh.Block, rowStrided
	}
	st.store(key, p)
	return p, nil
}
