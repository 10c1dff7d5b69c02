package jit

import (
	"fmt"
	"math/bits"

	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// TensorMapBytes is the size of a tensor map (CUtensorMap), passed to a kernel by value as a
// `.param .align 64 .b8 name[128]` parameter (dsl.TensorMap).
const TensorMapBytes = 128

// Swizzle is the shared-memory swizzle a tensor map applies to the boxes it copies: 16-byte
// chunks permuted within a span of this many bytes (SwizzleNone: none).
type Swizzle int

// The swizzles a tensor map takes (CU_TENSOR_MAP_SWIZZLE_NONE, _32B, _64B, _128B).
const (
	SwizzleNone Swizzle = 0
	Swizzle32B  Swizzle = 32
	Swizzle64B  Swizzle = 64
	Swizzle128B Swizzle = 128
)

// TensorMap is a TMA tensor map over a device buffer: what cuTensorMapEncodeTiled writes on
// the GPU, emu.TensorMap's encoding on the emulator. Pass it (a LaunchArgs field of type
// TensorMap, or a Launch argument) for a 128-byte tensor-map parameter of the device it was
// made on. It holds the buffer's address, not the buffer: keep the buffer alive while
// kernels use the map.
type TensorMap struct {
	b    [TensorMapBytes]byte
	elem ptx.Type
	mem  *Memory
}

// Elem returns the element type of the tensor the map describes.
func (m TensorMap) Elem() ptx.Type { return m.elem }

// Bytes returns the map's 128 bytes, as the kernel receives them.
func (m TensorMap) Bytes() [TensorMapBytes]byte { return m.b }

// TensorMapOption sets one of a tensor map's less common fields.
type TensorMapOption func(*tensorMapSpec)

// WithInterleave sets the interleaved layout: 0 (none, the default), 16 or 32 bytes
// (NC/8HWC8-like layouts; rank 3 or more). The emulator implements no interleave.
func WithInterleave(bytes int) TensorMapOption {
	return func(s *tensorMapSpec) { s.interleave = bytes }
}

// WithL2Promotion sets the L2 fetch granularity: 0 (none, the default), 64, 128 or 256 bytes.
// The emulator has no L2 and ignores it.
func WithL2Promotion(bytes int) TensorMapOption {
	return func(s *tensorMapSpec) { s.l2 = bytes }
}

// WithOOBNaN fills elements outside the tensor with NaN (float element types) instead of zero.
func WithOOBNaN() TensorMapOption { return func(s *tensorMapSpec) { s.oobNaN = true } }

// WithOffset starts the tensor elems elements into the buffer (a view of rows further on:
// a chunk of a matrix); the tensor must still fit in the buffer and start 16-byte aligned.
func WithOffset(elems uint64) TensorMapOption {
	return func(s *tensorMapSpec) { s.offElems = elems }
}

// WithElemStrides sets the traversal stride of each dimension (1 to 8; one per dimension;
// default all 1): a box then holds ceil(box[d]/stride[d]) elements along d. Dimension 0's is
// ignored without interleave, as the driver does.
func WithElemStrides(s ...uint32) TensorMapOption {
	return func(t *tensorMapSpec) { t.elemStrides = append(make([]uint32, 0, len(s)), s...) } // none: a count error, not the default
}

// tensorMapSpec is everything cuTensorMapEncodeTiled takes.
type tensorMapSpec struct {
	elem        ptx.Type // the host element type
	addr        DevicePtr
	dims        []uint64
	strides     []uint64 // bytes, dimensions 1..rank-1
	box         []uint32
	elemStrides []uint32 // rank entries, all >= 1 after validate
	swizzle     Swizzle
	interleave  int
	l2          int
	oobNaN      bool
	offElems    uint64 // WithOffset: where the tensor starts in the buffer, in elements
}

// tensorMapEncoder is a device that encodes tensor maps (both backends).
type tensorMapEncoder interface {
	encodeTensorMap(s *tensorMapSpec) ([TensorMapBytes]byte, error)
}

// NewTensorMap makes a TMA tensor map over buf for copies of box-shaped tiles between the
// tensor and shared memory. dims are the tensor's extents in elements, innermost first (the
// rank is len(dims), 1 to 5); strides are the bytes between consecutive indices of dimensions
// 1 to rank-1 (len(dims)-1 values, multiples of 16; dimension 0 is dense); box is the tile's
// extent per dimension (1 to 256; its inner dimension a multiple of 16 bytes and, with a
// swizzle, at most the swizzle's span). The tensor starts at buf's first element and must fit
// in buf. Both backends check the same rules (cuTensorMapEncodeTiled's) and name the field
// that breaks one; the GPU then calls cuTensorMapEncodeTiled, the emulator encodes an
// emu.TensorMap. A copy through the map must start its box at a dimension-0 coordinate
// that is a multiple of 16 bytes: the GPU raises IllegalInstruction for any other (the
// emulator reports a misaligned access).
func NewTensorMap[T Elem](buf *Buffer[T], dims, strides []uint64, box []uint32, swizzle Swizzle, opts ...TensorMapOption) (TensorMap, error) {
	if buf == nil || buf.mem == nil {
		return TensorMap{}, fmt.Errorf("jit: NewTensorMap: the buffer is nil")
	}
	if buf.isFreed() {
		return TensorMap{}, fmt.Errorf("jit: NewTensorMap: the buffer was freed")
	}
	d := buf.mem.d
	if err := d.usable("NewTensorMap"); err != nil {
		return TensorMap{}, err
	}
	s := &tensorMapSpec{elem: ElemType[T](), addr: buf.DevPtr(), dims: dims, strides: strides, box: box, swizzle: swizzle}
	for i, o := range opts {
		if o == nil {
			return TensorMap{}, fmt.Errorf("jit: NewTensorMap: option %d (opts[%d]) is nil", i, i)
		}
		o(s)
	}
	if s.offElems >= uint64(buf.Len()) {
		return TensorMap{}, fmt.Errorf("jit: NewTensorMap: offset %d elements: the buffer holds %d", s.offElems, buf.Len())
	}
	s.addr += DevicePtr(s.offElems * uint64(s.elem.Bytes()))
	if err := s.validate((int64(buf.Len()) - int64(s.offElems)) * int64(s.elem.Bytes())); err != nil {
		return TensorMap{}, fmt.Errorf("jit: NewTensorMap over %s: %w", d.describe(), err)
	}
	if d.info.SM < 90 {
		return TensorMap{}, fmt.Errorf("jit: NewTensorMap: %s is %s; tensor maps (TMA) need sm_90 or newer", d.describe(), d.info.Arch)
	}
	enc, ok := d.impl.(tensorMapEncoder)
	if !ok {
		return TensorMap{}, fmt.Errorf("jit: NewTensorMap: the %s backend cannot encode tensor maps", d.info.Backend)
	}
	b, err := enc.encodeTensorMap(s)
	if err != nil {
		return TensorMap{}, fmt.Errorf("jit: NewTensorMap over %s: %w", d.describe(), err)
	}
	return TensorMap{b: b, elem: s.elem, mem: buf.mem}, nil
}

// tmapElemBytes is the element size cuTensorMapEncodeTiled knows t by (0: no tensor-map type).
func tmapElemBytes(t ptx.Type) int {
	switch t {
	case ptx.U8, ptx.S8, ptx.E4M3, ptx.E5M2:
		return 1
	case ptx.U16, ptx.S16, ptx.F16, ptx.BF16:
		return 2
	case ptx.U32, ptx.S32, ptx.F32:
		return 4
	case ptx.U64, ptx.S64, ptx.F64:
		return 8
	}
	return 0
}

// validate checks s against cuTensorMapEncodeTiled's rules and that the tensor fits in the
// size bytes of its buffer; the error names the field.
func (s *tensorMapSpec) validate(size int64) error {
	rank := len(s.dims)
	es := tmapElemBytes(s.elem)
	switch {
	case es == 0:
		return fmt.Errorf("element type %s is not one a tensor map takes", s.elem)
	case rank < 1 || rank > 5:
		return fmt.Errorf("rank %d (len(dims)): want 1 to 5", rank)
	case len(s.strides) != rank-1:
		return fmt.Errorf("%d strides for rank %d: want %d (bytes between indices of dimensions 1 to %d; dimension 0 is dense)", len(s.strides), rank, rank-1, rank-1)
	case len(s.box) != rank:
		return fmt.Errorf("%d box dimensions for rank %d: want %d", len(s.box), rank, rank)
	case s.elemStrides != nil && len(s.elemStrides) != rank:
		return fmt.Errorf("WithElemStrides: %d element strides for rank %d: want %d", len(s.elemStrides), rank, rank)
	case s.interleave != 0 && s.interleave != 16 && s.interleave != 32:
		return fmt.Errorf("interleave %d: want 0, 16 or 32 bytes", s.interleave)
	case s.interleave != 0 && rank < 3:
		return fmt.Errorf("interleave %d needs rank 3 or more, not %d", s.interleave, rank)
	case s.swizzle != SwizzleNone && s.swizzle != Swizzle32B && s.swizzle != Swizzle64B && s.swizzle != Swizzle128B:
		return fmt.Errorf("swizzle %d: want 0, 32, 64 or 128 bytes", int(s.swizzle))
	case s.interleave == 32 && s.swizzle != Swizzle32B:
		return fmt.Errorf("interleave 32 needs swizzle 32, not %d", int(s.swizzle))
	case s.l2 != 0 && s.l2 != 64 && s.l2 != 128 && s.l2 != 256:
		return fmt.Errorf("L2 promotion %d: want 0, 64, 128 or 256 bytes", s.l2)
	case s.oobNaN && !(s.elem == ptx.F16 || s.elem == ptx.BF16 || s.elem == ptx.F32 || s.elem == ptx.F64):
		return fmt.Errorf("NaN fill needs a float element type (f16, bf16, f32, f64), not %s", s.elem)
	}
	align := uint64(16)
	if s.interleave == 32 {
		align = 32
	}
	if uint64(s.addr)%align != 0 {
		return fmt.Errorf("global address %#x is not %d-byte aligned", uint64(s.addr), align)
	}
	if s.elemStrides == nil {
		s.elemStrides = make([]uint32, rank)
		for d := range s.elemStrides {
			s.elemStrides[d] = 1
		}
	}
	extent := uint64(es) // the last byte the tensor reaches, plus one
	for d := 0; d < rank; d++ {
		stride := uint64(es)
		if d > 0 {
			stride = s.strides[d-1]
		}
		switch {
		case s.dims[d] == 0 || s.dims[d] > 1<<32:
			return fmt.Errorf("dimension %d has %d elements: want 1 to 2^32", d, s.dims[d])
		case s.box[d] == 0 || s.box[d] > 256:
			return fmt.Errorf("box dimension %d is %d: want 1 to 256", d, s.box[d])
		case s.elemStrides[d] < 1 || s.elemStrides[d] > 8:
			return fmt.Errorf("WithElemStrides: element stride %d of dimension %d: want 1 to 8", s.elemStrides[d], d)
		case d > 0 && (stride%align != 0 || stride >= 1<<40):
			return fmt.Errorf("stride of dimension %d (strides[%d]) is %d bytes: want a multiple of %d below 2^40", d, d-1, stride, align)
		}
		hi, span := bits.Mul64(s.dims[d]-1, stride)
		var carry uint64
		extent, carry = bits.Add64(extent, span, 0)
		if hi != 0 || carry != 0 {
			return fmt.Errorf("dims %v with strides %v reach past 2^64 bytes (dimension %d: %d elements %d bytes apart), more than the buffer's %d", s.dims, s.strides, d, s.dims[d], stride, size)
		}
	}
	if s.interleave == 0 {
		inner := int(s.box[0]) * es
		if inner%16 != 0 {
			return fmt.Errorf("the box's inner dimension (box[0] = %d) is %d bytes: want a multiple of 16", s.box[0], inner)
		}
		if s.swizzle != SwizzleNone && inner > int(s.swizzle) {
			return fmt.Errorf("the box's inner dimension (box[0] = %d) is %d bytes, more than the %d-byte swizzle span", s.box[0], inner, int(s.swizzle))
		}
	}
	if extent > uint64(size) {
		return fmt.Errorf("dims %v with strides %v reach %d bytes, more than the buffer's %d", s.dims, s.strides, extent, size)
	}
	return nil
}

// emuTensorMapType is the element type the emulator's map records for t (it copies bytes;
// only the size and float-ness matter).
func emuTensorMapType(t ptx.Type) ptx.Type {
	switch t {
	case ptx.S8:
		return ptx.U8
	case ptx.S16:
		return ptx.U16
	}
	return t
}

// encodeTensorMap writes an emu.TensorMap (the emulator's 128-byte encoding).
func (d *emuDevice) encodeTensorMap(s *tensorMapSpec) ([TensorMapBytes]byte, error) {
	if s.interleave != 0 {
		return [TensorMapBytes]byte{}, fmt.Errorf("interleave %d: the emulator implements no interleave (its TMA copies dense boxes)", s.interleave)
	}
	m := emu.TensorMap{Elem: emuTensorMapType(s.elem), Rank: len(s.dims), Global: uint64(s.addr), Swizzle: int(s.swizzle), OOBNaN: s.oobNaN}
	for i := range s.dims {
		m.Dims[i] = s.dims[i]
		m.Box[i] = s.box[i]
		m.ElemStrides[i] = s.elemStrides[i]
		if i > 0 {
			m.Strides[i] = s.strides[i-1]
		}
	}
	if err := m.Validate(); err != nil {
		return [TensorMapBytes]byte{}, err
	}
	return m.Encode(), nil
}

// fits checks that m can fill parameter p of a launch on dev (nil: any device) of a kernel
// that declared info (nil: unknown).
func (m TensorMap) fits(p ptx.Param, dev *Device, info *ParamInfo) error {
	switch {
	case m.mem == nil:
		return fmt.Errorf("got a zero TensorMap (make one with jit.NewTensorMap)")
	case paramBytes(p) != TensorMapBytes || p.Align < 64:
		return fmt.Errorf("got a TensorMap, but a tensor map needs a 64-byte-aligned 128-byte parameter (.param .align 64 .b8 name[128])")
	case m.mem.isFreed():
		return fmt.Errorf("got a TensorMap whose buffer was freed")
	case dev != nil && m.mem.d != dev:
		return fmt.Errorf("got a TensorMap made on %s for a launch on %s", m.mem.d.describe(), dev.describe())
	case info != nil && !info.TensorMap:
		return fmt.Errorf("got a TensorMap, but the kernel declares %s, not a tensor map", info.Type)
	case info != nil && m.elem != info.Type && !(m.elem.IsInt() && info.Type.IsInt() && m.elem.Bytes() == info.Type.Bytes()):
		return fmt.Errorf("got a TensorMap over %s, but the kernel's tensor map is over %s", m.elem, info.Type)
	}
	return nil
}
