// Package dist runs a collectives.Comm's collectives and fused matmuls on ops tensors.
//
// The Comm's kernels reach every GPU's copy of their operands through NVSHMEM's symmetric
// memory, so each tensor a call takes must be a Comm buffer (collectives.Comm.Alloc), viewed
// whole: Alloc makes one and returns it as a tensor, Tensor views an existing one. Such a
// tensor is an ordinary ops.Tensor: ops calls (Matmul, Softmax, ...) read and write it too.
//
//	x, _, _ := dist.Alloc[fp.BF16](ctx, comm, tokens, hidden) // symmetric, on every GPU
//	ops.Matmul(ctx, nil, x, h, w2, nil)                       // this GPU's partial product
//	dist.AllReduce(ctx, comm, x, collectives.Sum)             // summed over the GPUs
//
// The calls check shapes and dtypes from the tensors, then run the Comm's Buffer call
// (the same kernels, the same algorithm choice); they are collective like it: every rank
// makes the same calls in the same order. They run on the Comm's stream
// (collectives.Options.Stream, nil: the default stream): give ops calls that produce or
// consume the tensors the same stream, or order the streams.
//
// MoELayer runs a whole expert-parallel MoE layer (dispatch, the experts' grouped GEMMs and
// SwiGLU, combine) with no host step between them (docs/moe.md, "The whole layer").
package dist

import (
	"context"
	"fmt"
	"slices"

	"github.com/kgen-dev/kgen/collectives"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ops"
	"github.com/kgen-dev/kgen/ptx"
)

// Alloc allocates a symmetric buffer of T on every GPU of c (collective: every rank calls
// it; collectives.Comm.AllocContext) and returns it as a row-major tensor of shape, with
// the buffer (Free it, collectively, when done).
func Alloc[T jit.Elem](ctx context.Context, c *collectives.Comm, shape ...int) (ops.Tensor[T], *collectives.Buffer, error) {
	if c == nil {
		return ops.Tensor[T]{}, nil, fmt.Errorf("dist: Alloc: nil Comm")
	}
	if len(shape) < 1 || len(shape) > ops.MaxRank {
		return ops.Tensor[T]{}, nil, fmt.Errorf("dist: Alloc: rank %d: want 1 to %d dimensions", len(shape), ops.MaxRank)
	}
	n := 1
	for _, s := range shape {
		if s < 1 || n > (1<<31-1)/s {
			return ops.Tensor[T]{}, nil, fmt.Errorf("dist: Alloc: shape %v: want extents of at least 1, below 2^31 elements in all", shape)
		}
		n *= s
	}
	b, err := c.AllocContext(ctx, jit.ElemType[T](), n)
	if err != nil {
		return ops.Tensor[T]{}, nil, err
	}
	t, err := Tensor[T](b, shape...)
	if err != nil {
		return ops.Tensor[T]{}, nil, err
	}
	return t, b, nil
}

// Tensor returns b as a row-major tensor of shape (default [b.Len()]) over the same
// memory: this GPU's copy. T must be b's element type and shape hold b.Len() elements.
func Tensor[T jit.Elem](b *collectives.Buffer, shape ...int) (ops.Tensor[T], error) {
	if b == nil {
		return ops.Tensor[T]{}, fmt.Errorf("dist: Tensor: nil buffer")
	}
	if dt := jit.ElemType[T](); b.DType() != dt {
		return ops.Tensor[T]{}, fmt.Errorf("dist: Tensor: a tensor of %s over a buffer of %s: the element types must match", dt, b.DType())
	}
	m := b.Memory()
	if m == nil {
		return ops.Tensor[T]{}, fmt.Errorf("dist: Tensor: the buffer was freed, or its Comm closed")
	}
	jb, err := jit.BufferOf[T](m, b.Len())
	if err != nil {
		return ops.Tensor[T]{}, fmt.Errorf("dist: Tensor: %w", err)
	}
	if len(shape) == 0 {
		shape = []int{b.Len()}
	}
	t, err := ops.New(jb, shape...)
	if err != nil {
		return ops.Tensor[T]{}, fmt.Errorf("dist: Tensor: %w", err)
	}
	if t.Len() != b.Len() {
		return ops.Tensor[T]{}, fmt.Errorf("dist: Tensor: shape %v holds %d elements; the buffer %d: a tensor views its whole buffer", shape, t.Len(), b.Len())
	}
	return t, nil
}

// bufferOf returns the Comm buffer t views whole, or an error naming the operand and the
// rule.
func bufferOf[T jit.Elem](c *collectives.Comm, op, name string, t ops.Tensor[T]) (*collectives.Buffer, error) {
	if c == nil {
		return nil, fmt.Errorf("dist: %s: nil Comm", op)
	}
	jb := t.Buffer()
	if jb == nil || t.Rank() == 0 {
		return nil, fmt.Errorf("dist: %s: %s is the zero Tensor", op, name)
	}
	if jb.Freed() {
		return nil, fmt.Errorf("dist: %s: %s: its buffer was freed", op, name)
	}
	b, err := c.BufferOf(jb.Memory())
	if err != nil {
		return nil, fmt.Errorf("dist: %s: %s: %w; make it with dist.Alloc or dist.Tensor", op, name, err)
	}
	if dt := jit.ElemType[T](); b.DType() != dt {
		// A view of another type of the same size (jit.BufferOf): the collective would run on
		// the buffer's type, reading this one's bits as that.
		return nil, fmt.Errorf("dist: %s: %s is a tensor of %s over a Comm buffer of %s: the element types must match (make it with dist.Tensor)", op, name, dt, b.DType())
	}
	if t.Offset() != 0 || !t.IsContiguous() || t.Len() != b.Len() {
		return nil, fmt.Errorf("dist: %s: %s (shape %v, strides %v, offset %d) must be its whole Comm buffer of %d elements, contiguous from element 0: the collectives work on whole buffers",
			op, name, t.Shape(), t.Strides(), t.Offset(), b.Len())
	}
	return b, nil
}

// AllReduce reduces t over every GPU of c with op, in place (collectives.Comm.AllReduce).
func AllReduce[T jit.Elem](ctx context.Context, c *collectives.Comm, t ops.Tensor[T], op collectives.Op) error {
	return AllReduceTo(ctx, c, t, t, op)
}

// AllReduceTo writes the reduction by op of every GPU's src into every GPU's dst
// (collectives.Comm.AllReduceTo): dst has src's shape; it may be src.
func AllReduceTo[T jit.Elem](ctx context.Context, c *collectives.Comm, dst, src ops.Tensor[T], op collectives.Op) error {
	const what = "AllReduce"
	d, s, err := pair(ctx, c, what, dst, src)
	if err != nil {
		return err
	}
	if !slices.Equal(dst.Shape(), src.Shape()) {
		return fmt.Errorf("dist: %s: dst has shape %v, src %v: they must match", what, dst.Shape(), src.Shape())
	}
	return c.AllReduceTo(ctx, d, s, op)
}

// ReduceScatter writes into GPU r's dst the reduction by op over the GPUs of part r of src
// (collectives.Comm.ReduceScatter): src is NumGPUs parts of dst's shape stacked along
// dimension 0 ([g*d0, d1, ...] for dst [d0, d1, ...]), in another buffer.
func ReduceScatter[T jit.Elem](ctx context.Context, c *collectives.Comm, dst, src ops.Tensor[T], op collectives.Op) error {
	const what = "ReduceScatter"
	d, s, err := pair(ctx, c, what, dst, src)
	if err != nil {
		return err
	}
	if err := stacked(what, "src", src, "dst", dst, c.NumGPUs()); err != nil {
		return err
	}
	return c.ReduceScatter(ctx, d, s, op)
}

// AllGather writes every GPU r's src into part r of every GPU's dst
// (collectives.Comm.AllGather): dst is NumGPUs parts of src's shape stacked along dimension
// 0, in another buffer.
func AllGather[T jit.Elem](ctx context.Context, c *collectives.Comm, dst, src ops.Tensor[T]) error {
	const what = "AllGather"
	d, s, err := pair(ctx, c, what, dst, src)
	if err != nil {
		return err
	}
	if err := stacked(what, "dst", dst, "src", src, c.NumGPUs()); err != nil {
		return err
	}
	return c.AllGather(ctx, d, s)
}

// AllGatherMatmul computes out = A * b on every GPU, A being every GPU's row slice a
// stacked in rank order (collectives.Comm.AllGatherMatmul): a is [M/NumGPUs, K], b [K, N],
// out [M, N], row-major; a and b f16 or bf16, out f16, bf16 or f32.
func AllGatherMatmul[TI, TO jit.Elem](ctx context.Context, c *collectives.Comm, out ops.Tensor[TO], a, b ops.Tensor[TI]) error {
	const what = "AllGatherMatmul"
	ab, bb, ob, m, n, k, err := matmulOperands(ctx, c, what, out, a, b)
	if err != nil {
		return err
	}
	if g := c.NumGPUs(); m != out.Dim(0)/g || out.Dim(0)%g != 0 {
		return fmt.Errorf("dist: %s: a has %d rows, out %d: out's rows must be the %d GPUs' rows of a (M = %d x a's rows)", what, m, out.Dim(0), g, g)
	}
	return c.AllGatherMatmul(ctx, ab, bb, ob, collectives.MatmulShape{M: out.Dim(0), N: n, K: k})
}

// MatmulReduceScatter computes the sum over GPUs of A_g * B_g and leaves its row slice r in
// GPU r's out (collectives.Comm.MatmulReduceScatter): a is [M, K] (this GPU's K slice), b
// [K, N], out [M/NumGPUs, N], row-major; types as AllGatherMatmul.
func MatmulReduceScatter[TI, TO jit.Elem](ctx context.Context, c *collectives.Comm, out ops.Tensor[TO], a, b ops.Tensor[TI]) error {
	const what = "MatmulReduceScatter"
	ab, bb, ob, m, n, k, err := matmulOperands(ctx, c, what, out, a, b)
	if err != nil {
		return err
	}
	if g := c.NumGPUs(); out.Dim(0)*g != m {
		return fmt.Errorf("dist: %s: a has %d rows, out %d: out holds this GPU's slice of M/%d rows", what, m, out.Dim(0), g)
	}
	return c.MatmulReduceScatter(ctx, ab, bb, ob, collectives.MatmulShape{M: m, N: n, K: k})
}

// MatmulAllReduce computes the sum over GPUs of A_g * B_g into every GPU's out
// (collectives.Comm.MatmulAllReduce): a is [M, K] (this GPU's K slice), b [K, N], out [M,
// N], row-major; types as AllGatherMatmul.
func MatmulAllReduce[TI, TO jit.Elem](ctx context.Context, c *collectives.Comm, out ops.Tensor[TO], a, b ops.Tensor[TI]) error {
	const what = "MatmulAllReduce"
	ab, bb, ob, m, n, k, err := matmulOperands(ctx, c, what, out, a, b)
	if err != nil {
		return err
	}
	if out.Dim(0) != m {
		return fmt.Errorf("dist: %s: a has %d rows, out %d: they must match (M)", what, m, out.Dim(0))
	}
	return c.MatmulAllReduce(ctx, ab, bb, ob, collectives.MatmulShape{M: m, N: n, K: k})
}

// matmulOperands checks a fused matmul's operands: ctx, the types, each a whole Comm
// buffer, 2-D, b's rows K and out's columns N. It returns the buffers and a's rows, N and K.
func matmulOperands[TI, TO jit.Elem](ctx context.Context, c *collectives.Comm, what string, out ops.Tensor[TO], a, b ops.Tensor[TI]) (ab, bb, ob *collectives.Buffer, m, n, k int, err error) {
	if ctx == nil {
		return nil, nil, nil, 0, 0, 0, fmt.Errorf("dist: %s: nil context", what)
	}
	if err := dtypeOK(what, "a", jit.ElemType[TI](), true); err != nil {
		return nil, nil, nil, 0, 0, 0, err
	}
	if dt := jit.ElemType[TO](); dt != ptx.F16 && dt != ptx.BF16 && dt != ptx.F32 {
		return nil, nil, nil, 0, 0, 0, fmt.Errorf("dist: %s: out has element type %s; want one of [f16 bf16 f32]", what, dt)
	}
	if ab, err = bufferOf(c, what, "a", a); err != nil {
		return nil, nil, nil, 0, 0, 0, err
	}
	if bb, err = bufferOf(c, what, "b", b); err != nil {
		return nil, nil, nil, 0, 0, 0, err
	}
	if ob, err = bufferOf(c, what, "out", out); err != nil {
		return nil, nil, nil, 0, 0, 0, err
	}
	for _, x := range []struct {
		name  string
		shape []int
	}{{"a", a.Shape()}, {"b", b.Shape()}, {"out", out.Shape()}} {
		if len(x.shape) != 2 {
			return nil, nil, nil, 0, 0, 0, fmt.Errorf("dist: %s: %s has shape %v; want a 2-D row-major matrix", what, x.name, x.shape)
		}
	}
	m, k, n = a.Dim(0), a.Dim(1), b.Dim(1)
	if b.Dim(0) != k {
		return nil, nil, nil, 0, 0, 0, fmt.Errorf("dist: %s: a is %d x %d, b %d x %d: b's rows must match a's columns (K)", what, m, k, b.Dim(0), n)
	}
	if out.Dim(1) != n {
		return nil, nil, nil, 0, 0, 0, fmt.Errorf("dist: %s: out is %d x %d, b %d x %d: out's columns must match b's (N)", what, out.Dim(0), out.Dim(1), k, n)
	}
	return ab, bb, ob, m, n, k, nil
}

// dtypeOK checks an operand's element type: the collectives' (f32, f16, bf16, s32, and
// fp8 where the Comm runs it), or the fused matmuls' inputs (f16, bf16).
func dtypeOK(what, name string, dt ptx.Type, matmul bool) error {
	want := []ptx.Type{ptx.F32, ptx.F16, ptx.BF16, ptx.S32, ptx.E4M3, ptx.E5M2}
	if matmul {
		want = []ptx.Type{ptx.F16, ptx.BF16}
	}
	for _, w := range want {
		if dt == w {
			return nil
		}
	}
	return fmt.Errorf("dist: %s: %s has element type %s; want one of %v", what, name, dt, want)
}

// pair checks a collective's ctx and element type and resolves its dst and src (the same
// buffer when they view the same one).
func pair[T jit.Elem](ctx context.Context, c *collectives.Comm, what string, dst, src ops.Tensor[T]) (d, s *collectives.Buffer, err error) {
	if ctx == nil {
		return nil, nil, fmt.Errorf("dist: %s: nil context", what)
	}
	if err := dtypeOK(what, "src", jit.ElemType[T](), false); err != nil {
		return nil, nil, err
	}
	if d, err = bufferOf(c, what, "dst", dst); err != nil {
		return nil, nil, err
	}
	if s, err = bufferOf(c, what, "src", src); err != nil {
		return nil, nil, err
	}
	return d, s, nil
}

// stacked checks that big is g copies of small's shape along dimension 0.
func stacked[T jit.Elem](what, bn string, big ops.Tensor[T], sn string, small ops.Tensor[T], g int) error {
	bs, ss := big.Shape(), small.Shape()
	want := append([]int{ss[0] * g}, ss[1:]...)
	if !slices.Equal(bs, want) {
		return fmt.Errorf("dist: %s: %s has shape %v, %s %v: %s must be the %d GPUs' parts of %s's shape stacked along dimension 0, %v", what, bn, bs, sn, ss, bn, g, sn, want)
	}
	return nil
}
