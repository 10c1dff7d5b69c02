package dsl

import (
	"fmt"

	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/ptx"
)

// Func is an external device function the kernel calls (for example NVSHMEM's
// nvshmemx_putmem_block), declared with its PTX parameter types.
type Func struct {
	k    *Kernel
	decl *ptx.Func
	rets []Type
	args []Type
}

// Name returns the function's name ("" for a nil or zero Func).
func (f *Func) Name() string {
	if f == nil || f.decl == nil {
		return ""
	}
	return f.decl.Name
}

// Extern declares an external device function with return types rets (at most one) and
// parameter types args, as .param types: pointers and 64-bit integers are U64/B64, int and
// enums B32/I32. Declaring the same name twice returns the first declaration when the
// signatures agree, and records an error when they differ.
func (k *Kernel) Extern(name string, rets []Type, args ...Type) *Func {
	if !k.live() {
		return nil
	}
	if f, ok := k.externs[name]; ok {
		if fmt.Sprint(f.rets, f.args) != fmt.Sprint(rets, args) {
			k.errorf("Extern: %s declared twice with different signatures: %v%v and %v%v", errName(name), f.rets, f.args, rets, args)
		}
		return f
	}
	f := &Func{k: k, rets: rets, args: args}
	d := &ptx.Func{Name: name, Extern: true}
	if !ptx.ValidIdent(name) {
		k.errorf("Extern: %s is not a valid PTX identifier", excerpt.Quote(name))
	}
	if len(rets) > 1 {
		k.errorf("Extern: %s returns %d values; PTX functions here return at most one", errName(name), len(rets))
	}
	for i, t := range rets {
		d.Rets = append(d.Rets, ptx.Param{Name: fmt.Sprintf("%s_ret%d", name, i), Type: abiType(t)})
	}
	for i, t := range args {
		if !hasMem(t) {
			k.errorf("Extern: %s parameter %d has no PTX parameter type %s", errName(name), i, t)
		}
		d.Params = append(d.Params, ptx.Param{Name: fmt.Sprintf("%s_param%d", name, i), Type: abiType(t)})
	}
	f.decl = d
	k.externs[name] = f
	// Declarations come before the kernel that calls them.
	k.mod.Funcs = append([]*ptx.Func{d}, k.mod.Funcs...)
	return f
}

// Call calls f with args (Values of the declared types, Go numbers, or Ptrs for U64/B64
// parameters) and returns its result, or the zero Value for a function with no result.
func (k *Kernel) Call(f *Func, args ...any) Value {
	if !k.live() {
		return Value{}
	}
	defer k.hold()()
	if f == nil || f.k != k {
		k.errorf("Call: the function was declared by another kernel (use this kernel's Extern)")
		return Value{}
	}
	if len(args) != len(f.args) {
		k.errorf("Call: %s takes %d arguments, got %d", f.Name(), len(f.args), len(args))
		return k.retPoison(f)
	}
	ops := make([]ptx.Operand, len(args))
	for i, a := range args {
		t := f.args[i]
		if p, ok := a.(Ptr); ok {
			if !k.checkPtr(p, "Call") {
				return k.retPoison(f)
			}
			if t != U64 && t != ptx.B64 {
				k.errorf("Call: %s argument %d is a pointer, but the parameter is %s", f.Name(), i, t)
				return k.retPoison(f)
			}
			ops[i] = k.ptrValue(p).op
			continue
		}
		vt := t
		if t == ptx.B64 || t == ptx.B32 {
			if v, ok := a.(Value); ok && v.t.Bits() == t.Bits() && v.t != Bool {
				vt = v.t
			} else if t == ptx.B32 {
				vt = I32
			} else {
				vt = U64
			}
		}
		v, ok := k.val(a, vt, fmt.Sprintf("Call %s argument %d", f.Name(), i))
		if !ok {
			return k.retPoison(f)
		}
		op := k.operand(v)
		if im, isImm := op.(ptx.Imm); isImm {
			im.Type = abiType(t)
			op = im
		}
		ops[i] = op
	}
	var rets []ptx.Reg
	var out Value
	if len(f.rets) == 1 {
		r := k.reg(f.rets[0])
		rets = append(rets, r)
		out = Value{k: k, t: f.rets[0], op: r}
	}
	pos := k.pos()
	for _, in := range ptx.CallSeq(f.decl, rets, ops) {
		in.Pos = pos
		k.fn.Body = append(k.fn.Body, in)
	}
	return out
}

// abiType is the .param type of the PTX call ABI (what llc emits): .b32 for values of up to
// 32 bits (narrower integers are promoted, floats included: nvlink rejects an .f32
// prototype against llc's .b32 definition), .b64 for 64-bit values and pointers.
func abiType(t Type) Type {
	if t.Bits() <= 32 {
		return ptx.B32
	}
	return ptx.B64
}

func (k *Kernel) retPoison(f *Func) Value {
	if len(f.rets) == 1 {
		return k.poison(f.rets[0])
	}
	return Value{}
}

// ptrValue returns the pointer's full address (base plus constant offset) as a U64 Value.
func (k *Kernel) ptrValue(p Ptr) Value {
	if p.off == 0 {
		return p.addr
	}
	return p.addr.Add(uint64(p.off))
}

// PtrValue returns the address p holds as a U64 value (for passing to functions or storing).
func (k *Kernel) PtrValue(p Ptr) Value {
	if !k.live() {
		return Value{}
	}
	if !k.checkPtr(p, "PtrValue") {
		return k.poison(U64)
	}
	return k.ptrValue(p)
}

// PtrFrom makes a pointer to elem values in space from a U64 address value (for example one
// returned by nvshmem_ptr).
func (k *Kernel) PtrFrom(addr Value, elem Type, space ptx.Space) Ptr {
	if !k.live() {
		return Ptr{}
	}
	if !hasMem(elem) {
		k.errorf("PtrFrom: no memory type %s", typeName(elem))
		elem = U8
	}
	if !k.own(addr, "PtrFrom") {
		return Ptr{k: k, addr: k.poison(U64), elem: elem, space: space}
	}
	if addr.t != U64 && addr.t != I64 {
		k.errorf("PtrFrom: address is %s, not U64", addr.t)
		return Ptr{k: k, addr: k.poison(U64), elem: elem, space: space}
	}
	return Ptr{k: k, addr: addr, elem: elem, space: space}
}
