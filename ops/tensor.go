package ops

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"unsafe"

	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ptx"
)

// MaxRank is the largest rank a Tensor has.
const MaxRank = 4

// Tensor is a typed view of device memory: a shape and strides, in elements, from an offset
// into a *jit.Buffer[T]. It is a small value: views (Slice, Narrow, Transpose, View) copy it
// and never touch the memory. Every view stays inside its buffer (checked when made), with
// extents of at least 1 and strides of at least 0. The zero Tensor is no tensor: ops refuse
// it.
type Tensor[T jit.Elem] struct {
	buf     *jit.Buffer[T]
	off     int
	rank    int
	shape   [MaxRank]int
	strides [MaxRank]int
}

// New returns the row-major (C-order, contiguous) tensor of the given shape over buf from its
// first element: the last dimension is contiguous. buf must hold at least the tensor's
// elements.
func New[T jit.Elem](buf *jit.Buffer[T], shape ...int) (Tensor[T], error) {
	if len(shape) < 1 || len(shape) > MaxRank {
		return Tensor[T]{}, fmt.Errorf("ops: New: rank %d: want 1 to %d dimensions", len(shape), MaxRank)
	}
	strides := make([]int, len(shape))
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		strides[i] = s
		if shape[i] > 0 && s > math.MaxInt/shape[i] {
			return Tensor[T]{}, fmt.Errorf("ops: New: shape %v: the element count overflows an int", shape)
		}
		s *= max(shape[i], 1)
	}
	return Strided(buf, 0, shape, strides)
}

// ColMajor returns the column-major (Fortran-order) rows x cols matrix over buf from its first
// element: each column is contiguous (strides (1, rows)).
func ColMajor[T jit.Elem](buf *jit.Buffer[T], rows, cols int) (Tensor[T], error) {
	return Strided(buf, 0, []int{rows, cols}, []int{1, rows})
}

// Strided returns the tensor of the given shape and strides (elements) starting offset
// elements into buf. Every extent must be at least 1, every stride at least 0, and the
// furthest element inside buf.
func Strided[T jit.Elem](buf *jit.Buffer[T], offset int, shape, strides []int) (Tensor[T], error) {
	var t Tensor[T]
	switch {
	case buf == nil:
		return t, fmt.Errorf("ops: the buffer is nil")
	case buf.Freed():
		return t, fmt.Errorf("ops: the buffer was freed")
	case len(shape) < 1 || len(shape) > MaxRank:
		return t, fmt.Errorf("ops: rank %d: want 1 to %d dimensions", len(shape), MaxRank)
	case len(strides) != len(shape):
		return t, fmt.Errorf("ops: %d strides for %d dimensions", len(strides), len(shape))
	}
	t = Tensor[T]{buf: buf, off: offset, rank: len(shape)}
	copy(t.shape[:], shape)
	copy(t.strides[:], strides)
	if err := t.check(); err != nil {
		return Tensor[T]{}, err
	}
	return t, nil
}

// check reports a view outside its buffer or with a bad extent or stride.
func (t Tensor[T]) check() error {
	if t.off < 0 {
		return fmt.Errorf("ops: offset %d: want at least 0", t.off)
	}
	last := uint64(t.off)
	count := 1
	for i := 0; i < t.rank; i++ {
		if t.shape[i] < 1 {
			return fmt.Errorf("ops: dimension %d has extent %d: want at least 1", i, t.shape[i])
		}
		// Broadcast views (stride 0) reach few elements but may count more than an int holds.
		if count > math.MaxInt/t.shape[i] {
			return fmt.Errorf("ops: shape %v: the element count overflows an int", t.Shape())
		}
		count *= t.shape[i]
		if t.strides[i] < 0 {
			return fmt.Errorf("ops: dimension %d has stride %d: want at least 0", i, t.strides[i])
		}
		hi, lo := bits.Mul64(uint64(t.shape[i]-1), uint64(t.strides[i]))
		var carry uint64
		last, carry = bits.Add64(last, lo, 0)
		if hi != 0 || carry != 0 || last > math.MaxInt {
			return fmt.Errorf("ops: shape %v, strides %v from offset %d: the furthest element's index overflows", t.Shape(), t.Strides(), t.off)
		}
	}
	if n := t.buf.Len(); last >= uint64(n) {
		return fmt.Errorf("ops: shape %v, strides %v from offset %d reach element %d; the buffer holds %d", t.Shape(), t.Strides(), t.off, last, n)
	}
	return nil
}

// Buffer returns the buffer the tensor views.
func (t Tensor[T]) Buffer() *jit.Buffer[T] { return t.buf }

// Offset returns the index in the buffer of the tensor's first element.
func (t Tensor[T]) Offset() int { return t.off }

// Rank returns the number of dimensions.
func (t Tensor[T]) Rank() int { return t.rank }

// Shape returns the extents (a new slice).
func (t Tensor[T]) Shape() []int { return append([]int(nil), t.shape[:t.rank]...) }

// Strides returns the strides in elements (a new slice).
func (t Tensor[T]) Strides() []int { return append([]int(nil), t.strides[:t.rank]...) }

// Dim returns the extent of dimension i (0 when out of range).
func (t Tensor[T]) Dim(i int) int {
	if i < 0 || i >= t.rank {
		return 0
	}
	return t.shape[i]
}

// Stride returns the stride of dimension i in elements (0 when out of range).
func (t Tensor[T]) Stride(i int) int {
	if i < 0 || i >= t.rank {
		return 0
	}
	return t.strides[i]
}

// Len returns the number of elements.
func (t Tensor[T]) Len() int {
	if t.rank == 0 {
		return 0
	}
	n := 1
	for _, s := range t.shape[:t.rank] {
		n *= s
	}
	return n
}

// DType returns the element type.
func (t Tensor[T]) DType() ptx.Type { return jit.ElemType[T]() }

// Ptr returns the address of the tensor's first element.
func (t Tensor[T]) Ptr() jit.DevicePtr {
	if t.buf == nil {
		return 0
	}
	return t.buf.DevPtr().Add(int64(t.off) * int64(elemBytes[T]()))
}

// IsContiguous reports a row-major tensor without gaps: the last dimension's stride is 1 and
// each other's the product of the extents after it (dimensions of extent 1 may have any
// stride).
func (t Tensor[T]) IsContiguous() bool {
	want := 1
	for i := t.rank - 1; i >= 0; i-- {
		if t.shape[i] != 1 && t.strides[i] != want {
			return false
		}
		want *= t.shape[i]
	}
	return t.rank > 0
}

// Slice returns the view of indices [start, end) along dim.
func (t Tensor[T]) Slice(dim, start, end int) (Tensor[T], error) {
	if dim < 0 || dim >= t.rank {
		return Tensor[T]{}, fmt.Errorf("ops: Slice: dimension %d of a rank-%d tensor", dim, t.rank)
	}
	if start < 0 || end > t.shape[dim] || start >= end {
		return Tensor[T]{}, fmt.Errorf("ops: Slice: [%d, %d) along dimension %d of extent %d: want 0 <= start < end <= extent", start, end, dim, t.shape[dim])
	}
	v := t
	v.off += start * t.strides[dim]
	v.shape[dim] = end - start
	return v, nil
}

// Narrow returns the view of length indices from start along dim (Slice(dim, start,
// start+length)).
func (t Tensor[T]) Narrow(dim, start, length int) (Tensor[T], error) {
	if length < 1 {
		return Tensor[T]{}, fmt.Errorf("ops: Narrow: length %d from %d: want a length of at least 1", length, start)
	}
	if start > math.MaxInt-length {
		return Tensor[T]{}, fmt.Errorf("ops: Narrow: length %d from %d along dimension %d: the end overflows an int (want 0 <= start < start+length <= extent)", length, start, dim)
	}
	if dim < 0 || dim >= t.rank {
		return Tensor[T]{}, fmt.Errorf("ops: Narrow: dimension %d of a rank-%d tensor", dim, t.rank)
	}
	if start < 0 || start+length > t.shape[dim] {
		return Tensor[T]{}, fmt.Errorf("ops: Narrow: length %d from %d along dimension %d of extent %d: want 0 <= start < start+length <= extent", length, start, dim, t.shape[dim])
	}
	return t.Slice(dim, start, start+length)
}

// Transpose returns the transposed view of a 2-D tensor (its strides swapped): a row-major
// M x N matrix becomes a column-major N x M one.
func (t Tensor[T]) Transpose() (Tensor[T], error) {
	if t.rank != 2 {
		return Tensor[T]{}, fmt.Errorf("ops: Transpose: a rank-%d tensor; want 2", t.rank)
	}
	v := t
	v.shape[0], v.shape[1] = t.shape[1], t.shape[0]
	v.strides[0], v.strides[1] = t.strides[1], t.strides[0]
	return v, nil
}

// View returns a contiguous tensor's elements under another row-major shape of the same
// element count (a reshape).
func (t Tensor[T]) View(shape ...int) (Tensor[T], error) {
	if t.buf == nil {
		return Tensor[T]{}, errors.New("ops: View of the zero Tensor (make tensors with New, ColMajor or Strided)")
	}
	if !t.IsContiguous() {
		return Tensor[T]{}, fmt.Errorf("ops: View: shape %v, strides %v is not contiguous; View reshapes only contiguous tensors", t.Shape(), t.Strides())
	}
	if len(shape) < 1 || len(shape) > MaxRank {
		return Tensor[T]{}, fmt.Errorf("ops: View: rank %d: want 1 to %d dimensions", len(shape), MaxRank)
	}
	n := 1
	for _, s := range shape {
		if s < 1 {
			return Tensor[T]{}, fmt.Errorf("ops: View: shape %v: want extents of at least 1", shape)
		}
		if n > math.MaxInt/s {
			return Tensor[T]{}, fmt.Errorf("ops: View: shape %v: the element count overflows an int", shape)
		}
		n *= s
	}
	if n != t.Len() {
		return Tensor[T]{}, fmt.Errorf("ops: View: shape %v holds %d elements; the tensor has %d", shape, n, t.Len())
	}
	v, err := New(t.buf, shape...)
	if err != nil {
		return Tensor[T]{}, err
	}
	v.off = t.off
	return v, v.check()
}

// bitsOf returns v's bits (T is at most 8 bytes).
func bitsOf[T jit.Elem](v T) uint64 {
	var u uint64
	*(*T)(unsafe.Pointer(&u)) = v
	return u
}

// elemBytes is the size of T in bytes.
func elemBytes[T jit.Elem]() int {
	var z T
	return int(unsafe.Sizeof(z))
}
