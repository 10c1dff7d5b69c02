package dsl

import (
	"fmt"

	"github.com/kgen-dev/kgen/ptx"
)

// wgmma with A from registers (the RS form, CuTe's SM90_64xNx16_F32BF16BF16_RS): FA3 keeps
// P = softmax(Q K^T) in registers and feeds it to P V without a trip through shared memory.
//
// The A fragment of one K block of 16 is four 32-bit registers a thread, each two 16-bit
// values: register r, element j of thread t (0..127) is row 16*(t/32) + (t%32)/4 + 8*(r%2)
// and column 8*(r/2) + 2*(t%4) + j of the 64 x 16 block (PTX ISA, "Register Fragments:
// wgmma .m64nNk16"). The accumulators of m64nNk16 put value i of thread t at row
// 16*(t/32) + (t%32)/4 + 8*((i/2)%2), column 8*(i/4) + 2*(t%4) + i%2: columns 16j..16j+15
// are values 8j..8j+7, and register r of K block j is the pair (8j+2r, 8j+2r+1). So the
// conversion is a cvt.rn.{bf16x2,f16x2}.f32 per pair, no shuffle.

// AccToA converts acc, the f32 accumulators of m (one warpgroup's 64 x N tile, N a multiple
// of 16), to elem (F16 or BF16, round to nearest even) packed as the A register fragment of a
// following wgmma whose K extent is N: a (4, N/16) fragment of F16x2 or BF16x2 registers,
// element (r, j) register r of K block j, for GemmRS. Read acc only after the WaitGroup that
// retires the wgmma writing it.
func (m TiledGMMA) AccToA(k *Kernel, acc Tensor, elem Type) Tensor {
	if !k.live() {
		if acc.k != nil {
			acc.k.errorf("AccToA: nil kernel")
		}
		return Tensor{}
	}
	defer k.hold()()
	at := m.Atom
	pt := regType(elem, 2)
	switch {
	case at.N == 0:
		k.errorf("AccToA: zero GMMA atom (use MakeGMMAAtom)")
	case elem != F16 && elem != BF16:
		k.errorf("AccToA: element type %s; the A registers of wgmma hold F16 or BF16 pairs", elem)
	case at.N%16 != 0:
		k.errorf("AccToA: %s has N = %d; an A fragment takes K blocks of 16 columns (N a multiple of 16)", at, at.N)
	case acc.k != k || !acc.IsFragment() || acc.Elem() != F32 || len(acc.regs) != at.AccRegs():
		k.errorf("AccToA: acc must be the %d f32 registers of %s's Accumulators", at.AccRegs(), at)
	default:
		regs := make([]Value, at.AccRegs()/2)
		for i := range regs {
			regs[i] = k.Pack2(acc.regs[2*i], acc.regs[2*i+1], elem)
		}
		return k.fragment2D(pt, regs, 4)
	}
	return k.badTensor(pt)
}

// fragment2D makes a (rows, len(regs)/rows) register fragment over regs, column-major.
func (k *Kernel) fragment2D(elem Type, regs []Value, rows int) Tensor {
	f := k.valueFragment(elem, regs)
	f.modes = [][]leaf{{{shape: rows, stride: stride{c: 1}, cstride: 1}},
		{{shape: len(regs) / rows, stride: stride{c: int64(rows)}, cstride: rows}}}
	return f
}

// GemmRS issues acc += A * B over the K blocks of stage (a Go int or Value) of the shared
// tile b (N x K) with A from the registers of the calling warpgroup: a is the
// (4, K/16) F16x2 or BF16x2 fragment of the warpgroup's 64 x K block (AccToA makes it from
// accumulators; each warpgroup of m holds its own rows). It emits wgmma.fence, one
// wgmma.mma_async per K block and wgmma.commit_group; Accumulating sets the first block's
// scale-d. The registers of a and acc must stay untouched until WaitGroup retires the group.
// F16 and BF16 atoms only (A from registers has no transpose: the fragment is K-major).
func (m TiledGMMA) GemmRS(k *Kernel, a Tensor, tileB SharedTile, stage any, acc Tensor) {
	if !k.live() {
		if acc.k != nil {
			acc.k.errorf("GemmRS: nil kernel")
		}
		return
	}
	defer k.hold()()
	if !k.checkWgmma("GemmRS") {
		return
	}
	at := m.Atom
	switch {
	case at.N == 0 || m.WarpGroupsM <= 0:
		k.errorf("GemmRS: invalid TiledGMMA (use MakeGMMAAtom and MakeTiledGMMA)")
		return
	case at.A != F16 && at.A != BF16:
		k.errorf("GemmRS: %s; A from registers is supported for F16 and BF16 atoms", at)
		return
	case tileB.k != k:
		k.errorf("GemmRS: tile B is not a SharedTile of this kernel")
		return
	case tileB.Elem != at.B:
		k.errorf("GemmRS: tile B holds %s; %s reads %s", tileB.Elem, at, at.B)
		return
	case acc.k != k || !acc.IsFragment() || acc.Elem() != F32 || len(acc.regs) != at.AccRegs():
		k.errorf("GemmRS: the accumulators must be the %d f32 registers of TiledGMMA.Accumulators", at.AccRegs())
		return
	}
	opB, err := MakeGMMAOperand(at, OperandB, tileB.Layout)
	if err != nil {
		k.errorf("GemmRS: %v", err)
		return
	}
	pt := regType(at.A, 2)
	if want := 4 * len(opB.KBlocks); a.k != k || !a.IsFragment() || a.Elem() != pt || len(a.regs) != want {
		k.errorf("GemmRS: A must be a fragment of %d %s registers (4 per K block of %d; B has %d K blocks), as AccToA makes it",
			want, pt, at.K, len(opB.KBlocks))
		return
	}
	aRegs := make([]ptx.Operand, len(a.regs))
	for i, v := range a.regs {
		if !k.own(v, "GemmRS") {
			return
		}
		r, ok := k.operand(v).(ptx.Reg)
		if !ok {
			k.errorf("GemmRS: A register %d is a constant; wgmma reads A from registers (use k.Var)", i)
			return
		}
		aRegs[i] = r
	}
	scaleD, ok := m.scaleD(k, "GemmRS")
	if !ok {
		return
	}
	b := tileB.Stage(stage)
	dB := b.addr.Add(uint64(b.off)).Shr(uint32(4)).And(uint64(0x3fff)).Or(opB.Desc.Bits(0))
	accs := make(ptx.Vec, len(acc.regs))
	for i, r := range acc.regs {
		accs[i] = r.op
	}
	k.emit(&ptx.Instr{Op: "wgmma.fence", Q: []string{"sync", "aligned"}})
	for j, off := range opB.KBlocks {
		sd := scaleD
		if j > 0 {
			sd = ptx.IntImm(ptx.S64, 1)
		}
		args := ptx.Vec{accs, ptx.Vec(aRegs[4*j : 4*j+4]), k.operand(dB.Add(uint64(off >> 4))),
			sd, ptx.IntImm(ptx.S64, 1), ptx.IntImm(ptx.S64, 1), ptx.IntImm(ptx.S64, int64(opB.Desc.Major))}
		k.emit(&ptx.Instr{Op: "wgmma.mma_async", Q: []string{"sync", "aligned", fmt.Sprintf("m64n%dk%d", at.N, at.K)},
			Types: []ptx.Type{ptx.F32, at.ptxA, at.ptxB}, Args: args})
	}
	k.emit(&ptx.Instr{Op: "wgmma.commit_group", Q: []string{"sync", "aligned"}})
}
