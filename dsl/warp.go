package dsl

import (
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/ptx"
)

// FullMask is the member mask of a whole warp.
const FullMask = 0xFFFFFFFF

// ReduceOp is a reduction operator for warp and block reductions.
type ReduceOp int

// The reduction operators.
const (
	Sum ReduceOp = iota
	Max
	Min
	BitAnd
	BitOr
	BitXor
)

var reduceNames = [...]string{"Sum", "Max", "Min", "BitAnd", "BitOr", "BitXor"}

func (op ReduceOp) String() string {
	if op < 0 || int(op) >= len(reduceNames) {
		return fmt.Sprintf("ReduceOp(%d)", int(op)) // the value, not "?"
	}
	return reduceNames[op]
}

// combine applies the operator.
func (op ReduceOp) combine(a, b Value) Value {
	switch op {
	case Sum:
		return a.Add(b)
	case Max:
		return a.Max(b)
	case Min:
		return a.Min(b)
	case BitAnd:
		return a.And(b)
	case BitOr:
		return a.Or(b)
	default:
		return a.Xor(b)
	}
}

// identity returns the operator's neutral element of type t.
func (k *Kernel) identity(op ReduceOp, t Type) Value {
	switch op {
	case Max:
		if isFloat(t) {
			return k.Const(t, math.Inf(-1))
		}
		if t.Kind() == ptx.KindSigned {
			return k.Const(t, int64(-1)<<(t.Bits()-1))
		}
		return k.Const(t, 0)
	case Min:
		if isFloat(t) {
			return k.Const(t, math.Inf(1))
		}
		if t.Kind() == ptx.KindSigned {
			return k.Const(t, int64(1)<<(t.Bits()-1)-1)
		}
		return wrapInt(k, t, -1)
	case BitAnd:
		return wrapInt(k, t, -1)
	}
	return k.Const(t, 0)
}

func (k *Kernel) checkReduce(what string, op ReduceOp, v Value) bool {
	if !k.own(v, what) {
		return false
	}
	if op < Sum || op > BitXor {
		k.errorf("%s: unknown reduction operator %d", what, int(op))
		return false
	}
	if !isNum(v.t) || (op >= BitAnd && !isInt(v.t)) {
		k.errorf("%s: %v is not defined for %s", what, op, v.t)
		return false
	}
	return true
}

// shuffle emits shfl.sync.mode on 32-bit words; 64-bit values shuffle as two halves and
// 16-bit values in the low half of a word.
func (k *Kernel) shuffle(what, mode string, v Value, b any, c uint32) Value {
	defer k.hold()()
	if !k.own(v, what) {
		return k.poison(v.t)
	}
	k.uniformWarp(what)
	if v.t == Bool || v.t.Bits() > 64 || v.t.Bits() < 16 && v.t.Bits() != 8 {
		k.errorf("%s: cannot shuffle a %s", what, v.t)
		return k.poison(v.t)
	}
	lane, ok := k.val(b, U32, what)
	if !ok {
		return k.poison(v.t)
	}
	word := func(x ptx.Operand) ptx.Reg {
		d := k.reg(ptx.B32)
		k.emit(&ptx.Instr{Op: "shfl.sync", Q: []string{mode}, Types: []ptx.Type{ptx.B32},
			Args: []ptx.Operand{d, x, k.operand(lane), ptx.IntImm(ptx.B32, int64(c)), ptx.IntImm(ptx.B32, FullMask)}})
		return d
	}
	src := k.operand(v)
	if im, isImm := src.(ptx.Imm); isImm {
		r := k.reg(v.t)
		k.emit(&ptx.Instr{Op: "mov", Types: []ptx.Type{movType(v.t)}, Args: []ptx.Operand{r, im}})
		src = r
	}
	switch v.t.RegType().Bits() {
	case 32:
		d := word(src)
		out := k.reg(v.t)
		k.emit(&ptx.Instr{Op: "mov", Types: []ptx.Type{ptx.B32}, Args: []ptx.Operand{out, d}})
		return Value{k: k, t: v.t, op: out}
	case 64:
		lo, hi := k.reg(ptx.B32), k.reg(ptx.B32)
		k.emit(&ptx.Instr{Op: "mov", Types: []ptx.Type{ptx.B64}, Args: []ptx.Operand{ptx.Vec{lo, hi}, src}})
		dlo, dhi := word(lo), word(hi)
		out := k.reg(v.t)
		k.emit(&ptx.Instr{Op: "mov", Types: []ptx.Type{ptx.B64}, Args: []ptx.Operand{out, ptx.Vec{dlo, dhi}}})
		return Value{k: k, t: v.t, op: out}
	default: // 16-bit registers
		w := k.reg(ptx.B32)
		k.emit(&ptx.Instr{Op: "mov", Types: []ptx.Type{ptx.B32}, Args: []ptx.Operand{w, ptx.Vec{src, src}}})
		d := word(w)
		out, junk := k.reg(v.t), k.reg(v.t)
		k.emit(&ptx.Instr{Op: "mov", Types: []ptx.Type{ptx.B32}, Args: []ptx.Operand{ptx.Vec{out, junk}, d}})
		return Value{k: k, t: v.t, op: out}
	}
}

func movType(t Type) Type {
	t = t.RegType()
	if t.IsFloat() && t != F32 && t != F64 {
		return t.BitType()
	}
	return t
}

// ShuffleXor returns v from lane (laneid xor mask) of the warp (shfl.sync.bfly).
func (k *Kernel) ShuffleXor(v Value, mask any) Value {
	if !k.live() {
		return Value{}
	}
	return k.shuffle("ShuffleXor", "bfly", v, mask, 0x1f)
}

// ShuffleDown returns v from lane laneid+delta (its own v past the warp's end).
func (k *Kernel) ShuffleDown(v Value, delta any) Value {
	if !k.live() {
		return Value{}
	}
	return k.shuffle("ShuffleDown", "down", v, delta, 0x1f)
}

// ShuffleUp returns v from lane laneid-delta (its own v before lane 0).
func (k *Kernel) ShuffleUp(v Value, delta any) Value {
	if !k.live() {
		return Value{}
	}
	return k.shuffle("ShuffleUp", "up", v, delta, 0)
}

// ShuffleIdx returns v from the given lane (a broadcast when lane is uniform).
func (k *Kernel) ShuffleIdx(v Value, lane any) Value {
	if !k.live() {
		return Value{}
	}
	return k.shuffle("ShuffleIdx", "idx", v, lane, 0x1f)
}

func (k *Kernel) vote(what, mode string, p Value) Value {
	if !k.own(p, what) {
		return k.poison(Bool)
	}
	if p.t != Bool {
		k.errorf("%s: want a Bool, got %s", what, p.t)
		return k.poison(Bool)
	}
	k.uniformWarp(what)
	src := k.operand(p)
	if mode == "ballot" {
		d := k.reg(U32)
		k.emit(&ptx.Instr{Op: "vote.sync", Q: []string{mode}, Types: []ptx.Type{ptx.B32}, Args: []ptx.Operand{d, src, ptx.IntImm(ptx.B32, FullMask)}})
		return Value{k: k, t: U32, op: d}
	}
	d := k.reg(Bool)
	k.emit(&ptx.Instr{Op: "vote.sync", Q: []string{mode}, Types: []ptx.Type{ptx.Pred}, Args: []ptx.Operand{d, src, ptx.IntImm(ptx.B32, FullMask)}})
	return Value{k: k, t: Bool, op: d}
}

// VoteAll reports whether p holds in every lane of the warp.
func (k *Kernel) VoteAll(p Value) Value {
	if !k.live() {
		return Value{}
	}
	return k.vote("VoteAll", "all", p)
}

// VoteAny reports whether p holds in some lane of the warp.
func (k *Kernel) VoteAny(p Value) Value {
	if !k.live() {
		return Value{}
	}
	return k.vote("VoteAny", "any", p)
}

// VoteUni reports whether p is the same in every lane of the warp.
func (k *Kernel) VoteUni(p Value) Value {
	if !k.live() {
		return Value{}
	}
	return k.vote("VoteUni", "uni", p)
}

// Ballot returns a U32 with bit i set when p holds in lane i.
func (k *Kernel) Ballot(p Value) Value {
	if !k.live() {
		return Value{}
	}
	return k.vote("Ballot", "ballot", p)
}

// ActiveMask returns the mask of the warp's active lanes.
func (k *Kernel) ActiveMask() Value {
	if !k.live() {
		return Value{}
	}
	d := k.reg(U32)
	k.emit(&ptx.Instr{Op: "activemask", Types: []ptx.Type{ptx.B32}, Args: []ptx.Operand{d}})
	return Value{k: k, t: U32, op: d}
}

// SyncWarp waits for every lane of the warp (bar.warp.sync).
func (k *Kernel) SyncWarp() {
	if !k.live() {
		return
	}
	k.uniformWarp("SyncWarp")
	k.emit(&ptx.Instr{Op: "bar.warp.sync", Args: []ptx.Operand{ptx.IntImm(ptx.B32, FullMask)}})
}

// ElectOne returns a Bool true in exactly one active lane of the warp: elect.sync on sm_90
// and later, the lowest active lane before.
func (k *Kernel) ElectOne() Value {
	if !k.live() {
		return Value{}
	}
	defer k.hold()()
	if k.target.SM() >= 90 {
		k.uniformWarp("ElectOne")
		d := k.reg(Bool)
		k.emit(&ptx.Instr{Op: "elect.sync", Args: []ptx.Operand{ptx.Pair{A: ptx.Sink{}, B: d}, ptx.IntImm(ptx.B32, FullMask)}})
		return Value{k: k, t: Bool, op: d}
	}
	m := k.ActiveMask()
	low := m.And(m.Neg2())
	bit := k.Const(U32, 1).Shl(k.LaneID())
	return low.Eq(bit)
}

// Neg2 returns the two's complement negation of an unsigned integer (0 - v).
func (v Value) Neg2() Value {
	if v.k == nil {
		return v
	}
	return v.k.Const(v.t, 0).Sub(v)
}

// NamedBarrier waits at barrier id (0..15) until threads threads (a multiple of 32, at most
// 1024) arrive. An id NamedBarrierFor gave a name is a build error: name barriers or number
// them, not both; so is a count above the kernel's LaunchBounds (it would never complete).
func (k *Kernel) NamedBarrier(id, threads int) {
	if !k.live() {
		return
	}
	if id < 0 || id > 15 || threads <= 0 || threads%32 != 0 || threads > 1024 {
		k.errorf("NamedBarrier: id %d must be 0..15 and threads %d a multiple of 32 in 32..1024 (a block has at most 1024 threads)", id, threads)
		return
	}
	if !k.useBarID("NamedBarrier", id, threads) {
		return
	}
	k.emit(&ptx.Instr{Op: "barrier.sync", Args: []ptx.Operand{ptx.IntImm(ptx.U32, int64(id)), ptx.IntImm(ptx.U32, int64(threads))}})
}

// NamedBarrierArrive signals barrier id without waiting (producer side).
func (k *Kernel) NamedBarrierArrive(id, threads int) {
	if !k.live() {
		return
	}
	if id < 0 || id > 15 || threads <= 0 || threads%32 != 0 || threads > 1024 {
		k.errorf("NamedBarrierArrive: id %d must be 0..15 and threads %d a multiple of 32 in 32..1024 (a block has at most 1024 threads)", id, threads)
		return
	}
	if !k.useBarID("NamedBarrierArrive", id, threads) {
		return
	}
	k.emit(&ptx.Instr{Op: "barrier.arrive", Args: []ptx.Operand{ptx.IntImm(ptx.U32, int64(id)), ptx.IntImm(ptx.U32, int64(threads))}})
}

// WarpReduce combines v over the warp's 32 lanes with op; every lane gets the result.
// 32-bit integers use redux.sync on sm_80 and later, others a butterfly of shuffles.
func (k *Kernel) WarpReduce(v Value, op ReduceOp) Value {
	if !k.live() {
		return Value{}
	}
	defer k.hold()()
	if !k.checkReduce("WarpReduce", op, v) {
		return k.poison(v.t)
	}
	if (v.t == U32 || v.t == I32) && k.target.SM() >= 80 {
		name := [...]string{"add", "max", "min", "and", "or", "xor"}[op]
		t := v.t
		if op >= BitAnd {
			t = ptx.B32
		}
		k.uniformWarp("WarpReduce")
		d := k.reg(v.t)
		k.emit(&ptx.Instr{Op: "redux.sync", Q: []string{name}, Types: []ptx.Type{t}, Args: []ptx.Operand{d, k.operand(v), ptx.IntImm(ptx.B32, FullMask)}})
		return Value{k: k, t: v.t, op: d}
	}
	acc := v
	for s := 16; s >= 1; s /= 2 {
		acc = op.combine(acc, k.ShuffleXor(acc, s))
	}
	return acc
}

// BlockReduce combines v over every thread of the block with op (warp reductions, then one
// warp over the per-warp results in shared memory of its own); every thread gets the
// result. The block
// is one-dimensional with a multiple of 32 threads (up to 1024). It contains barriers: call
// it from every thread of the block.
func (k *Kernel) BlockReduce(v Value, op ReduceOp) Value {
	if !k.live() {
		return Value{}
	}
	defer k.hold()()
	if !k.checkReduce("BlockReduce", op, v) {
		return k.poison(v.t)
	}
	smem := k.SharedArray(v.t, 32)
	lane := k.LaneID()
	warp := k.WarpID()
	nwarps := k.BlockDim(X).Shr(5)
	w := k.WarpReduce(v, op)
	k.If(lane.Eq(0), func() { k.Store(smem.At(warp), w) })
	k.SyncThreads()
	r := k.Var(v.t, k.identity(op, v.t))
	k.If(lane.Lt(nwarps), func() { k.Set(r, k.Load(smem.At(lane))) })
	return k.WarpReduce(r, op)
}
