package emu

import (
	"github.com/kgen-dev/kgen/ptx"
)

// instrDecl returns the block-scoped declaration an instruction carries, if any.
func instrDecl(in *ptx.Instr) *ptx.Var { return in.Decl }

// pairOf splits a "a|b" operand.
func pairOf(o ptx.Operand) (a, b ptx.Operand, ok bool) {
	if p, ok := o.(ptx.Pair); ok {
		return p.A, p.B, true
	}
	return nil, nil, false
}

// notOf unwraps a negated predicate "!p".
func notOf(o ptx.Operand) (ptx.Reg, bool) {
	if n, ok := o.(ptx.Not); ok {
		return n.P, true
	}
	return ptx.Reg{}, false
}
