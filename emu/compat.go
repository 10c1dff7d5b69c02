package emu

import (
	"reflect"

	"github.com/kgen-dev/kgen/ptx"
)

// The ptx package is growing operand kinds (Pair "a|b", Not "!p") and body declarations
// (Instr.Decl, scope brackets "{" "}") while this package is written. These helpers reach
// them by name so that emu builds against either version of ptx.

// instrDecl returns the block-scoped declaration an instruction carries, if any.
func instrDecl(in *ptx.Instr) *ptx.Var {
	v := reflect.ValueOf(in).Elem().FieldByName("Decl")
	if !v.IsValid() || v.IsNil() {
		return nil
	}
	d, _ := v.Interface().(*ptx.Var)
	return d
}

// pairOf splits a "a|b" operand.
func pairOf(o ptx.Operand) (a, b ptx.Operand, ok bool) {
	if o == nil {
		return nil, nil, false
	}
	v := reflect.ValueOf(o)
	if v.Kind() != reflect.Struct || v.Type().Name() != "Pair" {
		return nil, nil, false
	}
	fa, fb := v.FieldByName("A"), v.FieldByName("B")
	if !fa.IsValid() || !fb.IsValid() {
		return nil, nil, false
	}
	a, _ = fa.Interface().(ptx.Operand)
	b, _ = fb.Interface().(ptx.Operand)
	return a, b, true
}

// notOf unwraps a negated predicate "!p".
func notOf(o ptx.Operand) (ptx.Reg, bool) {
	if o == nil {
		return ptx.Reg{}, false
	}
	v := reflect.ValueOf(o)
	if v.Kind() != reflect.Struct || v.Type().Name() != "Not" {
		return ptx.Reg{}, false
	}
	f := v.FieldByName("P")
	if !f.IsValid() {
		return ptx.Reg{}, false
	}
	r, ok := f.Interface().(ptx.Reg)
	return r, ok
}
