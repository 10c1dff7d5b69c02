package dsl

import "github.com/kgen-dev/kgen/ptx"

// Element-wise arithmetic on register fragments, so that kernel bodies combine fragments
// (CuTe DSL's frg_acc.store(frg_in.load() + frg_acc.load())) instead of looping over
// []Value. The results are fragments of values: read them (Get, Values, Copy to memory,
// further Map/Zip); Set needs a fragment made by Fragment, whose elements are variables.

// FragmentOf returns a one-dimensional register fragment holding vals (at least one, all of
// one type).
func (k *Kernel) FragmentOf(vals ...Value) Tensor {
	if !k.live() {
		return Tensor{}
	}
	defer k.hold()()
	if len(vals) == 0 {
		k.errorf("FragmentOf: no values")
		return k.badTensor(U32)
	}
	t := vals[0].t
	for i, v := range vals {
		if v.k != k {
			k.errorf("FragmentOf: value %d belongs to another kernel", i)
			return k.badTensor(t)
		}
		if v.t != t {
			k.errorf("FragmentOf: value %d is %s, value 0 %s", i, v.t, t)
			return k.badTensor(t)
		}
	}
	return k.valueFragment(t, append([]Value(nil), vals...))
}

// valueFragment makes a 1-D fragment of elem over regs.
func (k *Kernel) valueFragment(elem Type, regs []Value) Tensor {
	return Tensor{k: k, ptr: Ptr{k: k, elem: elem, space: ptx.SpaceReg},
		modes:  [][]leaf{{{shape: len(regs), stride: stride{c: 1}, cstride: 1}}},
		origin: []coord{{}}, bounds: []Value{{}}, regs: regs}
}

// Values returns a fragment's elements in order (colexicographic).
func (t Tensor) Values() []Value {
	if !t.IsFragment() {
		if t.k != nil {
			t.k.errorf("Values: not a register fragment (copy it into one first)")
		}
		return nil
	}
	return append([]Value(nil), t.regs...)
}

// Zip returns the fragment of f applied to the elements of t and u pairwise (same size), in
// t's shape.
func (t Tensor) Zip(u Tensor, f func(a, b Value) Value) Tensor {
	k := t.k
	if k == nil {
		return t
	}
	defer k.hold()()
	if !t.IsFragment() || !u.IsFragment() || u.k != k {
		k.errorf("Zip: both tensors must be register fragments of this kernel")
		return k.badTensor(t.ptr.elem)
	}
	if len(t.regs) != len(u.regs) {
		k.errorf("Zip: sizes differ: %d and %d elements", len(t.regs), len(u.regs))
		return k.badTensor(t.ptr.elem)
	}
	if f == nil {
		k.errorf("Zip: nil function")
		return k.badTensor(t.ptr.elem)
	}
	out := make([]Value, len(t.regs))
	for i := range t.regs {
		out[i] = f(t.regs[i], u.regs[i])
	}
	r := k.mapped("Zip", out)
	if !r.IsFragment() || len(r.regs) != len(out) {
		return r
	}
	return t.fragMap("Zip", r.ptr.elem, func(i int, _ Value) Value { return out[i] }) // t's shape
}

// mapped makes the fragment of Map's or Zip's results, which must be of one type.
func (k *Kernel) mapped(what string, out []Value) Tensor {
	if len(out) == 0 {
		k.errorf("%s: an empty fragment", what)
		return k.badTensor(U32)
	}
	for i, v := range out {
		if v.k != k {
			k.errorf("%s: the function's result %d is not a value of this kernel", what, i)
			return k.badTensor(U32)
		}
		if v.t != out[0].t {
			k.errorf("%s: the function's results differ in type: %s and %s", what, out[0].t, v.t)
			return k.badTensor(out[0].t)
		}
	}
	return k.valueFragment(out[0].t, out)
}
