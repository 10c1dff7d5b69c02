package dsl

import "github.com/kgen-dev/kgen/ptx"

// A block-wide barrier (SyncThreads, ClusterSync) inside a k.If whose condition depends on
// the thread's index is reached by some threads of the block and not by others: on a GPU
// the block hangs or the barrier releases early. The builder refuses the obvious cases:
// the condition's register derives, through the instructions emitted so far, from
// %tid, %laneid or %warpid (a load from such an address counts; a bar.red result, uniform
// across the block, does not). A condition uniform at run time in a way the builder cannot
// see (tid < ntid) is refused too; write it without the thread index.

// divCond is an open If (or Else) whose condition is a register: where it was written.
type divCond struct {
	reg ptx.Reg
	pos ptx.Pos
}

// divState tracks which registers derive from the thread index (taint), scanned lazily up
// to scanned instructions of the body, and the open Ifs' conditions.
type divState struct {
	conds   []divCond
	taint   map[uint64]bool
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
		if k.div.taint[regKey(c.reg)] {
			k.errorf("%s inside k.If at %s, whose condition depends on the thread index (%%tid, %%laneid): the threads that skip the branch never reach the barrier, so the block hangs or the barrier releases early; move the barrier out of the If (a named barrier of the branch's threads, NamedBarrierFor, synchronizes a subset)", what, posOf(c.pos))
			return
		}
	}
}

// scanTaint extends the taint over the instructions emitted since the last scan: an
// instruction's first operand (its destination) is tainted when its guard or any other
// operand reads %tid, %laneid, %warpid or a tainted register. Registers assigned more than
// once (Var) stay tainted once any assignment is.
func (k *Kernel) scanTaint() {
	d := &k.div
	if d.taint == nil {
		d.taint = map[uint64]bool{}
	}
	body := k.fn.Body
	if d.scanned > len(body) {
		d.scanned = len(body) // Else removed the If's closing label
	}
	for _, in := range body[d.scanned:] {
		if in.IsPseudo() || len(in.Args) == 0 || in.Op == "bar.red" {
			continue
		}
		dst := in.Args[0]
		tainted := in.Guard != nil && d.taint[regKey(*in.Guard)]
		for _, a := range in.Args[1:] {
			if tainted = tainted || k.readsThread(a); tainted {
				break
			}
		}
		if tainted {
			taintDst(d.taint, dst)
		}
	}
	d.scanned = len(body)
}

// readsThread reports whether operand a reads the thread index or a tainted register.
func (k *Kernel) readsThread(a ptx.Operand) bool {
	switch a := a.(type) {
	case ptx.Reg:
		return k.div.taint[regKey(a)]
	case ptx.Special:
		s := string(a)
		return len(s) >= 4 && s[:4] == "%tid" || s == "%laneid" || s == "%warpid"
	case ptx.Not:
		return k.div.taint[regKey(a.P)]
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
func taintDst(t map[uint64]bool, dst ptx.Operand) {
	switch d := dst.(type) {
	case ptx.Reg:
		t[regKey(d)] = true
	case ptx.Vec:
		for _, x := range d {
			taintDst(t, x)
		}
	case ptx.Pair:
		taintDst(t, d.A)
		taintDst(t, d.B)
	}
}
