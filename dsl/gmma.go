package dsl

import (
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// GMMAAtom is one warpgroup MMA (wgmma.mma_async, sm_90a) after CuTe's GMMA traits: the 128
// threads of a warpgroup compute D (64 x N, f32) += A (64 x K) * B (K x N) with A and B read
// from shared memory through matrix descriptors. CLayout maps (thread, value) of the
// accumulator fragment to the index m + 64*n of the 64 x N tile (CuTe's CLayout_64xN).
type GMMAAtom struct {
	N, K       int
	A, B, C    Type // element types of A and B (F32 means tf32) and the accumulators
	CLayout    layout.Layout
	ptxA, ptxB ptx.Type
}

// GMMAM is the M extent of every wgmma: one warpgroup's 64 rows.
const GMMAM = 64

// MakeGMMAAtom returns the m64nNkK atom with f32 accumulators for inputs ab: F16 or BF16
// (K 16), F32 read as tf32 (K 8), E4M3 or E5M2 (K 32); N is 8 to 256 in steps of 8.
func MakeGMMAAtom(ab Type, n int) (GMMAAtom, error) {
	pt := ab
	if ab == F32 {
		pt = ptx.TF32
	}
	kk := ptx.WgmmaK(pt)
	switch {
	case kk == 0 || ab == ptx.S8 || ab == ptx.U8 || ab == ptx.TF32:
		return GMMAAtom{}, fmt.Errorf("MakeGMMAAtom: no f32-accumulating wgmma for %s inputs (F16, BF16, F32 as tf32, E4M3, E5M2)", ab)
	case n < 8 || n > 256 || n%8 != 0:
		return GMMAAtom{}, fmt.Errorf("MakeGMMAAtom: N = %d; wgmma takes N from 8 to 256 in steps of 8", n)
	}
	c := layout.MustParse(fmt.Sprintf("((4,8,4),(2,2,%d)):((128,1,16),(64,8,512))", n/8))
	return GMMAAtom{N: n, K: kk, A: ab, B: ab, C: F32, CLayout: c, ptxA: pt, ptxB: pt}, nil
}

// String is the atom's CuTe name, e.g. SM90_64x64x16_F32BF16BF16_SS.
func (a GMMAAtom) String() string {
	up := func(t ptx.Type) string {
		s := t.String()
		b := []byte(s)
		for i, c := range b {
			if c >= 'a' && c <= 'z' {
				b[i] = c - 32
			}
		}
		return string(b)
	}
	return fmt.Sprintf("SM90_64x%dx%d_F32%s%s_SS", a.N, a.K, up(a.ptxA), up(a.ptxB))
}

// Coord returns the (m, n) of accumulator value v of warpgroup thread t (0..127).
func (a GMMAAtom) Coord(t, v int) (int, int) {
	i := a.CLayout.Value(t + 128*v)
	return i % GMMAM, i / GMMAM
}

// AccRegs is the number of f32 accumulators each thread holds: N/2.
func (a GMMAAtom) AccRegs() int { return a.N / 2 }

// GMMAMajor says which index of a shared-memory operand is contiguous: K (CuTe's K-major,
// no transpose) or M/N (MN-major, transposed; only 16-bit inputs).
type GMMAMajor int

// The operand majors.
const (
	KMajor GMMAMajor = iota
	MNMajor
)

func (m GMMAMajor) String() string {
	if m == KMajor || m == MNMajor {
		return [...]string{"K", "MN"}[m]
	}
	return fmt.Sprintf("GMMAMajor(%d)", int(m))
}

// GMMALayoutAtom returns CuTe's shared-memory layout atom for wgmma operands of elem, as an
// (MN, K) layout in elements composed with the swizzle: swizzle is the swizzle width in bytes,
// 0 (CuTe's INTER: 16-byte rows), 32, 64 or 128. K-major atoms are 8 rows of swizzle bytes
// ((8, W/es):(W/es, 1), CuTe's Layout_K_SW128_Atom etc.), MN-major atoms W/es x 8 ((W/es, 8):
// (1, W/es)). CuTe writes the swizzle over byte addresses, Sw<B,4,3>; over element offsets
// it is Sw<B, 4-log2(es), 3>, what this returns.
func GMMALayoutAtom(elem Type, major GMMAMajor, swizzle int) (layout.ComposedLayout, error) {
	es := memType(elem).Bytes()
	b, ok := map[int]int{0: 0, 32: 1, 64: 2, 128: 3}[swizzle]
	if !ok {
		return layout.ComposedLayout{}, fmt.Errorf("GMMALayoutAtom: swizzle %d bytes; want 0, 32, 64 or 128", swizzle)
	}
	if es != 1 && es != 2 && es != 4 {
		return layout.ComposedLayout{}, fmt.Errorf("GMMALayoutAtom: %s is not a wgmma input type", elem)
	}
	w := max(swizzle, 16) / es // elements of one row
	sw := layout.Swizzle{B: b, M: 4 - bits.TrailingZeros(uint(es)), S: 3}
	l := fmt.Sprintf("(8,%d):(%d,1)", w, w)
	if major == MNMajor {
		l = fmt.Sprintf("(%d,8):(1,%d)", w, w)
	}
	return layout.ComposedLayout{Outer: sw, Inner: layout.MustParse(l)}, nil
}

// TileToShape repeats a 2-D layout atom over an mn x k tile, along MN first (CuTe's
// tile_to_shape with the default column-major order): the result is
// ((atomMN, mn/atomMN), (atomK, k/atomK)) with the atom's swizzle.
func TileToShape(atom layout.ComposedLayout, mn, k int) (layout.ComposedLayout, error) {
	sh, st := atom.Inner.FlatShape(), atom.Inner.FlatStride()
	if len(sh) != 2 {
		return layout.ComposedLayout{}, fmt.Errorf("TileToShape: atom %v is not 2-D", atom.Inner)
	}
	if mn <= 0 || k <= 0 || mn%sh[0] != 0 || k%sh[1] != 0 {
		return layout.ComposedLayout{}, fmt.Errorf("TileToShape: tile %dx%d is not a multiple of the atom's %dx%d", mn, k, sh[0], sh[1])
	}
	size := sh[0] * sh[1]
	rm, rk := mn/sh[0], k/sh[1]
	l, err := layout.Parse(fmt.Sprintf("((%d,%d),(%d,%d)):((%d,%d),(%d,%d))", sh[0], rm, sh[1], rk, st[0], size, st[1], size*rm))
	if err != nil {
		return layout.ComposedLayout{}, fmt.Errorf("TileToShape: %v", err)
	}
	return layout.ComposedLayout{Outer: atom.Outer, Offset: atom.Offset, Inner: l}, nil
}

// GMMADesc is a wgmma shared-memory matrix descriptor without its start address (PTX ISA,
// "Matrix Descriptor Format"): the canonical layout's major, swizzle width (0, 32, 64, 128
// bytes), leading and stride dimension byte offsets. Bits ORs in a start address.
type GMMADesc struct {
	Major    GMMAMajor
	Swizzle  int
	LBO, SBO int // bytes, multiples of 16 below 2^18
}

// Bits returns the 64-bit descriptor for a matrix at shared address start (16-byte aligned;
// the swizzle pattern's base offset is 0: the buffer is aligned to the pattern's repeat).
func (d GMMADesc) Bits(start uint64) uint64 {
	mode := map[int]uint64{0: 0, 128: 1, 64: 2, 32: 3}[d.Swizzle]
	return start>>4&0x3fff | uint64(d.LBO>>4&0x3fff)<<16 | uint64(d.SBO>>4&0x3fff)<<32 | mode<<62
}

// GMMAOperand is a shared-memory operand of wgmma as a descriptor sees it: its descriptor
// and, per K block of the instruction, the byte offset of the block's start.
type GMMAOperand struct {
	Desc    GMMADesc
	KBlocks []int // byte offset (before the swizzle) of instruction K block j
	MBlocks []int // byte offset of each 64-row block of A (one per warpgroup); B: one
}

// MakeGMMAOperand finds the descriptor that reads operand o (OperandA: 64*mBlocks x kTile,
// OperandB: N x kTile) of atom from shared memory laid out as l ((MN, K) in elements, with
// its swizzle): the descriptor's canonical layout, swizzled at absolute addresses, must place
// every element of every K block where l does. A layout no descriptor expresses (a swizzle
// other than Sw<B, 4-log2(es), 3>, rows not 16-byte aligned, MN-major tf32/fp8, offsets too
// large) is an error naming it.
func MakeGMMAOperand(atom GMMAAtom, o Operand, l layout.ComposedLayout) (GMMAOperand, error) {
	key := fmt.Sprintf("%v %v %v", atom, o, l)
	if r, ok := gmmaOperands.Load(key); ok {
		r := r.(gmmaOperandResult)
		return r.op.clone(), r.err
	}
	op, err := makeGMMAOperand(atom, o, l)
	layoutCacheStore(&gmmaOperands, &gmmaOperandCount, key, gmmaOperandResult{op.clone(), err})
	return op, err
}

func (op GMMAOperand) clone() GMMAOperand {
	op.KBlocks, op.MBlocks = slices.Clone(op.KBlocks), slices.Clone(op.MBlocks)
	return op
}

// gmmaOperands caches MakeGMMAOperand (a pure function of the atom, the operand and the
// layout; checking every element costs about 0.2 ms for a 256 x 64 tile).
var (
	gmmaOperands     sync.Map
	gmmaOperandCount atomic.Int64
)

// maxLayoutCache bounds the entries of each per-layout cache (gmmaOperands, tmaPlans): a
// process that builds ever new layouts starts a full cache over instead of growing it.
const maxLayoutCache = 4096

// layoutCacheStore stores key's value in cache, whose entries n counts, first emptying a
// full cache.
func layoutCacheStore(cache *sync.Map, n *atomic.Int64, key string, v any) {
	if n.Add(1) > maxLayoutCache {
		cache.Clear()
		n.Store(1)
	}
	cache.Store(key, v)
}

type gmmaOperandResult struct {
	op  GMMAOperand
	err error
}

func makeGMMAOperand(atom GMMAAtom, o Operand, l layout.ComposedLayout) (GMMAOperand, error) {
	var op GMMAOperand
	elem := atom.A
	if o == OperandB {
		elem = atom.B
	}
	es := memType(elem).Bytes()
	sh := l.Inner.Shape()
	if l.Inner.Rank() != 2 {
		return op, fmt.Errorf("GMMA operand %s: layout %v is not (MN, K)", o, l)
	}
	mnExt, kExt := size(sh.At(0)), size(sh.At(1))
	rows := GMMAM
	if o == OperandB {
		rows = atom.N
	}
	if o == OperandC || mnExt%rows != 0 || (o == OperandB && mnExt != rows) || kExt%atom.K != 0 {
		return op, fmt.Errorf("GMMA operand %s: layout %v is %dx%d; %s wants %d rows (A: a multiple of 64) and K a multiple of %d", o, l, mnExt, kExt, atom, rows, atom.K)
	}
	swz := 0
	if l.Outer != nil {
		sw, ok := l.Outer.(layout.Swizzle)
		want := 4 - bits.TrailingZeros(uint(es))
		if !ok || (sw.B != 0 && (sw.M != want || sw.S != 3)) || sw.B > 3 {
			return op, fmt.Errorf("GMMA operand %s: swizzle %v is no wgmma swizzle mode for %d-byte elements (Sw<B,%d,3>, B = 0..3)", o, l.Outer, es, want)
		}
		if sw.B > 0 {
			swz = 16 << sw.B
		}
	}
	off := offsets(l.Inner, mnExt)
	at := func(mn, k int) int { // a byte offset, 0 outside the tile
		if mn >= mnExt || k >= kExt {
			return 0
		}
		return es * off(mn, k)
	}
	t := 16 / es // elements per 16-byte unit
	w := swz / 16
	var cands []GMMADesc
	cands = append(cands, GMMADesc{Major: KMajor, Swizzle: swz})
	if w == 0 {
		cands[0].LBO, cands[0].SBO = at(0, t), at(8, 0)
	} else {
		cands[0].LBO, cands[0].SBO = 16, at(8, 0)
	}
	c := GMMADesc{Major: MNMajor, Swizzle: swz}
	if w == 0 {
		c.SBO, c.LBO = at(t, 0), at(0, 8)
	} else {
		c.LBO, c.SBO = at(t*w, 0), at(0, 8)
	}
	cands = append(cands, c)
	var last error
	for _, d := range cands {
		if err := d.check(); err != nil {
			last = err
			continue
		}
		op = GMMAOperand{Desc: d}
		ok := true
		for mb := 0; ok && mb < mnExt/rows; mb++ {
			for kb := 0; ok && kb < kExt/atom.K; kb++ {
				start := es * off(mb*rows, kb*atom.K)
				for k := 0; ok && k < atom.K; k++ {
					for mn := 0; mn < rows; mn++ {
						got := es * applySwz(l, off(mb*rows+mn, kb*atom.K+k))
						if want := d.addr(start, mn, k, es); got != want {
							last = fmt.Errorf("%s-major %s: element (%d, %d) of block (%d, %d) is at byte %d, the descriptor (LBO %d, SBO %d) reads byte %d",
								d.Major, swzName(d.Swizzle), mn, k, mb, kb, got, d.LBO, d.SBO, want)
							ok = false
							break
						}
					}
				}
				if ok && mb == 0 {
					op.KBlocks = append(op.KBlocks, start)
				}
			}
			if ok {
				op.MBlocks = append(op.MBlocks, es*off(mb*rows, 0))
			}
		}
		if ok {
			if d.Major == MNMajor && atom.ptxA != ptx.F16 && atom.ptxA != ptx.BF16 {
				return GMMAOperand{}, fmt.Errorf("GMMA operand %s: layout %v is MN-major; %s reads only K-major %s", o, l, atom, elem)
			}
			return op, nil
		}
	}
	return GMMAOperand{}, fmt.Errorf("GMMA operand %s: no wgmma descriptor reads layout %v (%s): %v", o, l, atom, last)
}

func size(t layout.IntTuple) int {
	n := 1
	for _, v := range t.Leaves() {
		n *= v
	}
	return n
}

func applySwz(l layout.ComposedLayout, v int) int {
	if l.Outer == nil {
		return v + l.Offset
	}
	return l.Outer.Apply(v + l.Offset)
}

func swzName(s int) string {
	if s == 0 {
		return "unswizzled"
	}
	return fmt.Sprintf("%d-byte swizzle", s)
}

func (d GMMADesc) check() error {
	for _, v := range []int{d.LBO, d.SBO} {
		if v < 0 || v%16 != 0 || v >= 1<<18 {
			return fmt.Errorf("%s-major %s: byte offset %d is not a multiple of 16 below 2^18", d.Major, swzName(d.Swizzle), v)
		}
	}
	return nil
}

// addr is the byte offset of element (mn, k) of es-byte elements that the descriptor reads
// for a matrix starting at start (a buffer aligned to the swizzle's repeat), after the
// canonical layouts of the PTX ISA: in 16-byte units with T = 16/es and W = swizzle/16,
// K-major ((8,m),(T,2k)):((1,SBO),(1,LBO)) unswizzled and ((8,m),(T,2k)):((W,SBO),(1,1))
// swizzled; MN-major ((T,1,m),(8,k)):((1,T,SBO),(1,LBO)) and ((T,W,m),(8,k)):((1,T,LBO),(W,SBO)).
func (d GMMADesc) addr(start, mn, k, es int) int {
	w := d.Swizzle / 16
	var o int
	if d.Major == KMajor {
		kb := k * es
		c, in := kb/16, kb%16
		if w == 0 {
			o = mn%8*16 + mn/8*d.SBO + c*d.LBO + in
		} else {
			o = mn%8*16*w + mn/8*d.SBO + c*16 + in
		}
	} else {
		t := 16 / es
		u, in := mn/t, mn%t*es
		if w == 0 {
			o = u*d.SBO + k%8*16 + k/8*d.LBO + in
		} else {
			o = u%w*16 + u/w*d.LBO + k%8*16*w + k/8*d.SBO + in
		}
	}
	a := start + o
	if w > 0 {
		b := bits.TrailingZeros(uint(w))
		a ^= (a >> 7 & (1<<b - 1)) << 4
	}
	return a
}

// swizzleOf returns l's swizzle (Sw<0,..> when it has none); ok is false for another outer
// function.
func swizzleOf(l layout.ComposedLayout) (layout.Swizzle, bool) {
	if l.Outer == nil {
		return layout.Swizzle{}, true
	}
	sw, ok := l.Outer.(layout.Swizzle)
	return sw, ok
}

func log2i(n int) int { return bits.TrailingZeros(uint(n)) }

// offsets returns the (mn, k) -> offset function of a 2-mode layout whose first mode has
// mnExt elements, with the offsets tabulated once (Layout.Value per element is too slow for
// the tiles' tens of thousands of elements).
func offsets(l layout.Layout, mnExt int) func(mn, k int) int {
	sh, st := l.FlatShape(), l.FlatStride()
	tab := make([]int32, l.Size())
	// an odometer over the flat modes, colexicographic like Value
	idx := make([]int, len(sh))
	o := 0
	for i := range tab {
		tab[i] = int32(o)
		for d := range sh {
			idx[d]++
			o += st[d]
			if idx[d] < sh[d] {
				break
			}
			o -= st[d] * sh[d]
			idx[d] = 0
		}
	}
	return func(mn, k int) int { return int(tab[mn+mnExt*k]) }
}
