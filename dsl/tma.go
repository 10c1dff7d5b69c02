package dsl

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// TensorMapSource is where a TMA copy finds its tensor map: a TensorMap parameter
// (TensorMapParam, the map by value) or a TensorMapRef (a map's address).
type TensorMapSource interface {
	Addr() Value // the map's generic address (U64)
}

// TensorMapRef is the generic address of a TMA tensor map (the 128-byte, 64-byte aligned
// descriptor the host encodes: cuTensorMapEncodeTiled, or emu.TensorMap.Encode) held
// somewhere other than a parameter, e.g. in global memory.
type TensorMapRef struct {
	addr Value // U64
}

// Addr returns the map's generic address.
func (r TensorMapRef) Addr() Value { return r.addr }

// TensorMapAt takes a tensor map's generic address (a U64 Value: a map in global memory,
// or a grid-constant parameter's address).
func (k *Kernel) TensorMapAt(addr Value) TensorMapRef {
	if !k.live() {
		return TensorMapRef{}
	}
	if !k.own(addr, "TensorMapAt") {
		return TensorMapRef{}
	}
	if addr.t != U64 {
		k.errorf("TensorMapAt: the address is %s, not U64", addr.t)
		return TensorMapRef{}
	}
	return TensorMapRef{addr: addr}
}

// TensorMapPtrParam declares a U64 parameter holding the global address of a tensor map
// (64-byte aligned, written before the launch).
func (k *Kernel) TensorMapPtrParam(name string) TensorMapRef {
	if !k.live() {
		return TensorMapRef{}
	}
	return k.TensorMapAt(k.Param(name, U64))
}

// TMACopy is a TMA load of one stage of a SharedTile (CuTe's make_tma_copy for a 2-D global
// tensor and a shared layout): boxes of the layout atom's row width along the contiguous
// dimension, as many as the tile needs, each landing where the shared layout (with its
// swizzle, which the tensor map's swizzle reproduces) places it.
type TMACopy struct {
	k     *Kernel
	m     Value // the map's generic address
	tile  SharedTile
	major GMMAMajor
	boxes []tmaBox
	// Box is the tensor map's box, innermost (contiguous) dimension first: build the map
	// with it and SwizzleBytes.
	Box          [2]int
	SwizzleBytes int
	Bytes        int // bytes one stage's load brings (the expect_tx of its barrier)
	// Parts is the number of cluster blocks that share the stage's load
	// (MakeTMACopyMulticast; 0 or 1: one block loads it all).
	Parts int
	// part is rank 0's boxes of a shared load; rank r's are shifted by r times the deltas.
	part                     []tmaBox
	partSmem, partC0, partC1 int
}

type tmaBox struct {
	smem   int // byte offset in the stage
	c0, c1 int // the box's coordinates relative to the tile's (inner, outer)
}

// MakeTMACopy makes the TMA load of tile's stages from the global tensor whose map is m: a
// K-major tile reads a K-contiguous tensor ((K, MN) in the map, innermost first), an
// MN-major tile an MN-contiguous one. A layout that no box sequence writes is an error, and
// so is a TensorMap parameter over another element type than the tile's.
func (k *Kernel) MakeTMACopy(m TensorMapSource, tile SharedTile) *TMACopy {
	if !k.live() {
		return nil
	}
	defer k.hold()()
	c := &TMACopy{k: k, tile: tile}
	if m == nil || tile.k != k || m.Addr().k != k {
		k.errorf("MakeTMACopy: the tile or the tensor map is not of this kernel")
		return c
	}
	c.m = m.Addr()
	if tm, ok := m.(TensorMap); ok && tm.Elem() != tile.Elem {
		k.errorf("MakeTMACopy: the tensor map is over %s, the tile holds %s", tm.Elem(), tile.Elem)
		return c
	}
	if k.target.SM() < 90 {
		k.errorf("MakeTMACopy: TMA needs sm_90; the kernel targets %s", k.target)
		return c
	}
	es := memType(tile.Elem).Bytes()
	p, err := planTMA(tile.Layout, es)
	if err != nil {
		k.errorf("MakeTMACopy: %v", err)
		return c
	}
	c.major, c.boxes, c.Box, c.SwizzleBytes = p.major, p.boxes, p.box, p.swz
	c.Bytes = es * c.Box[0] * c.Box[1] * len(c.boxes)
	return c
}

// tmaPlan is what MakeTMACopy derives from a tile's layout and element size alone.
type tmaPlan struct {
	major GMMAMajor
	boxes []tmaBox
	box   [2]int
	swz   int
}

// tmaPlans caches planTMA for layouts without an outer function or with a swizzle (whose
// printed form is the whole layout); checking every element of a stage is most of a
// MakeTMACopy.
var (
	tmaPlans     sync.Map
	tmaPlanCount atomic.Int64
)

type tmaPlanResult struct {
	p   tmaPlan
	err error
}

// planTMA returns the TMA boxes that write a tile of es-byte elements laid out as l, or an
// error saying why none do; the plan's boxes are the caller's own.
func planTMA(l layout.ComposedLayout, es int) (tmaPlan, error) {
	var key string
	if _, ok := swizzleOf(l); ok {
		key = fmt.Sprintf("%d %v", es, l)
		if r, ok := tmaPlans.Load(key); ok {
			r := r.(tmaPlanResult)
			r.p.boxes = slices.Clone(r.p.boxes)
			return r.p, r.err
		}
	}
	p, err := makeTMAPlan(l, es)
	if key != "" {
		layoutCacheStore(&tmaPlans, &tmaPlanCount, key, tmaPlanResult{tmaPlan{p.major, slices.Clone(p.boxes), p.box, p.swz}, err})
	}
	return p, err
}

func makeTMAPlan(l layout.ComposedLayout, es int) (tmaPlan, error) {
	var p tmaPlan
	if l.Inner.Rank() != 2 {
		return p, fmt.Errorf("layout %v is not (MN, K)", l)
	}
	sh := l.Inner.Shape()
	mnExt, kExt := size(sh.At(0)), size(sh.At(1))
	off := offsets(l.Inner, mnExt)
	swz := 0
	if sw, ok := swizzleOf(l); ok && sw.B > 0 {
		if sw.M != 4-log2i(es) || sw.S != 3 || sw.B > 3 {
			return p, fmt.Errorf("swizzle %v is no TMA swizzle for %d-byte elements", sw, es)
		}
		swz = 16 << sw.B
	} else if !ok {
		return p, fmt.Errorf("layout %v: the outer function is not a swizzle", l)
	}
	p.swz = swz
	w := max(swz, 16) / es // elements of one box row
	try := func(major GMMAMajor) error {
		p.boxes = nil
		inner, outer := kExt, mnExt
		at := func(i, o int) int { return off(o, i) }
		if major == MNMajor {
			inner, outer = mnExt, kExt
			at = off
		}
		if inner%w != 0 {
			return fmt.Errorf("%s-major: the contiguous extent %d is not a multiple of the %d-element box row", major, inner, w)
		}
		if outer > 256 {
			return fmt.Errorf("%s-major: %d rows; a TMA box has at most 256", major, outer)
		}
		for j := 0; j < inner/w; j++ {
			base := at(j*w, 0)
			for o := 0; o < outer; o++ {
				for i := 0; i < w; i++ {
					if got := at(j*w+i, o); got != base+o*w+i {
						return fmt.Errorf("%s-major: element %d of row %d of box %d is at %d, a box writes %d", major, i, o, j, got, base+o*w+i)
					}
				}
			}
			p.boxes = append(p.boxes, tmaBox{smem: es * base, c0: j * w})
		}
		p.major, p.box = major, [2]int{w, outer}
		return nil
	}
	errK := try(KMajor)
	if errK != nil {
		if errMN := try(MNMajor); errMN != nil {
			return tmaPlan{}, fmt.Errorf("no TMA boxes write layout %v: %v; %v", l, errK, errMN)
		}
	}
	return p, nil
}

// MakeTMACopyMulticast is MakeTMACopy for a tile that the parts blocks of a cluster load
// together and each receive whole (CuTe's make_tma_copy with SM90_TMA_LOAD_MULTICAST and a
// multicast count): LoadMulticast issues only the calling block's part, block rank r (of
// %cluster_ctarank) the r-th of parts equal slices, multicast to the blocks of the mask,
// whose barriers each receive the whole tile's Bytes. The slices are whole boxes where the
// tile has a multiple of parts boxes, else boxes of 1/parts of the rows (Box changes: build
// the tensor map with it), each a multiple of 8 rows so that the swizzle repeats.
func (k *Kernel) MakeTMACopyMulticast(m TensorMapSource, tile SharedTile, parts int) *TMACopy {
	if !k.live() {
		return nil
	}
	defer k.hold()()
	c := k.MakeTMACopy(m, tile)
	if c.boxes == nil {
		return c
	}
	if parts < 1 || parts > 16 {
		k.errorf("MakeTMACopyMulticast: %d parts; a cluster shares a load among 1 to 16 blocks", parts)
		c.boxes = nil
		return c
	}
	c.Parts = parts
	if parts == 1 {
		c.part = c.boxes
		return c
	}
	es := memType(tile.Elem).Bytes()
	if n := len(c.boxes); n%parts == 0 {
		per := n / parts
		d := func(i int) [3]int {
			return [3]int{c.boxes[i].smem - c.boxes[0].smem, c.boxes[i].c0 - c.boxes[0].c0, c.boxes[i].c1 - c.boxes[0].c1}
		}
		step := d(per)
		uniform := true
		for r := 0; r < parts; r++ {
			for i := 0; i < per; i++ {
				got, base := d(r*per+i), d(i)
				if got != [3]int{base[0] + r*step[0], base[1] + r*step[1], base[2] + r*step[2]} {
					uniform = false
				}
			}
		}
		if uniform {
			c.part, c.partSmem, c.partC0, c.partC1 = c.boxes[:per], step[0], step[1], step[2]
			return c
		}
	}
	rows := c.Box[1] / parts
	if c.Box[1]%parts != 0 || rows%8 != 0 {
		k.errorf("MakeTMACopyMulticast: %d boxes of %d rows do not split into %d equal parts (whole boxes, or a multiple of 8 rows each)", len(c.boxes), c.Box[1], parts)
		c.boxes = nil
		return c
	}
	c.Box[1] = rows
	c.part, c.partSmem, c.partC1 = c.boxes, es*rows*c.Box[0], rows
	return c
}

// kernel returns c's kernel (nil for a nil or zero TMACopy).
func (c *TMACopy) kernel() *Kernel {
	if c == nil {
		return nil
	}
	return c.k
}

// Major says which tensor dimension is contiguous: KMajor maps are (K, MN), MNMajor (MN, K).
func (c *TMACopy) Major() GMMAMajor {
	if c == nil {
		return 0
	}
	return c.major
}

// Load issues the loads of the tile at (mn, kk) (element coordinates, U32 or I32 Values or
// Go ints) into stage of the tile, completing bar's transaction bytes (c.Bytes). Call it
// from one thread, after bar's ArriveExpectTx.
func (c *TMACopy) Load(bar Mbarrier, stage any, mn, kk any) {
	c.load("TMACopy.Load", bar, stage, mn, kk, nil, nil)
}

// LoadOuter is Load from a map of rank 2 + len(outer) (at most 5) whose boxes have extent 1
// in the dimensions past the first two: outer (U32 or I32 Values or Go ints) gives those
// coordinates, e.g. the batch of a [batch, seq, heads*d] tensor, so that TMA zero-fills the
// rows past each batch's sequence instead of reading the next batch's.
func (c *TMACopy) LoadOuter(bar Mbarrier, stage any, mn, kk any, outer ...any) {
	c.load("TMACopy.LoadOuter", bar, stage, mn, kk, nil, outer)
}

// LoadMulticast is Load into the same shared offsets of every block of the cluster in mask
// (a U16 Value; bit i is the block of rank i), completing each block's barrier at the same
// offset (.multicast::cluster, sm_90a).
func (c *TMACopy) LoadMulticast(bar Mbarrier, stage any, mn, kk any, mask Value) {
	c.load("TMACopy.LoadMulticast", bar, stage, mn, kk, &mask, nil)
}

func (c *TMACopy) load(what string, bar Mbarrier, stage any, mn, kk any, mask *Value, outer []any) {
	k := c.kernel()
	if k == nil {
		orphan(what, bar.k, anyKernel(stage), anyKernel(mn), anyKernel(kk))
		return
	}
	if c.boxes == nil {
		k.errorf("%s: the copy failed to build (see MakeTMACopy's error)", what)
		return
	}
	defer k.hold()()
	if bar.k != k {
		k.errorf("%s: the barrier is not of this kernel", what)
		return
	}
	if mask != nil {
		if k.target != ptx.SM90a && k.target != ptx.SM100a {
			k.errorf("%s: .multicast::cluster needs sm_90a or sm_100a; the kernel targets %s", what, k.target)
			return
		}
		if !k.own(*mask, what) {
			return
		}
		if mask.t != U16 {
			k.errorf("%s: the cluster mask is %s, not U16", what, mask.t)
			return
		}
	}
	in, out, ok := c.coords(what, mn, kk)
	if !ok {
		return
	}
	if len(outer) > 3 {
		k.errorf("%s: %d outer coordinates; a tensor map has at most 5 dimensions (2 + 3)", what, len(outer))
		return
	}
	var extra []Value
	for i, x := range outer {
		if v, isVal := x.(Value); isVal {
			if !k.own(v, what) {
				return
			}
			if v.t != U32 && v.t != I32 {
				k.errorf("%s: outer coordinate %d is %s, not U32 or I32", what, i, v.t)
				return
			}
			extra = append(extra, v.To(I32))
			continue
		}
		v, ok := k.val(x, I32, what)
		if !ok {
			return
		}
		extra = append(extra, v)
	}
	dst := c.tile.Stage(stage)
	q := []string{fmt.Sprintf("%dd", 2+len(extra)), "shared::cluster", "global", "tile", "mbarrier::complete_tx::bytes"}
	if mask != nil {
		q = append(q, "multicast::cluster")
	}
	boxes := c.boxes
	if c.Parts > 1 {
		if mask == nil {
			k.errorf("%s: the copy is shared by %d cluster blocks (MakeTMACopyMulticast); load it with LoadMulticast", what, c.Parts)
			return
		}
		// This block's part: rank 0's boxes shifted by rank times the part's step.
		boxes = c.part
		rank := k.BlockRankInCluster()
		if c.partSmem != 0 {
			dst = dst.As(U8).At(rank.Mul(uint32(c.partSmem)).To(I32)).As(c.tile.Elem)
		}
		if c.partC0 != 0 {
			in = in.Add(rank.Mul(uint32(c.partC0)).To(I32))
		}
		if c.partC1 != 0 {
			out = out.Add(rank.Mul(uint32(c.partC1)).To(I32))
		}
	}
	for _, b := range boxes {
		args := []ptx.Operand{ptx.Addr{Base: k.operand(dst.addr), Off: dst.off + int64(b.smem)},
			c.tensorAddr(in, out, b, extra...),
			bar.mem()}
		if mask != nil {
			args = append(args, k.operand(*mask))
		}
		k.emit(&ptx.Instr{Op: "cp.async.bulk.tensor", Q: append([]string(nil), q...), Args: args})
	}
}

// coords returns the tile's coordinates (mn, kk) as the map's (inner, outer) I32 values.
func (c *TMACopy) coords(what string, mn, kk any) (in, out Value, ok bool) {
	k := c.k
	coord := func(x any) (Value, bool) {
		if v, ok := x.(Value); ok {
			if !k.own(v, what) {
				return Value{}, false
			}
			if v.t != U32 && v.t != I32 {
				k.errorf("%s: coordinate %s is %s, not U32 or I32", what, v, v.t)
				return Value{}, false
			}
			return v.To(I32), true
		}
		return k.val(x, I32, what)
	}
	vmn, ok1 := coord(mn)
	vk, ok2 := coord(kk)
	if !ok1 || !ok2 {
		return Value{}, Value{}, false
	}
	in, out = vk, vmn
	if c.major == MNMajor {
		in, out = vmn, vk
	}
	// The GPU raises an illegal instruction for a box whose inner coordinate is not a
	// multiple of 16 bytes (docs/facts.md); a constant one is caught here.
	if in.IsConst() {
		x := int64(int32(uint32(in.op.(ptx.Imm).Bits)))
		if b := x * int64(c.tile.Elem.Bytes()); b%16 != 0 {
			k.errorf("%s: the inner coordinate %d is %d bytes, not a multiple of 16 (TMA boxes must start 16-byte aligned)", what, x, b)
			return Value{}, Value{}, false
		}
	}
	return in, out, true
}

// tensorAddr is the [map, {c0, c1, extra...}] operand of box b at the tile coordinates
// (in, out) and the outer coordinates extra.
func (c *TMACopy) tensorAddr(in, out Value, b tmaBox, extra ...Value) ptx.TensorAddr {
	k := c.k
	reg := func(v Value) ptx.Operand {
		if v.IsConst() {
			r := k.reg(I32)
			k.emit(&ptx.Instr{Op: "mov", Types: []ptx.Type{ptx.S32}, Args: []ptx.Operand{r, k.operand(v)}})
			return r
		}
		return k.operand(v)
	}
	coords := ptx.Vec{reg(in.Add(int32(b.c0))), reg(out.Add(int32(b.c1)))}
	for _, v := range extra {
		coords = append(coords, reg(v))
	}
	return ptx.TensorAddr{Map: k.operand(c.m), Coords: coords}
}

// Store writes stage of the tile to the global tensor at the tile coordinates (mn, kk) (TMA
// store, cp.async.bulk.tensor ... .bulk_group; boxes outside the tensor are clipped). Call it
// from one thread after the shared-memory writes it stores are visible to the async proxy
// (each writing thread's FenceProxyAsync, then a barrier); BulkCommit and BulkWait complete it.
func (c *TMACopy) Store(stage any, mn, kk any) {
	k := c.kernel()
	if k == nil {
		orphan("TMACopy.Store", anyKernel(stage), anyKernel(mn), anyKernel(kk))
		return
	}
	if c.boxes == nil {
		k.errorf("TMACopy.Store: the copy failed to build (see MakeTMACopy's error)")
		return
	}
	defer k.hold()()
	if c.Parts > 1 {
		k.errorf("TMACopy.Store: the copy is a load shared by %d cluster blocks (MakeTMACopyMulticast); store through a MakeTMACopy", c.Parts)
		return
	}
	in, out, ok := c.coords("TMACopy.Store", mn, kk)
	if !ok {
		return
	}
	src := c.tile.Stage(stage)
	for _, b := range c.boxes {
		k.emit(&ptx.Instr{Op: "cp.async.bulk.tensor", Q: []string{"2d", "global", "shared::cta", "tile", "bulk_group"},
			Args: []ptx.Operand{c.tensorAddr(in, out, b), ptx.Addr{Base: k.operand(src.addr), Off: src.off + int64(b.smem)}}})
	}
}

// BulkCommit closes a group of the thread's bulk copies issued since the last one
// (cp.async.bulk.commit_group).
func (k *Kernel) BulkCommit() {
	if !k.live() {
		return
	}
	if k.target.SM() < 90 {
		k.errorf("BulkCommit: bulk copies need sm_90; the kernel targets %s", k.target)
		return
	}
	k.emit(&ptx.Instr{Op: "cp.async.bulk.commit_group"})
}

// BulkWait waits until at most n of the thread's committed bulk groups are pending; with read
// set, only until their sources have been read (the shared memory may be reused), not until
// the writes are done (cp.async.bulk.wait_group{.read} n).
func (k *Kernel) BulkWait(n int, read bool) {
	if !k.live() {
		return
	}
	if k.target.SM() < 90 {
		k.errorf("BulkWait: bulk copies need sm_90; the kernel targets %s", k.target)
		return
	}
	if n < 0 || n > 63 {
		k.errorf("BulkWait: %d groups; want 0 to 63", n)
		return
	}
	var q []string
	if read {
		q = []string{"read"}
	}
	k.emit(&ptx.Instr{Op: "cp.async.bulk.wait_group", Q: q, Args: []ptx.Operand{ptx.IntImm(ptx.S64, int64(n))}})
}
