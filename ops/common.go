package ops

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ptx"
)

// deviceOf returns the device t lives on, or an error naming operand name when t is no
// tensor.
func deviceOf[T jit.Elem](op, name string, t Tensor[T]) (*jit.Device, error) {
	if t.buf == nil || t.rank == 0 {
		return nil, fmt.Errorf("ops: %s: %s is the zero Tensor (make tensors with New, ColMajor or Strided)", op, name)
	}
	m := t.buf.Memory()
	if m == nil || m.Device() == nil {
		return nil, fmt.Errorf("ops: %s: %s: its buffer has no memory", op, name)
	}
	if t.buf.Freed() {
		return nil, fmt.Errorf("ops: %s: %s: its buffer was freed", op, name)
	}
	return m.Device(), nil
}

// sameDevice checks that t lives on d.
func sameDevice[T jit.Elem](op, name string, d *jit.Device, t Tensor[T]) error {
	td, err := deviceOf(op, name, t)
	if err != nil {
		return err
	}
	if td != d {
		if tn, dn := td.Info().Name, d.Info().Name; tn == dn {
			return fmt.Errorf("ops: %s: %s lives on another *jit.Device than the other operands (both %s: a second Open of that GPU, or one since closed): every operand must be on one device", op, name, tn)
		}
		return fmt.Errorf("ops: %s: %s lives on %s, the other operands on %s: every operand must be on one device", op, name, td.Info().Name, d.Info().Name)
	}
	return nil
}

// begin checks ctx.
func begin(ctx context.Context, op string) error {
	if ctx == nil {
		return fmt.Errorf("ops: %s: nil context", op)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ops: %s: %w", op, err)
	}
	return nil
}

// streamOn checks that s (nil: the default stream) belongs to d.
func streamOn(op string, s *jit.Stream, d *jit.Device) error {
	if s == nil || s.Device() == d {
		return nil
	}
	switch sd := s.Device(); {
	case sd == nil:
		return fmt.Errorf("ops: %s: the stream is a zero jit.Stream, not made by Device.NewStream: launch on a stream of the operands' device (or nil, its default stream)", op)
	case sd.Info().Name == d.Info().Name:
		return fmt.Errorf("ops: %s: the stream belongs to another *jit.Device than the operands (both %s: a second Open of that GPU, or one since closed): launch on a stream of the operands' device (or nil, its default stream)", op, d.Info().Name)
	}
	return fmt.Errorf("ops: %s: the stream belongs to %s, the operands to %s: launch on a stream of the operands' device (or nil, its default stream)", op, s.Device().Info().Name, d.Info().Name)
}

// matrix checks that t is 2-D, returning its extents.
func matrix[T jit.Elem](op, name string, t Tensor[T]) (rows, cols int, err error) {
	if t.rank != 2 {
		return 0, 0, fmt.Errorf("ops: %s: %s has rank %d (shape %v); want a 2-D matrix", op, name, t.rank, t.Shape())
	}
	return t.shape[0], t.shape[1], nil
}

// rowLd returns the row stride of a 2-D t whose rows are contiguous (stride 1 along
// dimension 1), or an error naming the operand and the rule.
func rowLd[T jit.Elem](op, name string, t Tensor[T]) (int, error) {
	rows, cols := t.shape[0], t.shape[1]
	ld := t.strides[0]
	if cols > 1 && t.strides[1] != 1 {
		return 0, fmt.Errorf("ops: %s: %s has strides %v: each row must be contiguous (stride 1 along dimension 1)", op, name, t.Strides())
	}
	if rows == 1 {
		ld = cols
	}
	if ld < cols {
		return 0, fmt.Errorf("ops: %s: %s has rows %d elements apart, shorter than its %d columns: rows must not overlap", op, name, ld, cols)
	}
	if ld > math.MaxUint32 {
		return 0, fmt.Errorf("ops: %s: %s has rows %d elements apart: the kernels take row strides below 2^32", op, name, ld)
	}
	return ld, nil
}

// aligned16 reports whether t's first element is on a 16-byte boundary.
func aligned16[T jit.Elem](t Tensor[T]) bool { return t.Ptr()%16 == 0 }

// need16 returns an error naming the operand when t does not start on 16 bytes.
func need16[T jit.Elem](op, name, kernel string, t Tensor[T]) error {
	if !aligned16(t) {
		return fmt.Errorf("ops: %s: %s starts %d bytes past a 16-byte boundary (offset %d elements); %s needs 16-byte-aligned operands", op, name, t.Ptr()%16, t.off, kernel)
	}
	return nil
}

// contiguous returns an error naming the operand unless t is contiguous.
func contiguous[T jit.Elem](op, name, kernel string, t Tensor[T]) error {
	if !t.IsContiguous() {
		return fmt.Errorf("ops: %s: %s (shape %v, strides %v) is not contiguous; %s takes contiguous row-major tensors", op, name, t.Shape(), t.Strides(), kernel)
	}
	return nil
}

// sameShape returns an error naming both operands when their shapes differ.
func sameShape[T, U jit.Elem](op, an string, a Tensor[T], bn string, b Tensor[U]) error {
	if a.rank != b.rank || a.shape != b.shape {
		return fmt.Errorf("ops: %s: %s has shape %v, %s %v: they must match", op, an, a.Shape(), bn, b.Shape())
	}
	return nil
}

// dtypeIn returns an error naming the operand unless dt is one of want.
func dtypeIn(op, name string, dt ptx.Type, want ...ptx.Type) error {
	for _, w := range want {
		if dt == w {
			return nil
		}
	}
	return dtypeErr(op, name, dt, slices.Clone(want))
}

// dtypeErr is dtypeIn's error (apart, so that want does not escape on the way that passes).
func dtypeErr(op, name string, dt ptx.Type, want []ptx.Type) error {
	return fmt.Errorf("ops: %s: %s has element type %s; want one of %v", op, name, dt, want)
}

// deviceTarget is the target of d's kernels: its architecture (the emulator's is sm_90),
// sm_90 when it names none kgen knows.
func deviceTarget(d *jit.Device) ptx.Target {
	if t := ptx.Target(d.Info().Arch); t.Valid() {
		return t
	}
	return ptx.SM90
}

// launch runs fn with lc, reporting a closed device as such (and forgetting its cache).
func launch(op string, d *jit.Device, fn *jit.Function, lc jit.LaunchConfig, args *jit.Args) error {
	if err := fn.LaunchEncoded(lc, args); err != nil {
		return closedErr(op, d, err)
	}
	return nil
}

// planFailed reports a failed plan, as a closed device when it is one.
func planFailed(op string, d *jit.Device, err error) error {
	return closedErr(op, d, err)
}

// ptrOf is t's first element as a typed kernel argument.
// apart returns an error when t (named name; the zero Tensor is unset) shares bytes of
// device memory with d (named dname), which op writes; sameOK allows t to be exactly d (the
// same elements, the same layout: each element read before it is written).
func apart[T, U jit.Elem](op, name string, t Tensor[T], dname string, d Tensor[U], sameOK bool) error {
	if t.buf == nil || d.buf == nil || t.buf.Memory() != d.buf.Memory() {
		return nil // separate allocations never overlap
	}
	tlo, thi := byteSpan(t)
	dlo, dhi := byteSpan(d)
	if tlo >= dhi || dlo >= thi {
		return nil
	}
	if sameOK && tlo == dlo && thi == dhi && elemBytes[T]() == elemBytes[U]() && t.rank == d.rank && t.shape == d.shape && t.strides == d.strides {
		return nil
	}
	what := "must not share " + dname + "'s memory"
	if sameOK {
		what = "must be " + dname + " itself (the same elements) or not share its memory"
	}
	return fmt.Errorf("ops: %s: %s (bytes %d-%d of its buffer) overlaps %s (bytes %d-%d), which the call writes: %s %s",
		op, name, tlo-uint64(t.buf.DevPtr()), thi-uint64(t.buf.DevPtr()), dname, dlo-uint64(d.buf.DevPtr()), dhi-uint64(d.buf.DevPtr()), name, what)
}

// byteSpan returns the device bytes [lo, hi) t's elements lie in (strides are at least 0
// and the extent was checked when t was made).
func byteSpan[T jit.Elem](t Tensor[T]) (lo, hi uint64) {
	last := 0
	for i := 0; i < t.rank; i++ {
		last += (t.shape[i] - 1) * t.strides[i]
	}
	lo = uint64(t.Ptr())
	return lo, lo + uint64(last+1)*uint64(elemBytes[T]())
}

func ptrOf[T jit.Elem](t Tensor[T]) jit.AnyPtr {
	return jit.AnyPtr{Addr: t.Ptr(), Elem: jit.ElemType[T]()}
}

// matrixOp checks what every op on a matrix in with output out checks first, in this order:
// ctx, in's element type among allowed, in's device (out on the same one), in a 2-D matrix.
// It returns the device and in's extents.
func matrixOp[T, U jit.Elem](ctx context.Context, op string, out Tensor[U], in Tensor[T], allowed ...ptx.Type) (*jit.Device, int, int, error) {
	if err := begin(ctx, op); err != nil {
		return nil, 0, 0, err
	}
	if err := dtypeIn(op, "in", jit.ElemType[T](), allowed...); err != nil {
		return nil, 0, 0, err
	}
	d, err := deviceOf(op, "in", in)
	if err != nil {
		return nil, 0, 0, err
	}
	if err := sameDevice(op, "out", d, out); err != nil {
		return nil, 0, 0, err
	}
	rows, cols, err := matrix(op, "in", in)
	if err != nil {
		return nil, 0, 0, err
	}
	return d, rows, cols, nil
}

// named is an operand and the name errors give it.
type named[T jit.Elem] struct {
	name string
	t    Tensor[T]
}

// attentionApart checks the aliasing rule of the attention ops: out is written while q,
// kv (keys and values) and idx (int32 offsets or tables; entries without a name are
// absent) are read, so out may be q itself, whole, and shares nothing with the others; the
// LSE (when set) shares nothing with any. Arrays, not slices: a call allocates nothing.
func attentionApart[T jit.Elem](op string, q, out Tensor[T], kv [2]named[T], idx [2]named[int32], lse Tensor[float32]) error {
	if err := apart(op, "q", q, "out", out, true); err != nil {
		return err
	}
	for _, x := range kv {
		if err := apart(op, x.name, x.t, "out", out, false); err != nil {
			return err
		}
	}
	for _, x := range idx {
		if x.name == "" {
			continue
		}
		if err := apart(op, x.name, x.t, "out", out, false); err != nil {
			return err
		}
		if err := apart(op, x.name, x.t, "LSE", lse, false); err != nil {
			return err
		}
	}
	if lse.buf == nil {
		return nil
	}
	for _, x := range [4]named[T]{{"q", q}, kv[0], kv[1], {"out", out}} {
		if err := apart(op, x.name, x.t, "LSE", lse, false); err != nil {
			return err
		}
	}
	return nil
}

// attentionOperands runs the attention ops' common checks: the context, q's element type
// (bf16 or f16), every operand on q's device, and q, kv and out (dims[0..3], in that
// order: the shapes the errors say are wanted) of the given rank. It returns the device.
func attentionOperands[T jit.Elem](ctx context.Context, op string, q, out Tensor[T], kv [2]named[T], idx [2]named[int32], rank int, dims [4]string) (*jit.Device, error) {
	if err := begin(ctx, op); err != nil {
		return nil, err
	}
	if err := dtypeIn(op, "q", jit.ElemType[T](), ptx.BF16, ptx.F16); err != nil {
		return nil, err
	}
	dev, err := deviceOf(op, "q", q)
	if err != nil {
		return nil, err
	}
	for _, x := range [3]named[T]{kv[0], kv[1], {"out", out}} {
		if err := sameDevice(op, x.name, dev, x.t); err != nil {
			return nil, err
		}
	}
	for _, x := range idx {
		if x.name == "" {
			continue
		}
		if err := sameDevice(op, x.name, dev, x.t); err != nil {
			return nil, err
		}
	}
	for i, x := range [4]named[T]{{"q", q}, kv[0], kv[1], {"out", out}} {
		if x.t.rank != rank {
			return nil, fmt.Errorf("ops: %s: %s has rank %d (shape %v); want %s", op, x.name, x.t.rank, x.t.Shape(), dims[i])
		}
	}
	return dev, nil
}
