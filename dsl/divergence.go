package dsl

import "github.com/kgen-dev/kgen/ptx"

// A block-wide barrier (SyncThreads, ClusterSync) inside a k.If whose condition depends on
// the thread's index is reached by some threads of the block and not by others: on a GPU
// the block hangs or the barrier releases early. The builder refuses the obvious cases:
// the condition's register derives, through the instructions emitted so far, from
// %tid, %laneid or %warpid (a load from such an address counts; a bar.red result, uniform
// across the block, does not). A condition uniform at run time in a way the builder cannot
// see (tid < ntid) is refused too; write it without the thread index.
//
// The warp collectives (shuffles, votes, WarpReduce, SyncWarp, ElectOne, ActiveMask) name the
// whole warp in their member mask, so every lane must reach them: one inside a k.If whose
// condition differs between the lanes of a warp is refused the same way. Lane-varying
// values derive from %laneid, %tid or elect.sync's predicate; a shift right by 5 or more, a
// division by a multiple of 32, an and with a mask of clear low 5 bits, a comparison with a
// warp boundary (tid < 128), a vote, redux, activemask or an index shuffle from a uniform
// lane give a warp-uniform value again (so k.WarpID(), warpgroup roles and a warp's
// broadcast are uniform). The rules assume the thread index's warps are aligned (1-D
// blocks): they miss some lane-varying values, and refuse a condition that is uniform only
// at run time (tid < n with n a multiple of 32), as the barrier rule does.

// divCond is an open If (or Else) whose condition is a register: where it was written.
type divCond struct {
	reg ptx.Reg
	pos ptx.Pos
}

// divState tracks which registers derive from the thread index (taint) and which may differ
// between the lanes of a warp (lane), scanned lazily up to scanned instructions of the body,
// and the open Ifs' conditions.
type divState struct {
	conds   []divCond
	taint   regSet
	lane    regSet
	scanned int
}

// inCond runs f inside the If whose condition is cond (a register; constants are
// uniform).
func (k *Kernel) inCond(cond Value, f func()) {
	r, ok := cond.op.(ptx.Reg)
	if !ok {
		k.scoped(f)
		return
	}
	pos := ptx.Pos{}
	if !k.noLoc {
		pos = callerPos()
	}
	k.div.conds = append(k.div.conds, divCond{r, pos})
	defer func() { k.div.conds = k.div.conds[:len(k.div.conds)-1] }()
	k.scoped(f)
}

// uniformBarrier records an error when a block-wide barrier (what) is emitted inside an If
// whose condition derives from the thread index.
func (k *Kernel) uniformBarrier(what string) {
	if len(k.div.conds) == 0 {
		return
	}
	k.scanTaint()
	for _, c := range k.div.conds {
		if k.div.taint.has(c.reg) {
			k.errorf("%s inside k.If at %s, whose condition depends on the thread index (%%tid, %%laneid): the threads that skip the branch never reach the barrier, so the block hangs or the barrier releases early; move the barrier out of the If (a named barrier of the branch's threads, NamedBarrierFor, synchronizes a subset)", what, posOf(c.pos))
			return
		}
	}
}

// uniformWarp records an error when a warp collective (what) is emitted inside an If whose
// condition may differ between the lanes of a warp.
func (k *Kernel) uniformWarp(what string) {
	if len(k.div.conds) == 0 {
		return
	}
	k.scanTaint()
	for _, c := range k.div.conds {
		if k.div.lane.has(c.reg) {
			k.errorf("%s inside k.If at %s, whose condition differs between the lanes of a warp (it depends on %%laneid, %%tid or ElectOne): the collective names every lane of the warp in its member mask, so the lanes that skip the branch leave it undefined (a hang or garbage on a GPU); call it outside the If (with the If's value as an operand) or branch on a warp-uniform value (k.WarpID())", what, posOf(c.pos))
			return
		}
	}
}

// scanTaint extends the taints over the instructions emitted since the last scan: an
// instruction's first operand (its destination) is tainted when its guard or any other
// operand reads %tid, %laneid, %warpid or a tainted register, and lane-varying when its
// guard or an operand is (laneVarying). Registers assigned more than once (Var) stay
// tainted once any assignment is.
func (k *Kernel) scanTaint() {
	d := &k.div
	body := k.fn.Body
	if d.scanned > len(body) {
		d.scanned = len(body) // Else removed the If's closing label
	}
	for _, in := range body[d.scanned:] {
		if in.IsPseudo() || len(in.Args) == 0 || in.Op == "bar.red" {
			continue
		}
		dst := in.Args[0]
		if in.Op == "elect.sync" { // one lane's predicate true
			taintDst(&d.taint, dst)
			taintDst(&d.lane, dst)
			continue
		}
		tainted := in.Guard != nil && d.taint.has(*in.Guard)
		for _, a := range in.Args[1:] {
			if tainted = tainted || k.readsThread(a); tainted {
				break
			}
		}
		if tainted {
			taintDst(&d.taint, dst)
		}
		if k.laneVarying(in) {
			taintDst(&d.lane, dst)
		}
	}
	d.scanned = len(body)
}

// laneVarying reports whether in's destination may differ between the lanes of a warp: its
// guard or an operand reads %laneid, %tid or a lane-varying register, unless the
// instruction makes its result warp-uniform (see the package comment above).
func (k *Kernel) laneVarying(in *ptx.Instr) bool {
	switch in.Op {
	case "vote.sync", "redux.sync", "activemask":
		return false
	case "shfl.sync":
		if len(in.Q) > 0 && in.Q[0] == "idx" && len(in.Args) > 2 && !k.readsLane(in.Args[2]) {
			return false // every lane reads one lane's word
		}
	case "shr":
		if len(in.Args) > 2 && immAtLeast(in.Args[2], 5) {
			return false
		}
	case "div":
		if len(in.Args) > 2 && immMultipleOf(in.Args[2], 32) {
			return false
		}
	case "setp":
		// tid < 32k (or >= 32k, <= 32k-1, > 32k-1) splits the block at a warp boundary.
		if len(in.Q) > 0 && len(in.Args) > 2 && !in.Types[0].IsFloat() {
			switch in.Q[0] {
			case "lt", "ge", "lo", "hs":
				if immMultipleOf(in.Args[2], 32) {
					return false
				}
			case "le", "gt", "ls", "hi":
				if im, ok := in.Args[2].(ptx.Imm); ok && im.Bits < 1<<63 && im.Bits%32 == 31 {
					return false
				}
			}
		}
	case "and":
		for _, a := range in.Args[1:] {
			if im, ok := a.(ptx.Imm); ok && !im.Type.IsFloat() && im.Bits&31 == 0 {
				return false
			}
		}
	}
	if in.Guard != nil && k.div.lane.has(*in.Guard) {
		return true
	}
	for _, a := range in.Args[1:] {
		if k.readsLane(a) {
			return true
		}
	}
	return false
}

// immAtLeast reports whether a is an integer immediate of at least n (shift counts are
// read as unsigned).
func immAtLeast(a ptx.Operand, n uint64) bool {
	im, ok := a.(ptx.Imm)
	return ok && !im.Type.IsFloat() && im.Bits >= n
}

// immMultipleOf reports whether a is a positive integer immediate multiple of n.
func immMultipleOf(a ptx.Operand, n uint64) bool {
	im, ok := a.(ptx.Imm)
	return ok && !im.Type.IsFloat() && im.Bits > 0 && im.Bits < 1<<63 && im.Bits%n == 0
}

// readsLane reports whether operand a reads %laneid, %tid or a lane-varying register.
func (k *Kernel) readsLane(a ptx.Operand) bool {
	switch a := a.(type) {
	case ptx.Reg:
		return k.div.lane.has(a)
	case ptx.Special:
		s := string(a)
		return len(s) >= 4 && s[:4] == "%tid" || s == "%laneid"
	case ptx.Not:
		return k.div.lane.has(a.P)
	case ptx.Addr:
		return a.Base != nil && k.readsLane(a.Base)
	case ptx.Vec:
		for _, x := range a {
			if k.readsLane(x) {
				return true
			}
		}
	}
	return false
}

// readsThread reports whether operand a reads the thread index or a tainted register.
func (k *Kernel) readsThread(a ptx.Operand) bool {
	switch a := a.(type) {
	case ptx.Reg:
		return k.div.taint.has(a)
	case ptx.Special:
		s := string(a)
		return len(s) >= 4 && s[:4] == "%tid" || s == "%laneid" || s == "%warpid"
	case ptx.Not:
		return k.div.taint.has(a.P)
	case ptx.Addr:
		return a.Base != nil && k.readsThread(a.Base)
	case ptx.Vec:
		for _, x := range a {
			if k.readsThread(x) {
				return true
			}
		}
	}
	return false
}

// taintDst marks the registers of a destination operand.
func taintDst(t *regSet, dst ptx.Operand) {
	switch d := dst.(type) {
	case ptx.Reg:
		t.add(d)
	case ptx.Vec:
		for _, x := range d {
			taintDst(t, x)
		}
	case ptx.Pair:
		taintDst(t, d.A)
		taintDst(t, d.B)
	}
}
