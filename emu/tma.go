package emu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/kgen-dev/kgen/ptx"
)

// The tensor memory accelerator: cp.async.bulk.tensor (.tile) and cp.reduce.async.bulk.tensor
// over the emulator's own 128-byte tensor maps (TensorMap). A load copies a box of the global
// tensor into shared memory (densely, innermost dimension first, then the map's swizzle
// applied to the shared addresses as wgmma's descriptors expect it), writing zeros (or NaN,
// with OOBNaN) for elements outside the tensor, and completes the box's byte count as a
// transaction on the mbarrier; a store writes the in-bounds elements of the box back; a
// reduction combines them with the global ones. Copies complete at issue, as cp.async.bulk
// loads do here (bulk stores join bulk groups: bulk.go). .multicast::cluster writes the box (and completes the transaction on the mbarrier
// at the same offset) in every block of the cluster that ctaMask names (cluster.go).

// TensorMap is what the emulator reads from a tensor map's 128 bytes: the arguments of
// cuTensorMapEncodeTiled. jit fills it (Encode) where the GPU path would call the driver.
type TensorMap struct {
	Elem        ptx.Type  // element type (its size is the element size; float types allow OOBNaN)
	Rank        int       // 1 to 5
	Global      uint64    // the tensor's address, 16-byte aligned
	Dims        [5]uint64 // elements per dimension, innermost first
	Strides     [5]uint64 // bytes between consecutive indices of dimension d >= 1 (Strides[0] unused)
	Box         [5]uint32 // the box's extent per dimension, 1 to 256
	ElemStrides [5]uint32 // traversal stride per dimension, 1 to 8 (0 reads as 1); dimension 0's is ignored, as the driver does without interleave
	Interleave  int       // 0 (none), 16 or 32 bytes: the emulator implements 0 only
	Swizzle     int       // 0, 32, 64 or 128 bytes
	OOBNaN      bool      // fill out-of-bounds elements with NaN instead of zero (float types)
}

// tensorMapMagic opens an encoded TensorMap: a map the emulator did not write is refused.
const tensorMapMagic = "kgenTMAP"

// TensorMapSize is the size of an encoded tensor map (CUtensorMap's).
const TensorMapSize = 128

var tmapElems = []ptx.Type{ptx.U8, ptx.U16, ptx.U32, ptx.S32, ptx.U64, ptx.S64, ptx.F16, ptx.F32, ptx.F64, ptx.BF16, ptx.TF32, ptx.E4M3, ptx.E5M2}

// Validate checks the map against cuTensorMapEncodeTiled's rules (the ones the emulator
// relies on); the error names the field.
func (m *TensorMap) Validate() error {
	if m == nil {
		return errors.New("tensor map: a nil *TensorMap")
	}
	es := m.elemBytes()
	switch {
	case es == 0:
		return fmt.Errorf("tensor map: element type .%s is not one a tensor map takes", m.Elem)
	case m.Rank < 1 || m.Rank > 5:
		return fmt.Errorf("tensor map: rank %d (1 to 5)", m.Rank)
	case m.Global%16 != 0:
		return fmt.Errorf("tensor map: global address %#x is not 16-byte aligned", m.Global)
	case m.Interleave != 0:
		return fmt.Errorf("tensor map: interleave %d: the emulator implements no interleave only", m.Interleave)
	case m.Swizzle != 0 && m.Swizzle != 32 && m.Swizzle != 64 && m.Swizzle != 128:
		return fmt.Errorf("tensor map: swizzle %d (0, 32, 64 or 128 bytes)", m.Swizzle)
	case m.OOBNaN && !m.Elem.IsFloat():
		return fmt.Errorf("tensor map: NaN fill needs a float element type, not .%s", m.Elem)
	}
	for d := 0; d < m.Rank; d++ {
		switch {
		case m.Dims[d] == 0 || m.Dims[d] > 1<<32:
			return fmt.Errorf("tensor map: dimension %d has %d elements (1 to 2^32)", d, m.Dims[d])
		case m.Box[d] == 0 || m.Box[d] > 256:
			return fmt.Errorf("tensor map: box dimension %d is %d (1 to 256)", d, m.Box[d])
		case m.ElemStrides[d] > 8:
			return fmt.Errorf("tensor map: element stride %d of dimension %d (1 to 8)", m.ElemStrides[d], d)
		case d > 0 && (m.Strides[d]%16 != 0 || m.Strides[d] >= 1<<40):
			return fmt.Errorf("tensor map: stride of dimension %d is %d bytes (a multiple of 16 below 2^40)", d, m.Strides[d])
		}
	}
	inner := int(m.Box[0]) * es
	if inner%16 != 0 {
		return fmt.Errorf("tensor map: the box's inner dimension is %d bytes (a multiple of 16)", inner)
	}
	if m.Swizzle != 0 && inner > m.Swizzle {
		return fmt.Errorf("tensor map: the box's inner dimension is %d bytes, more than the %d-byte swizzle", inner, m.Swizzle)
	}
	return nil
}

func (m *TensorMap) elemBytes() int {
	for _, t := range tmapElems {
		if t == m.Elem {
			return max(t.Bits()/8, 1)
		}
	}
	return 0
}

// Encode returns the map's 128 bytes, as a kernel receives them (a .param .align 64 .b8
// [128] parameter, or global memory). A nil *TensorMap encodes as 128 zero bytes, which
// DecodeTensorMap (and a kernel's use of them) refuses.
func (m *TensorMap) Encode() [TensorMapSize]byte {
	var b [TensorMapSize]byte
	if m == nil {
		return b
	}
	copy(b[:], tensorMapMagic)
	b[8] = byte(m.Elem)
	b[9] = byte(m.Rank)
	b[10] = byte(m.Interleave)
	b[11] = byte(m.Swizzle / 16)
	if m.OOBNaN {
		b[12] = 1
	}
	le := binary.LittleEndian
	le.PutUint64(b[16:], m.Global)
	for d := 0; d < 5; d++ {
		le.PutUint64(b[24+8*d:], m.Dims[d])
		if d > 0 {
			le.PutUint64(b[64+8*(d-1):], m.Strides[d])
		}
		le.PutUint16(b[96+2*d:], uint16(m.Box[d]))
		b[106+d] = byte(m.ElemStrides[d])
	}
	return b
}

// DecodeTensorMap reads an encoded map and validates it.
func DecodeTensorMap(b []byte) (TensorMap, error) {
	var m TensorMap
	if len(b) < TensorMapSize || string(b[:8]) != tensorMapMagic {
		return m, errors.New("not a tensor map the emulator encoded (TensorMap.Encode): a driver-encoded CUtensorMap or garbage")
	}
	le := binary.LittleEndian
	m.Elem, m.Rank, m.Interleave, m.Swizzle, m.OOBNaN = ptx.Type(b[8]), int(b[9]), int(b[10]), int(b[11])*16, b[12] != 0
	m.Global = le.Uint64(b[16:])
	for d := 0; d < 5; d++ {
		m.Dims[d] = le.Uint64(b[24+8*d:])
		if d > 0 {
			m.Strides[d] = le.Uint64(b[64+8*(d-1):])
		}
		m.Box[d] = uint32(le.Uint16(b[96+2*d:]))
		m.ElemStrides[d] = uint32(b[106+d])
	}
	return m, m.Validate()
}

// boxBytes is the shared-memory size of a box: what a load's transaction counts.
func (m *TensorMap) boxBytes() int {
	n := m.elemBytes()
	for d := 0; d < m.Rank; d++ {
		n *= m.boxCount(d)
	}
	return n
}

// boxCount is how many elements of dimension d a box holds (its extent over the stride).
func (m *TensorMap) boxCount(d int) int {
	s := m.elemStride(d)
	return (int(m.Box[d]) + s - 1) / s
}

// elemStride is dimension d's traversal stride: cuTensorMapEncodeTiled ignores the first
// element stride when there is no interleave (TMA has no stride in dimension 0).
func (m *TensorMap) elemStride(d int) int {
	if d == 0 {
		return 1
	}
	return max(int(m.ElemStrides[d]), 1)
}

// tensor sub-operations
const (
	tmaLoad uint8 = iota
	tmaStore
	tmaReduce
)

// decodeTensor decodes cp.async.bulk.tensor and cp.reduce.async.bulk.tensor.
func (d *decoder) decodeTensor(di *dinst, in *ptx.Instr, toks tokens, reduce bool) error {
	if toks.any("im2col", "im2col_no_offs") != "" {
		return errUnsupported
	}
	rank := 0
	for _, q := range toks {
		if r := ptx.TensorDim(q); r > 0 {
			rank = r
		}
	}
	sp := spacesOf(toks)
	if rank == 0 || len(sp) < 2 {
		return errUnsupported
	}
	args := in.Args
	op := tmaLoad
	ti := 1
	switch {
	case reduce:
		op, ti = tmaReduce, 0
		opn := toks.any("add", "min", "max", "inc", "dec", "and", "or", "xor")
		if opn == "" {
			return errUnsupported
		}
		di.flags = uint16(atomOps[opn])
	case sp[0] == spGlobal:
		op, ti = tmaStore, 0
	}
	di.op = op
	if len(args) <= ti+1 {
		return errors.New("missing operands")
	}
	ta, ok := args[ti].(ptx.TensorAddr)
	if !ok {
		return fmt.Errorf("operand %d must be a tensor operand [tensorMap, {coordinates}]", ti+1)
	}
	if len(ta.Coords) != rank {
		return fmt.Errorf("%d coordinates for a %dd tensor copy", len(ta.Coords), rank)
	}
	mp := &dinst{space: spGeneric, vec: 1, src: in, a: -1}
	if err := d.addr(mp, ptx.Addr{Base: ta.Map}); err != nil {
		return err
	}
	for _, c := range ta.Coords {
		s, err := d.src(c, ptx.S32)
		if err != nil {
			return err
		}
		di.av = append(di.av, s)
	}
	smem := &dinst{space: spShared, vec: 1, src: in, a: -1}
	si := 1 - ti // the shared operand: [dst] before the tensor for loads, [src] after it otherwise
	if op == tmaLoad {
		si = 0
	}
	if err := d.addr(smem, args[si]); err != nil {
		return err
	}
	var bar *dinst
	if op == tmaLoad {
		if len(args) < 3 {
			return errors.New("missing the mbarrier operand")
		}
		bar = &dinst{space: spShared, vec: 1, src: in, a: -1}
		if err := d.addr(bar, args[2]); err != nil {
			return err
		}
		if toks.has("multicast::cluster") {
			if len(args) < 4 {
				return errors.New("missing the ctaMask operand")
			}
			s, err := d.src(args[3], ptx.B16)
			if err != nil {
				return err
			}
			di.b = s
		}
	}
	di.sub = []*dinst{mp, smem, bar}
	di.exec = execTensor
	return nil
}

// tensorMapAt reads and decodes lane ln's tensor map.
func (w *warp) tensorMapAt(in *dinst, ln int) (TensorMap, bool) {
	mp := in.sub[0]
	b, _, _, f := w.span(mp, ln, w.ea(mp, ln), TensorMapSize)
	if f != nil {
		f.msg = "reading the tensor map: " + f.msg
		w.memFault(in, ln, f)
		return TensorMap{}, false
	}
	m, err := DecodeTensorMap(b)
	if err != nil {
		w.fault(in, ln, KindBadAddress, err.Error())
		return m, false
	}
	return m, true
}

func execTensor(w *warp, in *dinst, m uint32) {
	for x := m; x != 0; x &= x - 1 {
		ln := bits.TrailingZeros32(x)
		if !w.tensorCopy(in, ln) {
			return
		}
	}
}

// tensorCopy runs lane ln's copy; false after a fault.
func (w *warp) tensorCopy(in *dinst, ln int) bool {
	tm, ok := w.tensorMapAt(in, ln)
	if !ok {
		return false
	}
	if len(in.av) != tm.Rank {
		w.fault(in, ln, KindBadAddress, fmt.Sprintf("a %dd tensor copy with a tensor map of rank %d", len(in.av), tm.Rank))
		return false
	}
	smem := in.sub[1]
	base := w.ea(smem, ln)
	// 128 bytes; a swizzled box needs the swizzle's repeat (8 rows of it: 256, 512, 1024).
	if align := uint64(max(128, 8*tm.Swizzle)); base%align != 0 {
		w.fault(in, ln, KindMisaligned, fmt.Sprintf("the shared-memory box at %#x is not %d-byte aligned (a %d-byte swizzle's repeat; TMA needs at least 128)", base, align, tm.Swizzle))
		return false
	}
	// The destinations: the box's address as given, or with .multicast::cluster the same
	// offset in each block of the cluster that ctaMask names.
	bases := []uint64{base}
	if in.op == tmaLoad && in.b >= 0 {
		ranks, ok := w.ctaRanks(in, ln, w.r[in.b+int32(ln)]&0xffff)
		if !ok {
			return false
		}
		bases = bases[:0]
		for _, p := range ranks {
			bases = append(bases, p|w.sharedOff(in.sub[1], ln))
		}
	}
	es := tm.elemBytes()
	total := tm.boxBytes()
	var start, count [5]int
	for d := 0; d < 5; d++ {
		count[d] = 1
	}
	for d := 0; d < tm.Rank; d++ {
		start[d] = int(int32(w.r[in.av[d]+int32(ln)]))
		count[d] = tm.boxCount(d)
	}
	// The box's first byte along dimension 0 must be 16-byte aligned (relative to the
	// tensor's start): an H100 raises IllegalInstruction otherwise (docs/facts.md).
	if off := start[0] * es; off%16 != 0 {
		w.fault(in, ln, KindMisaligned, fmt.Sprintf("the box's inner coordinate %d is %d bytes from the tensor's start, not a multiple of 16 (the GPU raises an illegal instruction)", start[0], off))
		return false
	}
	var fill uint64
	if tm.OOBNaN {
		fill = fromFloat(tm.Elem, math.NaN(), rndNear)
	}
	var idx [5]int
	for i := 0; i < total/es; i++ {
		// idx: the element's position in the box, innermost first.
		r := i
		inside := true
		g := tm.Global
		for d := 0; d < tm.Rank; d++ {
			idx[d] = r % count[d]
			r /= count[d]
			x := start[d] + idx[d]*tm.elemStride(d)
			if x < 0 || uint64(x) >= tm.Dims[d] {
				inside = false
			}
			if d == 0 {
				g += uint64(x) * uint64(es)
			} else {
				g += uint64(x) * tm.Strides[d]
			}
		}
		var gb []byte
		if inside {
			var f *memFault
			if f = w.l.sys.reach(w.b.gpu, g, es); f == nil {
				gb, f = w.l.sys.globalSpan(g, es)
			}
			if f != nil {
				f.msg = fmt.Sprintf("tensor element %v of the box at %v: %s", idx[:tm.Rank], start[:tm.Rank], f.msg)
				w.memFault(in, ln, f)
				return false
			}
		}
		for _, b0 := range bases {
			sa := swizzleAddr(b0+uint64(i*es), tm.Swizzle)
			sb, f := w.sharedSpan(sa, es)
			if f != nil {
				w.memFault(in, ln, f)
				return false
			}
			if in.op == tmaLoad && !w.bulkWriteOK(in, ln, sa, es) {
				return false
			}
			switch {
			case !inside:
				if in.op == tmaLoad {
					putN(sb, es, fill)
				}
			case in.op == tmaLoad:
				copy(sb, gb)
			case in.op == tmaStore:
				copy(gb, sb)
			default:
				applyRed(gb, sb, uint8(in.flags), tm.Elem)
			}
		}
	}
	w.l.progressed()
	if in.op != tmaLoad {
		return true
	}
	if in.b < 0 {
		return w.completeTx(in, ln, in.sub[2], total)
	}
	bar := w.sharedOff(in.sub[2], ln)
	for _, b0 := range bases { // each destination block's mbarrier at the same offset
		if !w.completeTxAt(in, ln, b0&^clusterOffMask|bar, total) {
			return false
		}
	}
	return true
}

// completeTxAt applies complete_tx(bytes) to the mbarrier at a shared(::cluster) address.
func (w *warp) completeTxAt(in *dinst, ln int, a uint64, bytes int) bool {
	b, f := w.sharedSpan(a, 8)
	if f != nil {
		w.memFault(in, ln, f)
		return false
	}
	mb := mbDecode(getN(b, 8))
	mb.tx -= int64(bytes)
	if msg := mb.txErr(); msg != "" {
		w.fault(in, ln, KindBarrier, msg)
		return false
	}
	mb.complete()
	putN(b, 8, mb.encode())
	w.l.progressed()
	return true
}
