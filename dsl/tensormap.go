package dsl

import (
	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/ptx"
)

// TensorMapBytes is the size of a TMA tensor map (CUtensorMap): it is passed by value as a
// 64-byte-aligned .param .b8 array of this many bytes.
const TensorMapBytes = 128

// TensorMap is a kernel parameter holding a TMA tensor map by value (CUDA's
// __grid_constant__ const CUtensorMap): `.param .align 64 .b8 name[128]`. The host builds it
// (jit.NewTensorMap) over a global buffer of Elem values; cp.async.bulk.tensor reads it
// through Addr.
type TensorMap struct {
	k    *Kernel
	addr Value
	elem Type
}

// Addr returns the map's generic address in a 64-bit register, the operand that
// cp.async.bulk.tensor and prefetch.tensormap take (ptxas refuses the parameter's name there).
func (m TensorMap) Addr() Value { return m.addr }

// Elem returns the element type of the tensor the map describes.
func (m TensorMap) Elem() Type { return m.elem }

// TensorMapParam declares a tensor-map kernel parameter over a tensor of elem values and
// returns its handle. Its generic address is taken once, at the declaration (mov of the
// parameter's name, then cvta.param). Tensor maps need sm_90 or newer.
func (k *Kernel) TensorMapParam(name string, elem Type) TensorMap {
	if !k.live() {
		return TensorMap{}
	}
	if elem == Bool || elem == ptx.NoType || elem.Bytes() == 0 {
		k.errorf("tensor map parameter %s: no memory type %s", excerpt.Quote(name), typeName(elem))
		elem = U8
	}
	if k.target.SM() < 90 {
		k.errorf("tensor map parameter %s: TMA tensor maps need sm_90 or newer (target %s)", excerpt.Quote(name), k.target)
	}
	if !k.addParamDecl(ptx.Param{Name: name, Type: ptx.B8, Array: TensorMapBytes, Align: 64}) {
		return k.tensorMapPlaceholder(elem)
	}
	k.paramInfo = append(k.paramInfo, ParamInfo{Name: name, Type: elem, TensorMap: true})
	p, d := k.reg(U64), k.reg(U64)
	k.emit(&ptx.Instr{Op: "mov", Types: []ptx.Type{ptx.U64}, Args: []ptx.Operand{p, ptx.Sym(name)}})
	k.emit(&ptx.Instr{Op: "cvta", Q: []string{"param"}, Types: []ptx.Type{ptx.U64}, Args: []ptx.Operand{d, p}})
	return TensorMap{k: k, addr: Value{k: k, t: U64, op: d}, elem: elem}
}

// tensorMapPlaceholder stands in for a tensor-map parameter not declared.
func (k *Kernel) tensorMapPlaceholder(elem Type) TensorMap {
	return TensorMap{k: k, addr: k.poison(U64), elem: elem}
}
