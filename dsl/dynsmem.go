package dsl

import "github.com/kgen-dev/kgen/ptx"

// dynSmemName is the module variable of dynamic shared memory.
const dynSmemName = "kgen_dynamic_smem"

// DynamicShared returns a pointer to the block's dynamic shared memory, viewed as elem
// values: the module declares `.extern .shared .align N .b8 kgen_dynamic_smem[];` and the
// launch gives its size in bytes (jit.LaunchConfig.SharedMem, emu.Launch.SharedBytes);
// DynamicSharedSize reads that size in the kernel. The memory follows the static shared
// memory (SharedArray).
//
// align is the alignment in bytes declared on the array (a power of two, at least the
// element size; 0 means 16, as SharedArray). CUDA guarantees only 16 whatever is declared
// (static shared variables come first), and the emulator gives exactly 16: regions needing
// more (TMA's swizzled boxes, wgmma descriptors) use DynamicSharedTile, which rounds the
// address up at run time. Every call returns the same memory, whatever elem: carve regions
// out of it with At, and view them through a layout with MakeTensor or MakeSwizzledTensor.
// All calls must ask for the same alignment.
func (k *Kernel) DynamicShared(elem Type, align int) Ptr {
	if !k.live() {
		return Ptr{}
	}
	bad := func(format string, a ...any) Ptr {
		k.errorf("DynamicShared: "+format, a...)
		if !hasMem(elem) {
			elem = U8 // a placeholder whose element size divides
		}
		return Ptr{k: k, addr: k.poison(U64), elem: elem, space: ptx.SpaceShared}
	}
	if !hasMem(elem) {
		return bad("no memory type %s", typeName(elem))
	}
	if align == 0 {
		align = 16
	}
	switch {
	case align < 0 || align&(align-1) != 0:
		return bad("alignment %d is not a power of two", align)
	case align < elem.Bytes():
		return bad("alignment %d is below the %d-byte %s element", align, elem.Bytes(), elem)
	case align > 1<<31:
		return bad("alignment %d is more than ptxas takes (2^31)", align)
	}
	v := k.dynSmemVar()
	switch {
	case v == nil:
		k.mod.Vars = append(k.mod.Vars, &ptx.Var{Space: ptx.SpaceShared, Name: dynSmemName, Type: ptx.B8, Array: -1, Align: align, Extern: true})
	case v.Align != align:
		return bad("dynamic shared memory was already requested with alignment %d, now %d; ask for one alignment (the largest needed) in every call", v.Align, align)
	}
	addr := k.memo(dynSmemName, U64, nil, func(d ptx.Reg) {
		k.emit(&ptx.Instr{Op: "mov", Types: []ptx.Type{ptx.U64}, Args: []ptx.Operand{d, ptx.Sym(dynSmemName)}})
	})
	return Ptr{k: k, addr: addr, elem: elem, space: ptx.SpaceShared, align: align}
}

// dynSmemVar returns the module's dynamic shared memory variable, nil before DynamicShared.
func (k *Kernel) dynSmemVar() *ptx.Var {
	for _, v := range k.mod.Vars {
		if v.Name == dynSmemName {
			return v
		}
	}
	return nil
}

// DynamicSharedSize returns %dynamic_smem_size (U32): the bytes of dynamic shared memory the
// launch gave the block, for kernels that size their use of DynamicShared at run time.
func (k *Kernel) DynamicSharedSize() Value {
	if !k.live() {
		return Value{}
	}
	return k.readSpecial("%dynamic_smem_size")
}
