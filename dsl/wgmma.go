package dsl

import (
	"fmt"

	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// SharedTile is shared memory for stages of one wgmma or TMA operand: a buffer aligned to
// 1024 bytes (the 128-byte swizzle's repeat, so that the descriptors' base offset is 0)
// holding stages copies of an (MN, K) tile laid out by Layout.
type SharedTile struct {
	k          *Kernel
	base       Ptr
	Elem       Type
	Layout     layout.ComposedLayout
	Stages     int
	StageBytes int
}

// SharedTile allocates stages tiles of elem laid out by l (a GMMA layout atom tiled with
// TileToShape) in static shared memory aligned to 1024 bytes.
func (k *Kernel) SharedTile(elem Type, l layout.ComposedLayout, stages int) SharedTile {
	if !k.live() {
		return SharedTile{}
	}
	defer k.hold()()
	es := memType(elem).Bytes()
	bytes := (l.Inner.Cosize()*es + 1023) / 1024 * 1024
	s := SharedTile{k: k, Elem: elem, Layout: l, Stages: max(stages, 1), StageBytes: bytes}
	if stages <= 0 {
		k.errorf("SharedTile: %d stages; want at least 1", stages)
	}
	total := s.Stages * bytes
	if bytes > 0 && s.Stages > MaxStaticSharedBytes/bytes {
		k.errorf("SharedTile: %d stages of %d bytes is more than the %d bytes of static shared memory", s.Stages, bytes, MaxStaticSharedBytes)
		total = 16
	}
	s.base = k.alignedShared("SharedTile", total, 1024).As(elem)
	return s
}

// DynamicSharedTilePad is the extra dynamic shared memory a kernel using DynamicSharedTile
// needs: CUDA guarantees the dynamic region only 16-byte alignment (static shared variables
// come first, whatever the declared alignment), so the tiles start at its address rounded up
// to 1024 at run time.
const DynamicSharedTilePad = 1024

// DynamicSharedTile is SharedTile in dynamic shared memory, starting offset bytes (a multiple
// of 1024) past the dynamic region's address rounded up to 1024 (the 128-byte swizzle's
// repeat, which TMA destinations and wgmma descriptors need): for pipelines larger than the
// 48 KiB of static shared memory. The launch gives DynamicSharedTilePad plus the end of the
// last tile (offset + stages*StageBytes).
func (k *Kernel) DynamicSharedTile(elem Type, l layout.ComposedLayout, stages, offset int) SharedTile {
	if !k.live() {
		return SharedTile{}
	}
	defer k.hold()()
	es := memType(elem).Bytes()
	bytes := (l.Inner.Cosize()*es + 1023) / 1024 * 1024
	s := SharedTile{k: k, Elem: elem, Layout: l, Stages: max(stages, 1), StageBytes: bytes}
	if stages <= 0 {
		k.errorf("DynamicSharedTile: %d stages; want at least 1", stages)
	}
	if offset < 0 || offset%1024 != 0 {
		k.errorf("DynamicSharedTile: offset %d is not a non-negative multiple of 1024", offset)
		offset = 0
	}
	// The tiles end DynamicSharedTilePad + offset + Stages*StageBytes bytes into the dynamic
	// region at most: past MaxSharedBytes no GPU can launch the kernel (and the stages'
	// addresses would leave the shared window). Checked without overflowing.
	if room := int64(MaxSharedBytes - DynamicSharedTilePad); int64(offset) > room || (bytes > 0 && int64(s.Stages) > (room-int64(offset))/int64(bytes)) {
		k.errorf("DynamicSharedTile: %d stages of %d bytes from offset %d, with the %d-byte alignment pad, is more than the %d bytes of shared memory a block has on any GPU", s.Stages, bytes, offset, DynamicSharedTilePad, MaxSharedBytes)
		offset = 0
	}
	s.base = k.dynamicShared1024().At(offset).As(elem)
	return s
}

// dynamicShared1024 returns the dynamic shared memory's address rounded up to 1024 bytes.
func (k *Kernel) dynamicShared1024() Ptr {
	dyn := k.DynamicShared(U8, 0)
	addr := k.memo("dynamic_smem_1024", U64, []Value{dyn.addr}, func(d ptx.Reg) {
		k.emit(&ptx.Instr{Op: "add", Types: []ptx.Type{ptx.U64}, Args: []ptx.Operand{d, dyn.addr.op, ptx.IntImm(ptx.U64, 1023)}})
		k.emit(&ptx.Instr{Op: "and", Types: []ptx.Type{ptx.B64}, Args: []ptx.Operand{d, d, ptx.IntImm(ptx.B64, -1024)}})
	})
	return Ptr{k: k, addr: addr, elem: U8, space: ptx.SpaceShared, align: 1024}
}

// alignedShared allocates n bytes of static shared memory aligned to align bytes.
func (k *Kernel) alignedShared(what string, n, align int) Ptr {
	start := (k.smem + int64(align) - 1) / int64(align) * int64(align) // ptxas places variables in order, aligned
	if left := MaxStaticSharedBytes - start; int64(n) > left {
		k.errorf("%s: %d bytes (aligned to %d) is more than the %d bytes of static shared memory left", what, n, align, max(left, 0))
		n = 16
	}
	k.smem = start + (int64(n)+15)/16*16
	name := fmt.Sprintf("smem_%d", len(k.fn.Vars))
	k.fn.Vars = append(k.fn.Vars, &ptx.Var{Space: ptx.SpaceShared, Name: name, Type: ptx.B8, Array: n, Align: align})
	d := k.reg(U64)
	k.emit(&ptx.Instr{Op: "mov", Types: []ptx.Type{ptx.U64}, Args: []ptx.Operand{d, ptx.Sym(name)}})
	return Ptr{k: k, addr: Value{k: k, t: U64, op: d}, elem: U8, space: ptx.SpaceShared, align: align}
}

// StageView returns stage i (a Go int or integer Value) of s as a SharedTile of one stage:
// for a Gemm whose operands sit at different stages (FA's Q, loaded once, against K's ring:
// m.Gemm(k, wg, sQ, sK.StageView(st.Index), 0, acc)).
func (s SharedTile) StageView(i any) SharedTile {
	if s.k == nil {
		return s // the zero SharedTile: nothing to record an error on; its users report it
	}
	v := s
	v.base, v.Stages = s.Stage(i), 1
	return v
}

// Stage returns a pointer to stage i (a Go int or integer Value) of the tile.
func (s SharedTile) Stage(i any) Ptr {
	if s.k == nil {
		return Ptr{} // the zero SharedTile
	}
	if v, ok := i.(Value); ok {
		if !s.k.own(v, "SharedTile.Stage") {
			return s.base
		}
		if !isInt(v.t) {
			s.k.errorf("SharedTile.Stage: the stage is a %s Value; want an integer", v.t)
			return s.base
		}
		return s.base.At(v.To(I32).Mul(int32(s.StageBytes / memType(s.Elem).Bytes())))
	}
	n, ok := i.(int)
	if !ok || n < 0 || n >= s.Stages {
		s.k.errorf("SharedTile.Stage: %v is not a stage 0..%d", i, s.Stages-1)
		n = 0
	}
	return s.base.At(n * s.StageBytes / memType(s.Elem).Bytes())
}

// Tensor views stage i as an (MN, K) tensor with the tile's swizzle, for ordinary loads and
// stores (an epilogue, a check).
func (s SharedTile) Tensor(i any) Tensor {
	if s.k == nil {
		return Tensor{} // the zero SharedTile
	}
	sw, _ := s.Layout.Outer.(layout.Swizzle)
	return s.k.MakeSwizzledTensor(s.Stage(i), sw, s.Layout.Inner)
}

// TiledGMMA tiles a GMMA atom over warpgroups along M (CuTe's TiledMMA of a GMMA atom with
// an atom layout (WarpGroupsM, 1)): warpgroup w computes rows 64w..64w+63 of the block tile.
type TiledGMMA struct {
	Atom        GMMAAtom
	WarpGroupsM int
	accumulate  Value // scale-d of the first K block (a Bool); zero Value: accumulate
}

// Accumulating returns m whose next Gemm's first K block adds to the accumulators only where
// acc (a Bool Value) is true, else overwrites them (wgmma's scale-d; CuTe's
// tiled_mma.set(Field.ACCUMULATE, ...)): with false at the first K tile the accumulators need
// no zeroing. Later K blocks always accumulate.
func (m TiledGMMA) Accumulating(acc Value) TiledGMMA {
	m.accumulate = acc
	return m
}

// MakeTiledGMMA tiles atom over warpGroupsM warpgroups along M.
func MakeTiledGMMA(atom GMMAAtom, warpGroupsM int) TiledGMMA {
	return TiledGMMA{Atom: atom, WarpGroupsM: warpGroupsM}
}

// Accumulators returns the calling thread's zeroed f32 accumulators of the atom (N/2 values
// in CLayout's value order).
func (m TiledGMMA) Accumulators(k *Kernel) Tensor {
	if !k.live() {
		return Tensor{} // nothing to record an error on: the Tensor's users report it
	}
	defer k.hold()()
	if m.Atom.N == 0 {
		k.errorf("Accumulators: zero GMMA atom (use MakeGMMAAtom)")
		return k.badTensor(F32)
	}
	return k.newFragment(F32, []int{m.Atom.AccRegs()}, true)
}

// checkWgmma reports a wgmma on a target without it (only sm_90a has wgmma).
func (k *Kernel) checkWgmma(what string) bool {
	if k.target != ptx.SM90a {
		k.errorf("%s: wgmma needs sm_90a (the arch-specific target); the kernel targets %s", what, k.target)
		return false
	}
	return true
}

// WgmmaFence orders register accesses before the wgmmas that follow (wgmma.fence).
func (k *Kernel) WgmmaFence() {
	if !k.live() {
		return
	}
	if k.checkWgmma("WgmmaFence") {
		k.emit(&ptx.Instr{Op: "wgmma.fence", Q: []string{"sync", "aligned"}})
	}
}

// WgmmaCommit closes a group of the wgmmas issued since the last commit (wgmma.commit_group).
func (k *Kernel) WgmmaCommit() {
	if !k.live() {
		return
	}
	if k.checkWgmma("WgmmaCommit") {
		k.emit(&ptx.Instr{Op: "wgmma.commit_group", Q: []string{"sync", "aligned"}})
	}
}

// WaitGroup waits until at most n committed wgmma groups are in flight (wgmma.wait_group n);
// accumulators are read only after the group that writes them is retired.
func (k *Kernel) WaitGroup(n int) {
	if !k.live() {
		return
	}
	if !k.checkWgmma("WaitGroup") {
		return
	}
	if n < 0 || n > 7 {
		k.errorf("WaitGroup: %d groups; wgmma.wait_group takes 0 to 7", n)
		return
	}
	k.emit(&ptx.Instr{Op: "wgmma.wait_group", Q: []string{"sync", "aligned"}, Args: []ptx.Operand{ptx.IntImm(ptx.S64, int64(n))}})
}

// Gemm issues acc += A * B over the K blocks of stage (a Go int or Value; a Value needs
// tiles of as many stages: StageView takes one) of the tiles a (64*WarpGroupsM x K) and b
// (N x K) for the warpgroup wg (a Go int or a Value, 0..WarpGroupsM-1): wgmma.fence, one
// wgmma.mma_async per K block, wgmma.commit_group. The descriptors come from the tiles'
// layouts (MakeGMMAOperand); a layout no descriptor reads is an error at the caller's line.
// Wait with WaitGroup before reading acc.
func (m TiledGMMA) Gemm(k *Kernel, wg any, tileA, tileB SharedTile, stage any, acc Tensor) {
	if !k.live() {
		if acc.k != nil {
			acc.k.errorf("Gemm: nil kernel")
		}
		return
	}
	defer k.hold()()
	if !k.checkWgmma("Gemm") {
		return
	}
	if tileA.k != k || tileB.k != k {
		k.errorf("Gemm: the tiles are not SharedTiles of this kernel")
		return
	}
	at := m.Atom
	if at.N == 0 || m.WarpGroupsM <= 0 {
		k.errorf("Gemm: invalid TiledGMMA (use MakeGMMAAtom and MakeTiledGMMA)")
		return
	}
	if tileA.Elem != at.A || tileB.Elem != at.B {
		k.errorf("Gemm: tiles of %s and %s; %s reads %s", tileA.Elem, tileB.Elem, at, at.A)
		return
	}
	if _, runtime := stage.(Value); runtime && tileA.Stages != tileB.Stages {
		k.errorf("Gemm: tile A has %d stages, tile B %d; Gemm reads the same run-time stage of both (pass one stage with StageView)", tileA.Stages, tileB.Stages)
		return
	}
	if !acc.IsFragment() || acc.Elem() != F32 || len(acc.regs) != at.AccRegs() {
		k.errorf("Gemm: the accumulators must be the %d f32 registers of TiledGMMA.Accumulators", at.AccRegs())
		return
	}
	opA, err := MakeGMMAOperand(at, OperandA, tileA.Layout)
	if err == nil && len(opA.MBlocks) != m.WarpGroupsM {
		err = fmt.Errorf("operand A has %d blocks of 64 rows for %d warpgroups", len(opA.MBlocks), m.WarpGroupsM)
	}
	if err != nil {
		k.errorf("Gemm: %v", err)
		return
	}
	opB, err := MakeGMMAOperand(at, OperandB, tileB.Layout)
	if err != nil {
		k.errorf("Gemm: %v", err)
		return
	}
	if len(opA.KBlocks) != len(opB.KBlocks) {
		k.errorf("Gemm: A has %d K blocks of %d, B %d", len(opA.KBlocks), at.K, len(opB.KBlocks))
		return
	}
	a, b := tileA.Stage(stage), tileB.Stage(stage)
	aAddr := a.addr.Add(uint64(a.off))
	if m.WarpGroupsM > 1 {
		step := opA.MBlocks[1] - opA.MBlocks[0]
		for i := 2; i < len(opA.MBlocks); i++ {
			if opA.MBlocks[i]-opA.MBlocks[i-1] != step {
				k.errorf("Gemm: A's 64-row blocks are not evenly spaced (%v)", opA.MBlocks)
				return
			}
		}
		w, ok := wg.(Value)
		if !ok {
			n, isInt := wg.(int)
			if !isInt || n < 0 || n >= m.WarpGroupsM {
				k.errorf("Gemm: warpgroup %v is not 0..%d", wg, m.WarpGroupsM-1)
				return
			}
			w = k.Const(U32, n)
		}
		aAddr = aAddr.Add(w.To(U64).Mul(uint64(step)))
	}
	desc := func(addr Value, d GMMADesc) Value {
		return addr.Shr(uint32(4)).And(uint64(0x3fff)).Or(d.Bits(0))
	}
	dA := desc(aAddr, opA.Desc)
	dB := desc(b.addr.Add(uint64(b.off)), opB.Desc)
	scaleD, ok := m.scaleD(k, "Gemm")
	if !ok {
		return
	}
	accs := make(ptx.Vec, len(acc.regs))
	for i, r := range acc.regs {
		accs[i] = r.op
	}
	k.emit(&ptx.Instr{Op: "wgmma.fence", Q: []string{"sync", "aligned"}})
	for j := range opA.KBlocks {
		sd := scaleD
		if j > 0 {
			sd = ptx.IntImm(ptx.S64, 1)
		}
		args := ptx.Vec{accs, k.operand(dA.Add(uint64(opA.KBlocks[j] >> 4))), k.operand(dB.Add(uint64(opB.KBlocks[j] >> 4))),
			sd, ptx.IntImm(ptx.S64, 1), ptx.IntImm(ptx.S64, 1)}
		if at.ptxA == ptx.F16 || at.ptxA == ptx.BF16 {
			args = append(args, ptx.IntImm(ptx.S64, int64(opA.Desc.Major)), ptx.IntImm(ptx.S64, int64(opB.Desc.Major)))
		}
		k.emit(&ptx.Instr{Op: "wgmma.mma_async", Q: []string{"sync", "aligned", fmt.Sprintf("m64n%dk%d", at.N, at.K)},
			Types: []ptx.Type{ptx.F32, at.ptxA, at.ptxB}, Args: args})
	}
	k.emit(&ptx.Instr{Op: "wgmma.commit_group", Q: []string{"sync", "aligned"}})
}

// scaleD is the scale-d operand of the first K block: 1, or Accumulating's Bool.
func (m TiledGMMA) scaleD(k *Kernel, what string) (ptx.Operand, bool) {
	if m.accumulate.k == nil {
		return ptx.IntImm(ptx.S64, 1), true
	}
	if !k.own(m.accumulate, what) {
		return nil, false
	}
	if m.accumulate.t != Bool {
		k.errorf("%s: Accumulating takes a Bool, not %s", what, m.accumulate.t)
		return nil, false
	}
	if m.accumulate.IsConst() {
		return ptx.IntImm(ptx.S64, int64(m.accumulate.op.(ptx.Imm).Bits&1)), true
	}
	return k.operand(m.accumulate), true
}

// WarpgroupRegAlloc raises the calling warpgroup's register limit to n (setmaxnreg.inc,
// CuTe DSL's warpgroup_reg_alloc); WarpgroupRegDealloc lowers it (setmaxnreg.dec). n is 24
// to 256 in steps of 8; every warp of the warpgroup executes it.
func (k *Kernel) WarpgroupRegAlloc(n int) {
	if !k.live() {
		return
	}
	k.setmaxnreg("WarpgroupRegAlloc", "inc", n)
}

// WarpgroupRegDealloc lowers the calling warpgroup's register limit to n (setmaxnreg.dec).
func (k *Kernel) WarpgroupRegDealloc(n int) {
	if !k.live() {
		return
	}
	k.setmaxnreg("WarpgroupRegDealloc", "dec", n)
}

func (k *Kernel) setmaxnreg(what, dir string, n int) {
	switch {
	case k.target != ptx.SM90a && k.target != ptx.SM100a:
		k.errorf("%s: setmaxnreg needs sm_90a or sm_100a; the kernel targets %s", what, k.target)
	case n < 24 || n > 256 || n%8 != 0:
		k.errorf("%s: %d registers; setmaxnreg takes 24 to 256 in steps of 8", what, n)
	default:
		k.emit(&ptx.Instr{Op: "setmaxnreg", Q: []string{dir, "sync", "aligned"}, Types: []ptx.Type{ptx.U32}, Args: []ptx.Operand{ptx.IntImm(ptx.U32, int64(n))}})
	}
}
