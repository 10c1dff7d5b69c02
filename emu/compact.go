package emu

import (
	"math/bits"
	"sort"

	"github.com/kgen-dev/kgen/ptx"
)

// Register compaction. Kernels from the DSL are in SSA style: hundreds of virtual registers,
// few live at once. After decoding, each function's registers are packed into as few slots
// as their live ranges allow (per-thread liveness on the control-flow graph; each lane owns
// its element of a slot, so divergent lanes cannot disturb each other). This shrinks every
// warp's register file (memory and cache) without changing what a kernel computes.

// forSlots calls f for every slot operand of an instruction, saying whether it is written.
func forSlots(di *dinst, f func(p *int32, def bool)) {
	if di.guard >= 0 {
		f(&di.guard, false)
	}
	for _, p := range []*int32{&di.a, &di.b, &di.c, &di.e} {
		if *p >= 0 {
			f(p, false)
		}
	}
	for i := range di.av {
		if di.av[i] >= 0 {
			f(&di.av[i], false)
		}
	}
	for i := range di.argOps {
		if di.argOps[i].slot >= 0 {
			f(&di.argOps[i].slot, false)
		}
	}
	for _, s := range di.sub {
		if s != nil && s.a >= 0 && s.base == baseReg {
			f(&s.a, false)
		}
	}
	if di.d >= 0 {
		f(&di.d, true)
	}
	if di.d2 >= 0 {
		f(&di.d2, true)
	}
	for i := range di.dv {
		if di.dv[i] >= 0 {
			f(&di.dv[i], true)
		}
	}
	for i := range di.retOps {
		if di.retOps[i].slot >= 0 {
			f(&di.retOps[i].slot, true)
		}
	}
}

type bitset []uint64

func newBits(n int) bitset         { return make(bitset, (n+63)/64) }
func (b bitset) set(i int)         { b[i/64] |= 1 << (i % 64) }
func (b bitset) clr(i int)         { b[i/64] &^= 1 << (i % 64) }
func (b bitset) copyFrom(o bitset) { copy(b, o) }
func (b bitset) or(o bitset) (c bool) {
	for i := range b {
		n := b[i] | o[i]
		if n != b[i] {
			b[i], c = n, true
		}
	}
	return c
}

// compact renumbers every slot of the program: the sink, constants and special registers
// first (in their order), then each function's registers packed by live range.
func (d *decoder) compact() {
	p := d.p
	// Which old slots are registers, and of which function; b128 registers take two slots.
	regs := map[int32]regInfo{}
	for k, s := range d.regs {
		regs[s] = regInfo{k.f, k.t == ptx.B128}
	}
	remap := map[int32]int32{}
	next := int32(0)
	// Non-register slots keep their order (constant pairs of b128 stay adjacent).
	isReg := map[int32]bool{}
	for s, r := range regs {
		isReg[s] = true
		if r.wide {
			isReg[s+32] = true
		}
	}
	for s := int32(0); s < int32(p.nslots*32); s += 32 {
		if !isReg[s] {
			remap[s] = next
			next += 32
		}
	}
	for _, df := range p.flist {
		if df.extern {
			continue
		}
		next = d.packFunction(df, regsOf(regs, df.idx), remap, next)
	}
	// Registers never referenced by code (possible only for malformed input) keep a slot.
	for s, r := range regs {
		if _, ok := remap[s]; !ok {
			remap[s] = next
			next += 32
			if r.wide {
				remap[s+32] = next
				next += 32
			}
		}
	}
	for i := range p.code {
		forSlots(&p.code[i], func(q *int32, _ bool) {
			if n, ok := remap[*q]; ok {
				*q = n
			}
		})
	}
	for i := range p.inits {
		p.inits[i].slot = remap[p.inits[i].slot]
	}
	for k, s := range d.regs {
		d.regs[k] = remap[s]
	}
	d.sink = remap[d.sink]
	p.nslots = int(next / 32)
}

type regInfo struct {
	fi   int
	wide bool
}

// regsOf lists the register slots of function fi and whether each is a b128 pair.
func regsOf(regs map[int32]regInfo, fi int) map[int32]bool {
	out := map[int32]bool{}
	for s, r := range regs {
		if r.fi == fi {
			out[s] = r.wide
		}
	}
	return out
}

// packFunction assigns new slots (from next on) to the registers of df by interval packing
// over per-thread liveness; it returns the next free slot base.
func (d *decoder) packFunction(df *dfunc, regs map[int32]bool, remap map[int32]int32, next int32) int32 {
	p := d.p
	if len(regs) == 0 {
		return next
	}
	olds := make([]int32, 0, len(regs))
	for s := range regs {
		olds = append(olds, s)
	}
	sort.Slice(olds, func(i, j int) bool { return olds[i] < olds[j] })
	idx := map[int32]int{}
	for i, s := range olds {
		idx[s] = i
	}
	n := len(olds)
	lo, hi := df.entry, df.end
	cnt := int(hi - lo)
	uses := make([][]int, cnt)
	defs := make([][]int, cnt)
	for pc := lo; pc < hi; pc++ {
		di := &p.code[pc]
		forSlots(di, func(q *int32, def bool) {
			r, ok := idx[*q]
			if !ok {
				return
			}
			if def {
				defs[pc-lo] = append(defs[pc-lo], r)
				if di.guard >= 0 || di.kind == ctlWarpSync || di.kind == ctlBar || di.kind == ctlExtern {
					// A predicated (or partially executed) write keeps the old value for the
					// lanes that skip it: it reads the register too.
					uses[pc-lo] = append(uses[pc-lo], r)
				}
			} else {
				uses[pc-lo] = append(uses[pc-lo], r)
			}
		})
	}
	succ := func(pc int32) []int32 {
		di := &p.code[pc]
		var out []int32
		fall := pc+1 < hi
		switch di.kind {
		case ctlBra:
			out = append(out, di.target)
			if di.guard < 0 {
				fall = false
			}
		case ctlRet, ctlExit, ctlTrap:
			if di.guard < 0 {
				fall = false
			}
		}
		if fall {
			out = append(out, pc+1)
		}
		return out
	}
	liveIn := make([]bitset, cnt)
	liveOut := make([]bitset, cnt)
	for i := range liveIn {
		liveIn[i], liveOut[i] = newBits(n), newBits(n)
	}
	tmp := newBits(n)
	for changed := true; changed; {
		changed = false
		for pc := hi - 1; pc >= lo; pc-- {
			i := pc - lo
			for _, s := range succ(pc) {
				if s >= lo && s < hi {
					if liveOut[i].or(liveIn[s-lo]) {
						changed = true
					}
				}
			}
			tmp.copyFrom(liveOut[i])
			for _, r := range defs[i] {
				tmp.clr(r)
			}
			for _, r := range uses[i] {
				tmp.set(r)
			}
			if liveIn[i].or(tmp) {
				changed = true
			}
		}
	}
	// Live intervals: every pc where a register is live in or out, defined or used.
	first := make([]int32, n)
	last := make([]int32, n)
	for r := range first {
		first[r], last[r] = -1, -1
	}
	mark := func(r int, pc int32) {
		if first[r] < 0 || pc < first[r] {
			first[r] = pc
		}
		if pc > last[r] {
			last[r] = pc
		}
	}
	for i := 0; i < cnt; i++ {
		pc := lo + int32(i)
		for w := range liveIn[i] {
			for x := liveIn[i][w] | liveOut[i][w]; x != 0; x &= x - 1 {
				mark(w*64+bits.TrailingZeros64(x), pc)
			}
		}
		for _, r := range defs[i] {
			mark(r, pc)
		}
		for _, r := range uses[i] {
			mark(r, pc)
		}
	}
	// Interval packing: registers sorted by start; a slot is free again after its last use.
	order := make([]int, 0, n)
	for r := 0; r < n; r++ {
		if first[r] >= 0 {
			order = append(order, r)
		}
	}
	sort.Slice(order, func(i, j int) bool { return first[order[i]] < first[order[j]] })
	type slotEnd struct {
		base int32
		end  int32
	}
	var narrow []slotEnd // free narrow slots with the pc after which they are free
	for _, r := range order {
		old := olds[r]
		if regs[old] { // b128: a fresh pair
			remap[old], remap[old+32] = next, next+32
			next += 64
			continue
		}
		placed := false
		for i := range narrow {
			if narrow[i].end < first[r] {
				remap[old] = narrow[i].base
				narrow[i].end = last[r]
				placed = true
				break
			}
		}
		if !placed {
			remap[old] = next
			narrow = append(narrow, slotEnd{next, last[r]})
			next += 32
		}
	}
	return next
}
